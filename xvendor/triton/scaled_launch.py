"""Launch builders of the scaled Triton templates (``scaled_kernels``): config, grid, arguments.

``scaled_mm_launch`` / ``scaled_grouped_mm_launch`` turn checked operands, scales, an
output and a ``Config`` into ``(kernel, grid, args, kwargs)``; the backend launches what
they return and the cross-compiler (``crosscompile.compile_scaled``) feeds the same
arguments, built on ``meta`` tensors, to Triton's binder. Operands arrive as the ops pass
them (``xvendor.ops.scaled_mm``): fp8 tensors as they are, fp4 (float4_e2m1fn_x2) and
E8M0 scales (float8_e8m0fnu) viewed as uint8, the types ``tl.dot_scaled`` takes.

Recipes are torch's ``ScalingType`` int values. TensorWise is RowWise with scale stride 0.
Like ``launch``, this module imports only ``xvendor.devices`` from the package.
"""

from __future__ import annotations

import torch
from torch.nn.functional import ScalingType

from . import launch, scaled_configs
from .launch import interpreting

__all__ = ["scaled_mm_launch", "scaled_grouped_mm_launch", "scaled_grouped_out_shape",
           "launch_setup", "interpreting", "FORMATS"]

TENSORWISE, ROWWISE, MX = (ScalingType.TensorWise.value, ScalingType.RowWise.value,
                           ScalingType.BlockWise1x32.value)
FORMATS = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2",
           torch.float4_e2m1fn_x2: "e2m1"}
_FP4 = torch.float4_e2m1fn_x2

_kernels = None


def _load():
    # Deferred: importing the templates imports triton, and TRITON_INTERPRET is read then.
    global _kernels
    if _kernels is None:
        from . import scaled_kernels
        _kernels = scaled_kernels
    return _kernels


def launch_setup(device: torch.device, template: str, config=None):
    """(config, Triton backend name or None under the interpreter, persistent programs):
    ``xvendor.triton.launch``'s setup over the scaled config spaces."""
    return launch._launch_setup(device, template, config, space=scaled_configs)


def _meta(cfg, backend_name, a, b, recipe) -> dict:
    """Constexprs and compile options of one launch."""
    interp = backend_name is None
    meta = dict(cfg.constexprs(), MX=recipe == MX, A_FMT=FORMATS[a.dtype],
                B_FMT=FORMATS[b.dtype])
    if not interp:
        meta.update(cfg.options(backend_name))
    return meta


def _bytes(t):
    """fp4 and E8M0 tensors as uint8 (same bytes, same strides): what the templates load."""
    return t.view(torch.uint8) if t.dtype in (_FP4, torch.float8_e8m0fnu) else t


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _scale_strides(scale, recipe, along: int) -> tuple[int, int]:
    """(per row/column, per K block) strides of a 2-D scale; RowWise: the row/column
    stride of an (M, 1) / (1, N) scale; TensorWise: (0, 0)."""
    if recipe == MX:
        return scale.stride(0), scale.stride(1)
    if recipe == ROWWISE:
        return scale.stride(along), 0
    return 0, 0


def scaled_mm_launch(a, b, scale_a, recipe, scale_b, bias, out, cfg, backend_name):
    """(kernel, grid, args, kwargs) of one scaled GEMM launch (a (M, K), b (K, N))."""
    M, N = out.shape
    K = a.shape[1] * (2 if a.dtype == _FP4 else 1)
    grid = (_cdiv(M, cfg.block_m) * _cdiv(N, cfg.block_n),)
    sam, sak = _scale_strides(scale_a, recipe, 0)
    sbn, sbk = _scale_strides(scale_b, recipe, 1 if recipe == ROWWISE else 0)
    args = (_bytes(a), _bytes(b), _bytes(scale_a), _bytes(scale_b),
            bias if bias is not None else out, out,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            sam, sak, sbn, sbk,
            out.stride(0), out.stride(1), bias.stride(0) if bias is not None else 0)
    kwargs = dict(HAS_BIAS=bias is not None, **_meta(cfg, backend_name, a, b, recipe))
    return _load().scaled_mm_kernel, grid, args, kwargs


def scaled_grouped_out_shape(a, b, offs) -> tuple:
    return (a.shape[0], b.shape[2]) if b.dim() == 3 else (offs.shape[0], a.shape[0], b.shape[1])


def _tile_bound(ragged_m: bool, G, M, N, cfg) -> int:
    """An upper bound on the tiles of one call, without reading ``offs`` (no host sync)."""
    tm, tn = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    return (tm + G + 1) * tn if ragged_m else G * tm * tn


