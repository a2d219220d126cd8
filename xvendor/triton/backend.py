"""The ``triton`` backend: launches the templates of ``xvendor.triton.kernels``.

Runs on CUDA-key devices (NVIDIA and ROCm) with the arch's default config
(``xvendor.triton.configs``), and on CPU tensors only under the Triton interpreter
(``TRITON_INTERPRET=1`` set before ``xvendor.triton.kernels`` is first imported), which
is how CI verifies the numerics without a GPU. Arguments arrive checked by ``xvendor.ops``;
the wrappers allocate, pick the config, and launch — nothing else.

NOTE [interpreter bf16]: the interpreter's bf16 ``tl.dot`` is wrong (triton#11584), so
under the interpreter bf16 tiles are upcast to fp32 inside the kernel (``UPCAST``) before
``tl.dot``; compiled kernels always feed bf16 to the matrix instructions.
"""

from __future__ import annotations

import os

import torch

__all__ = ["KERNELS", "TUNABLE", "gemm", "grouped_mm", "gemm_launch", "grouped_mm_launch",
           "probe", "interpreting"]

# Tests set this to fill every output with NaN before the kernel writes it: proves the
# kernel writes every element (zero tails included) rather than relying on allocation.
POISON_OUTPUTS = False

_MAX_ELEMENTS = 2**31  # in-tile offsets are int32 (group bases are int64)
_kernels = None
_configs: dict = {}  # (device, template) -> (Config, triton backend name or None, programs)


def _load():
    global _kernels
    if _kernels is None:
        from . import kernels
        _kernels = kernels
    return _kernels


