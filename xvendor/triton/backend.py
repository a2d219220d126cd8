"""The ``triton`` backend: launches the templates of ``xvendor.triton.kernels`` (and the
scaled FP8/MX ones of ``xvendor.triton.scaled_kernels``, built by ``scaled_launch``).

Runs on CUDA-key devices (NVIDIA and ROCm) with the config the dispatch layer passes
(``config=``, a tuned ``Config.to_dict()``) or else the arch's default
(``xvendor.triton.configs``), and on CPU tensors only under the Triton interpreter
(``TRITON_INTERPRET=1`` set before ``xvendor.triton.kernels`` is first imported), which
is how CI verifies the numerics without a GPU. Arguments arrive checked by ``xvendor.ops``;
the wrappers allocate, build the launch (``xvendor.triton.launch``) and launch — nothing
else. Tuning this backend is ``xvendor.triton.tunable``'s business, a layer above.

NOTE [interpreter bf16]: the interpreter's bf16 ``tl.dot`` is wrong (triton#11584), so
under the interpreter bf16 tiles are upcast to fp32 inside the kernel (``UPCAST``) before
``tl.dot``; compiled kernels always feed bf16 to the matrix instructions.
"""

from __future__ import annotations

import os

import torch

from . import launch, scaled_launch
from .launch import interpreting

__all__ = ["KERNELS", "gemm", "grouped_mm", "scaled_mm", "scaled_grouped_mm", "probe",
           "interpreting"]

# Tests set this to fill every output with NaN before the kernel writes it: proves the
# kernel writes every element (zero tails included) rather than relying on allocation.
POISON_OUTPUTS = False

_MAX_ELEMENTS = 2**31  # in-tile offsets are int32 (group bases are int64)


def probe() -> str | None:
    """``None`` when the backend can run here, else why not."""
    try:
        import triton  # noqa: F401
        interp = interpreting()
    except Exception as e:  # a broken install makes the backend unavailable, not a crash
        return f"triton is not usable: {type(e).__name__}: {e}"
    if interp or torch.cuda.is_available():
        return None
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return ("TRITON_INTERPRET was set after xvendor.triton.kernels was imported; set it "
                "before the first import to run the Triton interpreter on CPU tensors")
    return ("no CUDA/ROCm device (torch.cuda.is_available() is False); set TRITON_INTERPRET=1 "
            "before importing xvendor to run the Triton interpreter on CPU tensors")


def _empty(shape, dtype, device) -> torch.Tensor:
    out = torch.empty(shape, dtype=dtype, device=device)
    if POISON_OUTPUTS:
        out.fill_(float("nan"))
    return out


def _check_size(op: str, **tensors) -> None:
    for name, t in tensors.items():
        if t is not None and t.numel() >= _MAX_ELEMENTS:
            raise ValueError(f"xvendor.{op} (triton backend): {name} has {t.numel()} elements; "
                             f"the templates index tiles with int32 offsets and take under "
                             f"2**31 elements per tensor. Use backend='aten' for this size.")


def gemm(a, b, bias=None, out_dtype=None, *, config=None):
    out = _empty((a.shape[0], b.shape[1]), out_dtype or a.dtype, a.device)
    _check_size("gemm", a=a, b=b, out=out)
    cfg, backend_name, _ = launch._launch_setup(a.device, "gemm", config)
    if out.numel() == 0:
        return out
    # Looked up on the module at each call so that a test can wrap the builder and see the
    # grid and config of the real launch.
    kernel, grid, args, kwargs = launch.gemm_launch(a, b, bias, out, cfg, backend_name)
    kernel[grid](*args, **kwargs)
    return out


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None, *, config=None):
    out = _empty(launch.grouped_out_shape(a, b, offs), out_dtype or a.dtype, a.device)
    _check_size("grouped_mm", a=a, b=b, out=out)
    cfg, backend_name, programs = launch._launch_setup(a.device, "grouped_mm", config)
    if out.numel() == 0:
        return out
    kernel, grid, args, kwargs = launch.grouped_mm_launch(a, b, offs, bias, out, cfg,
                                                          backend_name, programs)
    kernel[grid](*args, **kwargs)
    return out


def scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0, bias=None,
              output_dtype=torch.bfloat16, *, config=None):
    """FP8/MX GEMM (``scaled_kernels``); recipe_a == recipe_b (the op checks it)."""
    out = _empty((a.shape[0], b.shape[1]), output_dtype, a.device)
    _check_size("scaled_mm", a=a, b=b, out=out)
    cfg, backend_name, _ = scaled_launch.launch_setup(a.device, "scaled_mm", config)
    if out.numel() == 0:
        return out
    kernel, grid, args, kwargs = scaled_launch.scaled_mm_launch(
        a, b, scale_a, recipe_a, scale_b, bias, out, cfg, backend_name)
    kernel[grid](*args, **kwargs)
    return out


def scaled_grouped_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=0,
                      swizzle_b=0, output_dtype=torch.bfloat16, *, config=None):
    """Ragged grouped FP8/MX GEMM (2Dx3D, 2Dx2D; ``scaled_kernels``)."""
    out = _empty(scaled_launch.scaled_grouped_out_shape(a, b, offs), output_dtype, a.device)
    _check_size("scaled_grouped_mm", a=a, b=b, out=out)
    cfg, backend_name, programs = scaled_launch.launch_setup(a.device, "scaled_grouped_mm",
                                                             config)
    if out.numel() == 0:
        return out
    kernel, grid, args, kwargs = scaled_launch.scaled_grouped_mm_launch(
        a, b, scale_a, recipe_a, scale_b, offs, out, cfg, backend_name, programs)
    kernel[grid](*args, **kwargs)
    return out


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "scaled_mm": scaled_mm,
           "scaled_grouped_mm": scaled_grouped_mm}
