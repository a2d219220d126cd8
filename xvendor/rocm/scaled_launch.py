"""Host side of the FlyDSL MX scaled GEMM templates: check, normalize, allocate, build the launch.

``plan_rowwise`` does the same for TensorWise / RowWise fp32 scales on e4m3 operands
(template ``scaled_mm:rowwise``: the same kernel with unit block scales and the row and
column scales applied to the fp32 accumulator in the epilogue).

``plan_mx(a, b, scale_a, scale_b, cfg)`` turns a ``F.scaled_mm`` call with BlockWise1x32 on
both sides (NO_SWIZZLE) into a ``Launch`` (``xvendor.rocm.launch.Launch``): the
specialization (template ``scaled_mm:mx``, element format, out dtype), the kernel arguments
(``ARGS``) and the output. Operands reach the kernel as uint8 storage (fp8 bytes, or fp4
pairs packed along K with the lower K index in the low nibble) and are recast in the kernel;
the E8M0 scales as uint8 too. Sizes never cause a copy: M and N tails are masked by buffer
bounds and predicated stores, the K tail (K % block_k; K itself a multiple of 32) in
registers (``xvendor.rocm.scaled_gfx950``); the spec's ``n_align`` (the largest of 8, 4,
2, 1 dividing N) sets how wide the C stores may be. A K-major operand whose rows are not 16-byte
aligned is copied to an aligned one (16-byte loads), as in the bf16 plans.

``compile_mx(arch, fmt, cfg)`` builds the launch of a representative problem (sizes off the
tile grid) on placeholder CPU tensors and compiles it to a real code object through the
same steps as ``xvendor.rocm.crosscompile.compile_one`` (linker, compile-only environment,
ISA and ELF read back and checked), returning the raw artifacts for
``xvendor.tuning.resources.inspect``. Run it in a worker process: LLVM errors abort.
"""

from __future__ import annotations


import torch

from . import scaled_configs
from .launch import Launch, _cdiv, _check_size, n_align

ARGS = ("A", "B", "C", "SA", "SB", "M", "N", "K", "lda", "ldb", "ldc", "ldsa", "ldsb",
        "tiles_m", "tiles_n", "grid")
_FP8 = (torch.float8_e4m3fn,)
_FP4 = tuple(t for t in (getattr(torch, "float4_e2m1fn_x2", None),) if t is not None)
MX_BLOCK = 32
_BITS = {"e4m3": 8, "e2m1": 4}


def _fmt(t: torch.Tensor, name: str) -> str:
    if t.dtype in _FP8:
        return "e4m3"
    if t.dtype in _FP4 or t.dtype == torch.uint8:
        return "e2m1"
    raise ValueError(f"{name}: the FlyDSL MX templates take float8_e4m3fn, or e2m1 packed two "
                     f"per byte (float4_e2m1fn_x2 or uint8), got {t.dtype}")