def interpreting() -> bool:
    """Whether the templates were built for the Triton interpreter (TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(_load().gemm_kernel, InterpretedFunction)


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


def _launch_setup(device: torch.device, template: str):
    """(config, Triton backend name or None under the interpreter, persistent programs)."""
    key = (device, template)
    hit = _configs.get(key)
    if hit is not None:
        return hit
    from . import configs
    if device.type == "cpu":
        if not interpreting():
            raise RuntimeError("xvendor triton backend: CPU tensors run only under the Triton "
                               "interpreter; set TRITON_INTERPRET=1 before importing xvendor "
                               "(or move the tensors to a CUDA/ROCm device)")
        hit = (configs.INTERPRETER, None, 3)  # 3 programs: the persistent loop wraps
    else:
        from .. import registry
        info = registry.device_info(device)
        cfg = configs.default(info.arch, template, info.vendor)
        name = None if interpreting() else ("hip" if torch.version.hip else "cuda")
        hit = (cfg, name, max(1, info.cu_count))
    _configs[key] = hit
    return hit


def _meta(cfg, backend_name, dtype) -> dict:
    """Constexprs + compile options of one launch."""
    interp = backend_name is None
    nvidia_tf32 = backend_name == "cuda" and torch.backends.cuda.matmul.allow_tf32
    meta = dict(cfg.constexprs(),
                PRECISION="tf32" if nvidia_tf32 else "ieee",
                UPCAST=interp and dtype == torch.bfloat16)  # NOTE [interpreter bf16]
    if not interp:
        meta.update(cfg.options(backend_name))
    return meta


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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gemm_launch(a, b, bias, out, cfg, backend_name):
    """(kernel, grid, args, kwargs) of one GEMM launch; the cross-compiler reuses it."""
    M, K = a.shape
    N = b.shape[1]
    grid = (_cdiv(M, cfg.block_m) * _cdiv(N, cfg.block_n),)
    args = (a, b, bias if bias is not None else out, out,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
            bias.stride(0) if bias is not None else 0)
    kwargs = dict(HAS_BIAS=bias is not None, **_meta(cfg, backend_name, a.dtype))
    return _load().gemm_kernel, grid, args, kwargs


_tuned_cache: dict = {}  # (device, op, shape class) -> Config or None


def _tuned(op: str, args: tuple, backend_name):
    """The tuned config for this problem on this chip (xvendor.tuning), or None.

    Only on a GPU (the interpreter uses one fixed config) and only when a table exists for
    the chip, so untuned runs never compute a shape class.
    """
    if backend_name is None:
        return None
    from ..tuning import serve
    from .. import registry
    device = args[0].device
    info = registry.device_info(device)
    store = serve.store_for(info)
    if not (store.entries or store.any_cu):
        return None
    if op == "gemm":
        from ..ops.gemm import shape_class
    else:
        from ..ops.grouped_mm import shape_class
    sc = shape_class(*args)
    key = (device, op, sc)
    if key not in _tuned_cache:
        from . import configs
        w = serve.config_for("triton", op, info, args[0].dtype, sc)
        _tuned_cache[key] = configs.Config(**w.config) if w is not None else None
    return _tuned_cache[key]


class _Tunable:
    """xvendor.tuning's view of this backend: the arch's config space and one launch each."""

    def candidates(self, op, info, key):
        from ..tuning.sweep import sweep
        from ..tuning.tuner import Candidate
        recs = [r for r in sweep("triton", [info.arch], "all") if r.get("template") == op]
        return [Candidate(r["config_name"], r["config"], r) for r in recs]

    def run(self, op, config, args):
        from . import configs
        cfg = configs.Config(**config)
        _, backend_name, programs = _launch_setup(args[0].device, op)
        if op == "gemm":
            a, b, bias, out_dtype = args
            out = _empty((a.shape[0], b.shape[1]), out_dtype or a.dtype, a.device)
            kernel, grid, largs, kwargs = gemm_launch(a, b, bias, out, cfg, backend_name)
        else:
            a, b, offs, bias, out_dtype = args
            out = _empty(grouped_out_shape(a, b, offs), out_dtype or a.dtype, a.device)
            kernel, grid, largs, kwargs = grouped_mm_launch(a, b, offs, bias, out, cfg,
                                                            backend_name, programs)
        if out.numel():
            kernel[grid](*largs, **kwargs)
        return out


TUNABLE = _Tunable()


def gemm(a, b, bias=None, out_dtype=None):
    out = _empty((a.shape[0], b.shape[1]), out_dtype or a.dtype, a.device)
    _check_size("gemm", a=a, b=b, out=out)
    cfg, backend_name, _ = _launch_setup(a.device, "gemm")
    cfg = _tuned("gemm", (a, b, bias, out_dtype), backend_name) or cfg
    if out.numel() == 0:
        return out
    kernel, grid, args, kwargs = gemm_launch(a, b, bias, out, cfg, backend_name)
    kernel[grid](*args, **kwargs)
    return out


def _grouped_layout(a, b, offs, bias):
    """(RAGGED, G, M, N, K, out shape, a/b/c group strides, bias strides) of one call."""
    k = _load()
    ga, gb = (a.stride(0), 0) if a.dim() == 3 else (0, 0)
    if a.dim() == 2 and b.dim() == 3:
        ragged, G, M, N, K = k.RAGGED_M, b.shape[0], a.shape[0], b.shape[2], a.shape[1]
        out_shape, gb = (M, N), b.stride(0)
    elif a.dim() == 3 and b.dim() == 2:
        ragged, G, M, N, K = k.RAGGED_N, a.shape[0], a.shape[1], b.shape[1], a.shape[2]
        out_shape = (M, N)
    elif a.dim() == 2:
        ragged, G, M, N, K = k.RAGGED_K, offs.shape[0], a.shape[0], b.shape[1], a.shape[1]
        out_shape = (G, M, N)
    else:
        ragged, G, M, N, K = k.BATCHED, a.shape[0], a.shape[1], b.shape[2], a.shape[2]
        out_shape, gb = (G, M, N), b.stride(0)
    if bias is None:
        bias_strides = (0, 0)
    elif bias.dim() == 1:
        bias_strides = (0, bias.stride(0))
    else:
        bias_strides = (bias.stride(0), bias.stride(1))
    return ragged, G, M, N, K, out_shape, ga, gb, bias_strides


def _tile_bound(ragged, G, M, N, cfg) -> int:
    """An upper bound on the tiles of one call, without reading ``offs`` (no host sync)."""
    k = _load()
    tm, tn = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    if ragged == k.RAGGED_M:  # each group adds at most one partial row tile; + the tail
        return (tm + G + 1) * tn
    if ragged == k.RAGGED_N:
        return tm * (tn + G + 1)
    return G * tm * tn


def grouped_out_shape(a, b, offs) -> tuple:
    return _grouped_layout(a, b, offs, None)[5]


def grouped_mm_launch(a, b, offs, bias, out, cfg, backend_name, programs):
    """(kernel, grid, args, kwargs) of one grouped launch; the cross-compiler reuses it."""
    ragged, G, M, N, K, _, ga, gb, (sbg, sbn) = _grouped_layout(a, b, offs, bias)
    gc = out.stride(0) if out.dim() == 3 else 0
    grid = (max(1, min(programs, _tile_bound(ragged, G, M, N, cfg))),)
    args = (a, b, bias if bias is not None else out, out, offs if offs is not None else out,
            G, M, N, K,
            ga, a.stride(-2), a.stride(-1),
            gb, b.stride(-2), b.stride(-1),
            gc, out.stride(-2), out.stride(-1),
            sbg, sbn)
    kwargs = dict(RAGGED=ragged, HAS_BIAS=bias is not None, **_meta(cfg, backend_name, a.dtype))
    return _load().grouped_mm_kernel, grid, args, kwargs


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    out = _empty(grouped_out_shape(a, b, offs), out_dtype or a.dtype, a.device)
    _check_size("grouped_mm", a=a, b=b, out=out)
    cfg, backend_name, programs = _launch_setup(a.device, "grouped_mm")
    cfg = _tuned("grouped_mm", (a, b, offs, bias, out_dtype), backend_name) or cfg
    if out.numel() == 0:
        return out
    kernel, grid, args, kwargs = grouped_mm_launch(a, b, offs, bias, out, cfg, backend_name,
                                                   programs)
    kernel[grid](*args, **kwargs)
    return out


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm}
