"""Config spaces of the scaled Triton templates (FP8 / MX GEMM and grouped GEMM), as data.

A config is a ``configs.Config`` (tile, GROUP_M band, warps, stages, AMD knobs), shared
with the bf16 templates. ``SPACES[arch][template]`` are the shipped candidates (every one
is cross-compiled by the l1 tests for its arch, each variant below, with the exact matrix
instruction checked and no spills), ``DEFAULTS[arch][template]`` the config the backend
launches until a tuner knows better.

Why these tiles:
- BLOCK_K is 128 elements (but sm_90 grouped, below): the block-scaled ops consume K=128 per
  issue on gfx950 (``v_mfma_scale_f32_16x16x128_f8f6f4``; nonkdim 32 gives 32x32x64) and
  gfx1250 (``v_wmma_scale_f32_16x16x128_f8f6f4``), i.e. four E8M0 scales per row per step;
  and on gfx950 plain fp8 ``tl.dot`` at BLOCK_K=64 falls back to the MI300-era
  ``v_mfma_f32_16x16x32_fp8_fp8``, while 128 selects ``v_mfma_f32_16x16x128_f8f6f4``.
- fp8 tiles are half the bytes of bf16 ones, so 128x128x128 at 2 stages needs ~68 KiB of
  LDS (gfx950: 160 KiB), leaving room for 256-wide tiles. 8 warps by default (no timing
  here to prefer 4): on sm_100, fp8 RowWise 128x128x128 with 4 warps spills 64 bytes (the
  fp32 accumulator comes out of tensor memory into registers for the epilogue); on gfx950
  4 warps compile cleanly (146-158 VGPRs) and stay in the space for the tuner.
- sm_90 has no block-scaled MMA: ``tl.dot_scaled`` is emulated there (operands upcast to
  bf16, then bf16 wgmma), the plain fp8 path uses fp8 wgmma. The upcast is register
  hungry: 128x256 MXFP8 spills 200 bytes, and the grouped 2Dx2D MXFP8 at BLOCK_K=128
  224 bytes, so the grouped sm_90 tile is 128x128x64 (0 spills).
- sm_100 (B200) runs ``tcgen05.mma ... kind::mxf8f6f4.block_scale`` for MX (``kind::mxf4``
  for fp4 x fp4) and ``kind::f8f6f4`` for fp8. 128x256x128 fp8 RowWise spilled: not shipped.
Figures from cross-compiling every shipped config x variant (the l1 test
tests/triton/test_scaled_crosscompile.py; the defaults' resources: bench/scaled_mm.py).

``VARIANTS`` are the specializations compiled per config: element formats and recipe
(``mx`` via ``tl.dot_scaled``, ``fp8`` via ``tl.dot`` plus scale epilogue) and, for the
grouped template, the layout. ``INSTRUCTIONS[arch][kind]`` is the exact matrix instruction
each must contain (a regular expression over the asm/ptx text; nonkdim picks the AMD shape).
"""

from __future__ import annotations

from .configs import Config, base_template

TEMPLATES = ("scaled_mm", "scaled_grouped_mm")

# variant -> (A format, B format, kind, grouped layout or ""); the variant name's template
# is the part before ":". "fp8" = TensorWise/RowWise fp8 tl.dot, "mx" = BlockWise1x32.
VARIANTS = {
    "scaled_mm:mxfp8": ("e4m3", "e4m3", "mx", ""),
    "scaled_mm:mxfp4": ("e2m1", "e2m1", "mx", ""),
    "scaled_mm:mxfp4_x_mxfp8": ("e2m1", "e4m3", "mx", ""),
    "scaled_mm:fp8_rowwise": ("e4m3", "e4m3", "fp8", ""),
    "scaled_grouped_mm:2Dx3D_mxfp8": ("e4m3", "e4m3", "mx", "2Dx3D"),
    "scaled_grouped_mm:2Dx3D_mxfp4": ("e2m1", "e2m1", "mx", "2Dx3D"),
    "scaled_grouped_mm:2Dx3D_fp8_rowwise": ("e4m3", "e4m3", "fp8", "2Dx3D"),
    "scaled_grouped_mm:2Dx2D_mxfp8": ("e4m3", "e4m3", "mx", "2Dx2D"),
    "scaled_grouped_mm:2Dx2D_mxfp4": ("e2m1", "e2m1", "mx", "2Dx2D"),  # K ending inside a byte
}


def _space(rows) -> tuple[Config, ...]:
    return tuple(Config(*row) for row in rows)


# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, waves_per_eu, nonkdim, kpack)
_GFX950 = {
    "scaled_mm": _space([(128, 128, 128, 8, 8, 2, 0, 16, 1), (256, 128, 128, 8, 8, 2, 0, 16, 1),
                         (128, 128, 128, 8, 8, 2, 0, 32, 1), (128, 128, 128, 8, 4, 2, 0, 16, 1)]),
    "scaled_grouped_mm": _space([(128, 128, 128, 8, 8, 2, 0, 16, 1),
                                 (128, 128, 128, 8, 8, 2, 0, 32, 1)]),
}
_GFX1250 = {
    "scaled_mm": _space([(128, 128, 128, 8, 4, 2, 0, 0, 1), (128, 128, 128, 8, 8, 3, 0, 0, 1)]),
    "scaled_grouped_mm": _space([(128, 128, 128, 8, 8, 2, 0, 0, 1)]),
}
_SM90 = {
    "scaled_mm": _space([(128, 128, 128, 8, 8, 3, 0, 0, 1), (128, 128, 64, 8, 8, 3, 0, 0, 1)]),
    "scaled_grouped_mm": _space([(128, 128, 64, 8, 8, 3, 0, 0, 1)]),
}
_SM100 = {
    "scaled_mm": _space([(128, 128, 128, 8, 8, 3, 0, 0, 1), (128, 64, 128, 8, 4, 4, 0, 0, 1)]),
    "scaled_grouped_mm": _space([(128, 128, 128, 8, 8, 3, 0, 0, 1)]),
}
SPACES: dict[str, dict[str, tuple[Config, ...]]] = {
    "gfx950": _GFX950, "gfx1250": _GFX1250, "sm_90": _SM90, "sm_100": _SM100}
DEFAULTS: dict[str, dict[str, Config]] = {
    arch: {t: space[0] for t, space in per.items()} for arch, per in SPACES.items()}

# Archs without a space borrow the nearest one's default (same vendor).
_FALLBACK_ARCH = {"amd": "gfx950", "nvidia": "sm_90"}

# The interpreter runs on CPU tensors: small tiles keep several tiles and K steps per test
# shape; BLOCK_K 64 is two E8M0 scales per row per step (fp4: 32 bytes).
INTERPRETER = Config(32, 32, 64, group_m=2, num_warps=4, num_stages=1)

# Cross-compile targets: arch -> (triton backend, arch id, warp size).
TARGETS = {"gfx950": ("hip", "gfx950", 64), "gfx1250": ("hip", "gfx1250", 32),
           "sm_90": ("cuda", 90, 32), "sm_100": ("cuda", 100, 32)}

# The exact matrix instruction per arch and kind ("mx" / "fp8"), a regular expression;
# {nk} is the config's matrix_instr_nonkdim shape on gfx950. sm_90 "mx" is emulated.
INSTRUCTIONS = {
    "gfx950": {"mx": {16: r"v_mfma_scale_f32_16x16x128_f8f6f4",
                      32: r"v_mfma_scale_f32_32x32x64_f8f6f4"},
               "fp8": {16: r"v_mfma_f32_16x16x128_f8f6f4", 32: r"v_mfma_f32_32x32x64_f8f6f4"}},
    "gfx1250": {"mx": {0: r"v_wmma_scale_f32_16x16x128_f8f6f4"},
                "fp8": {0: r"v_wmma_f32_16x16x128_fp8_fp8"}},
    "sm_100": {"mx": {0: r"tcgen05\.mma\.cta_group::1\.kind::mxf8f6f4\.block_scale\.block32"},
               "mxfp4": {0: r"tcgen05\.mma\.cta_group::1\.kind::mxf4\.block_scale\.block32"},
               "fp8": {0: r"tcgen05\.mma\.cta_group::1\.kind::f8f6f4"}},
    "sm_90": {"mx": {0: r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16"},
              "fp8": {0: r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3"}},
}
EMULATED = {("sm_90", "mx"): "no block-scaled MMA on Hopper: tl.dot_scaled upcasts to bf16 "
                             "(scales applied in registers) and runs bf16 wgmma"}


def instruction(arch: str, variant: str, cfg: Config) -> str:
    """The regular expression the compiled ``variant`` with ``cfg`` must match on ``arch``
    (sm_100 has its own MMA kind for fp4 x fp4: ``mxf4``)."""
    fa, fb, kind, _ = VARIANTS[variant]
    per = INSTRUCTIONS[arch]
    if kind == "mx" and fa == fb == "e2m1" and "mxfp4" in per:
        kind = "mxfp4"
    return per[kind][cfg.matrix_instr_nonkdim if arch == "gfx950" else 0]


def default(arch: str, template: str, vendor: str = "") -> Config:
    """The config the backend launches for ``template`` (or a variant of it) on ``arch``."""
    per_arch = DEFAULTS.get(arch) or DEFAULTS[_FALLBACK_ARCH.get(vendor, "gfx950")]
    return per_arch[base_template(template)]


def candidates(arch: str, template: str, which: str = "all") -> tuple[Config, ...]:
    """``which="all"``: the shipped space (the default first); ``"default"``: the default."""
    if arch not in SPACES:
        raise KeyError(f"no scaled Triton config space for {arch!r}; known: {sorted(SPACES)}")
    space = SPACES[arch][base_template(template)]
    return space[:1] if which == "default" else space