def _bytes_k_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` as uint8 (rows, bytes) with contiguous K and a 16-byte aligned row stride."""
    u = t.view(torch.uint8)
    if u.stride(-1) == 1 and u.stride(0) % 16 == 0 and u.data_ptr() % 16 == 0:
        return u
    width = _cdiv(max(u.shape[1], 1), 16) * 16
    out = torch.zeros((u.shape[0], width), dtype=torch.uint8, device=u.device)
    out[:, :u.shape[1]] = u
    return out[:, :u.shape[1]]


def _scales(s: torch.Tensor, rows: int, kb: int, name: str) -> torch.Tensor:
    if s.dtype not in (torch.float8_e8m0fnu, torch.uint8):
        raise ValueError(f"{name}: MX scales are float8_e8m0fnu (or their uint8 bits), got {s.dtype}")
    if tuple(s.shape) != (rows, kb):
        raise ValueError(f"{name}: BlockWise1x32 scales have shape ({rows}, {kb}) "
                         f"(rows, K / 32), got {tuple(s.shape)}")
    u = s.view(torch.uint8)
    return u if u.stride(-1) == 1 else u.contiguous()


def plan_mx(a, b, scale_a, scale_b, cfg, out_dtype=torch.bfloat16) -> Launch:
    """scaled_mm MX: a (M, K) row-major, b (K, N) column-major (b.t() row-major), both e4m3fn
    or both e2m1 (x2-packed: a (M, K/2), b (K/2, N)); scales (M, K/32) and (N, K/32)."""
    if out_dtype != torch.bfloat16:
        raise ValueError(f"output_dtype: the FlyDSL MX templates write bfloat16, got {out_dtype}")
    fmt_a, fmt_b = _fmt(a, "a"), _fmt(b, "b")
    if fmt_a != fmt_b:
        raise ValueError(f"a and b: the FlyDSL MX templates take one element format for both "
                         f"operands, got {a.dtype} and {b.dtype}")
    epb = 8 // _BITS[fmt_a]  # elements per byte
    M, N = a.shape[0], b.shape[1]
    K = a.shape[1] * epb
    if b.shape[0] * epb != K:
        raise ValueError(f"b: K of a is {K}, b has {b.shape[0] * epb} K rows")
    if K % MX_BLOCK:
        raise ValueError(f"a: BlockWise1x32 needs K to be a multiple of 32, got K={K}")
    A, B = _bytes_k_major(a), _bytes_k_major(b.t())
    SA = _scales(scale_a, M, K // MX_BLOCK, "scale_a")
    SB = _scales(scale_b, N, K // MX_BLOCK, "scale_b")
    C = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    _check_size(a=A, b=B, out=C)
    tiles_m, tiles_n = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    args = (A, B, C, SA, SB, M, N, K, A.stride(0), B.stride(0), N, SA.stride(0), SB.stride(0),
            tiles_m, tiles_n, max(tiles_m * tiles_n, 1))
    return Launch(scaled_configs.TEMPLATE, {"fmt": fmt_a, "out_dtype": "bf16", "recipe": "mx",
                                            "n_align": n_align(N)}, args, lambda: C)


def _row_scales(s: torch.Tensor, n: int, name: str, shape: tuple) -> torch.Tensor:
    """fp32 (n,) contiguous: a TensorWise scalar broadcast, or RowWise ``shape`` flattened."""
    if s.dtype != torch.float32:
        raise ValueError(f"{name}: TensorWise / RowWise scales are float32, got {s.dtype}")
    if s.numel() == 1:
        return s.reshape(1).expand(n).contiguous()
    if tuple(s.shape) != shape:
        raise ValueError(f"{name}: RowWise scales have shape {shape}, got {tuple(s.shape)}")
    return s.reshape(n).contiguous()


def plan_rowwise(a, b, scale_a, scale_b, cfg, out_dtype=torch.bfloat16) -> Launch:
    """scaled_mm TensorWise / RowWise: a (M, K) row-major, b (K, N) column-major, both
    float8_e4m3fn; scale_a a scalar or (M, 1), scale_b a scalar or (1, N), fp32. The kernel
    multiplies its fp32 accumulator by scale_a[row] * scale_b[col] before rounding."""
    if out_dtype != torch.bfloat16:
        raise ValueError(f"output_dtype: the FlyDSL scaled templates write bfloat16, got {out_dtype}")
    for name, t in (("a", a), ("b", b)):
        if t.dtype != torch.float8_e4m3fn:
            raise ValueError(f"{name}: the FlyDSL rowwise template takes float8_e4m3fn, got {t.dtype}")
    (M, K), N = a.shape, b.shape[1]
    if b.shape[0] != K:
        raise ValueError(f"b: K of a is {K}, b has {b.shape[0]} K rows")
    A, B = _bytes_k_major(a), _bytes_k_major(b.t())
    SA = _row_scales(scale_a, M, "scale_a", (M, 1))
    SB = _row_scales(scale_b, N, "scale_b", (1, N))
    C = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    _check_size(a=A, b=B, out=C)
    tiles_m, tiles_n = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    args = (A, B, C, SA, SB, M, N, K, A.stride(0), B.stride(0), N, 0, 0,
            tiles_m, tiles_n, max(tiles_m * tiles_n, 1))
    return Launch(scaled_configs.TEMPLATE_ROWWISE,
                  {"fmt": "e4m3", "out_dtype": "bf16", "recipe": "rowwise", "n_align": n_align(N)},
                  args, lambda: C)


_TENSORWISE, _ROWWISE, MX = 0, 1, 3  # torch.nn.functional.ScalingType values


def plan_scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0,
                   bias=None, output_dtype=torch.bfloat16, *, cfg) -> Launch:
    """The op's arguments (``xvendor.ops.scaled_mm``, checked already) -> the launch, or
    ValueError naming what these templates do not take (the dispatch layer then falls back:
    bias, non-bf16 outputs, e5m2, swizzled scales)."""
    ra, rb = int(getattr(recipe_a, "value", recipe_a)), int(getattr(recipe_b, "value", recipe_b))
    if bias is not None:
        raise ValueError("bias: the FlyDSL scaled templates have no bias epilogue")
    if int(getattr(swizzle_a, "value", swizzle_a) or 0) or \
            int(getattr(swizzle_b, "value", swizzle_b) or 0):
        raise ValueError("swizzle_a / swizzle_b: the FlyDSL scaled templates read NO_SWIZZLE scales")
    if (ra, rb) == (MX, MX):
        return plan_mx(a, b, scale_a, scale_b, cfg, output_dtype)
    if (ra, rb) in ((_TENSORWISE, _TENSORWISE), (_ROWWISE, _ROWWISE)):
        return plan_rowwise(a, b, scale_a, scale_b, cfg, output_dtype)
    raise ValueError(f"recipe_a / recipe_b: the FlyDSL scaled templates take MX, TensorWise or "
                     f"RowWise pairs, got {ra} / {rb}")


def build(cfg, *, arch: str, **spec):
    """(launcher, LDS bytes, threads) of ``spec`` (a plan's) for ``arch``: the signature the
    backend's build cache calls."""
    return template_module(arch).build(cfg, **spec)


def template_module(arch: str):
    if arch == "gfx950":
        from . import scaled_gfx950 as mod
    elif arch == "gfx1250":
        from . import scaled_gfx1250 as mod
    else:
        raise KeyError(f"the FlyDSL MX templates target gfx950 and gfx1250, not {arch!r}")
    return mod


def representative(fmt: str, cfg, recipe: str = "mx") -> Launch:
    """The launch of the problem the cross-compile builds: M, N off the tile grid, K a
    multiple of 32 but not of block_k (every tail path is in the code)."""
    M, N, K = 200, 136, 544
    if recipe == "rowwise":
        a = torch.zeros((M, K), dtype=torch.uint8).view(torch.float8_e4m3fn)
        b = torch.zeros((N, K), dtype=torch.uint8).view(torch.float8_e4m3fn).t()
        return plan_rowwise(a, b, torch.ones(M, 1), torch.ones(1, N), cfg)
    if fmt == "e4m3":
        a = torch.zeros((M, K), dtype=torch.uint8).view(torch.float8_e4m3fn)
        b = torch.zeros((N, K), dtype=torch.uint8).view(torch.float8_e4m3fn).t()
    else:
        a = torch.zeros((M, K // 2), dtype=torch.uint8)
        b = torch.zeros((N, K // 2), dtype=torch.uint8).t()
    sa = torch.zeros((M, K // MX_BLOCK), dtype=torch.uint8)
    sb = torch.zeros((N, K // MX_BLOCK), dtype=torch.uint8)
    return plan_mx(a, b, sa, sb, cfg)


def compile_mx(arch: str, fmt: str, config: dict | None = None, recipe: str = "mx") -> dict:
    """Compile the scaled template for ``arch`` / ``fmt`` / ``recipe`` ("mx" or "rowwise")
    with ``config`` (None: the default) to a real code object; the raw artifacts
    ``xvendor.tuning.resources.inspect`` reads."""
    from .crosscompile import compile_plan
    cfg = scaled_configs.config_from(config, arch)
    plan = representative(fmt, cfg, recipe)
    # the exact instruction, by name
    return compile_plan(arch, lambda: build(cfg, arch=arch, **plan.spec), plan, cfg.num_warps,
                        [scaled_configs.MX_INSTR[arch]], True)