def scaled_grouped_mm_launch(a, b, scale_a, recipe, scale_b, offs, out, cfg, backend_name,
                             programs):
    """(kernel, grid, args, kwargs) of one grouped launch (persistent: ``programs`` at most).

    2Dx3D: a (M, K), b (G, K, N), scales RowWise (M,) / (G, N) or MX (M, K/32) /
    (G, N, K/32). 2Dx2D: a (M, K), b (K, N), MX scales (M, K/32) / (N, K/32)."""
    k = _load()
    ragged_m = b.dim() == 3
    G = b.shape[0] if ragged_m else offs.shape[0]
    M, N = a.shape[0], b.shape[-1]
    K = a.shape[1] * (2 if a.dtype == _FP4 else 1)
    if recipe == MX:
        sam, sak = scale_a.stride(0), scale_a.stride(1)
        sbg, sbn, sbk = (scale_b.stride(0), scale_b.stride(1), scale_b.stride(2)) if ragged_m \
            else (0, scale_b.stride(0), scale_b.stride(1))
    else:  # RowWise 2Dx3D: (M,) and (G, N)
        sam, sak = scale_a.stride(0), 0
        sbg, sbn, sbk = scale_b.stride(0), scale_b.stride(1), 0
    grid = (max(1, min(programs, _tile_bound(ragged_m, G, M, N, cfg))),)
    args = (_bytes(a), _bytes(b), _bytes(scale_a), _bytes(scale_b), out, offs,
            G, M, N, K,
            a.stride(0), a.stride(1),
            b.stride(0) if ragged_m else 0, b.stride(-2), b.stride(-1),
            sam, sak, sbg, sbn, sbk,
            0 if ragged_m else out.stride(0), out.stride(-2), out.stride(-1))
    kwargs = dict(RAGGED=k.RAGGED_M if ragged_m else k.RAGGED_K,
                  **_meta(cfg, backend_name, a, b, recipe))
    return k.scaled_grouped_mm_kernel, grid, args, kwargs


# --- representative launches for the cross-compiler (meta tensors: shapes and strides) -------
# NOTE [scaled problems]: b is the transpose of a row-major (N, K) weight (torch's column-major
# contract for scaled GEMM), E8M0 scales are row-major (rows, K/32). bf16 output.
PROBLEMS = {
    "scaled_mm": "a (8192, 4096), b = w.t() with w (8192, 4096), bf16 out; fp4: K/2 bytes; "
                 "RowWise: + bias (8192,)",
    "scaled_grouped_mm:2Dx3D": "MoE forward: a (16384, 4096), b = w.transpose(1, 2) with "
                               "w (8, 2048, 4096), offs int32 (8,)",
    "scaled_grouped_mm:2Dx2D": "weight gradient: a = dy.t() with dy (16384, 4096), "
                               "b (16384, 2048), offs int32 (8,); fp4: both packed along K",
}
_DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1": _FP4}


def _m(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _operand(fmt: str, *shape):
    """A meta operand of ``fmt`` whose LAST dimension is K (halved for fp4)."""
    *lead, k = shape
    return _m(*lead, k // 2 if fmt == "e2m1" else k, dtype=_DTYPES[fmt])


def launch_for(variant: str, cfg, triton_backend: str):
    """(kernel, args, kwargs) of the representative launch of ``variant`` (a key of
    ``scaled_configs.VARIANTS``) on meta tensors; see ``PROBLEMS``."""
    if variant not in scaled_configs.VARIANTS:
        raise KeyError(f"unknown scaled Triton variant {variant!r}; variants: "
                       f"{sorted(scaled_configs.VARIANTS)}")
    fa, fb, kind, layout = scaled_configs.VARIANTS[variant]
    recipe = MX if kind == "mx" else ROWWISE
    e8 = torch.float8_e8m0fnu
    if not layout:
        M, N, K = 8192, 8192, 4096
        a, b = _operand(fa, M, K), _operand(fb, N, K).t()
        if recipe == MX:
            sa, sb, bias = _m(M, K // 32, dtype=e8), _m(N, K // 32, dtype=e8), None
        else:
            sa, sb, bias = _m(M, 1, dtype=torch.float32), _m(1, N, dtype=torch.float32), _m(N)
        kernel, _, args, kwargs = scaled_mm_launch(a, b, sa, recipe, sb, bias, _m(M, N), cfg,
                                                   triton_backend)
        return kernel, args, kwargs
    offs = _m(8, dtype=torch.int32)
    if layout == "2Dx3D":
        M, N, K, G = 16384, 2048, 4096, 8
        a, b = _operand(fa, M, K), _operand(fb, G, N, K).transpose(1, 2)
        if recipe == MX:
            sa, sb = _m(M, K // 32, dtype=e8), _m(G, N, K // 32, dtype=e8)
        else:
            sa, sb = _m(M, dtype=torch.float32), _m(G, N, dtype=torch.float32)
    else:
        M, N, K = 4096, 2048, 16384
        # fp8: dy.t() (tokens strided) and b row-major, as MoE autograd hands them over;
        # fp4 must be packed along K, so its operands are K-contiguous.
        a = _operand(fa, M, K) if fa == "e2m1" else _m(K, M, dtype=_DTYPES[fa]).t()
        b = _operand(fb, N, K).t() if fb == "e2m1" else _m(K, N, dtype=_DTYPES[fb])
        sa, sb = _m(M, K // 32, dtype=e8), _m(N, K // 32, dtype=e8)
    out = _m(*scaled_grouped_out_shape(a, b, offs))
    kernel, _, args, kwargs = scaled_grouped_mm_launch(a, b, sa, recipe, sb, offs, out, cfg,
                                                       triton_backend, programs=256)
    return kernel, args, kwargs
