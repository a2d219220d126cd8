"""FlyDSL MX (BlockWise1x32) scaled GEMM for gfx1250 (MI450): ``v_wmma_scale_f32_16x16x128_f8f6f4``.

Same math, operands, pipeline, bounds and epilogue as ``xvendor.rocm.scaled_gfx950`` (its
kernel is reused: this module only names what differs on gfx1250):

- wave32, the WMMA atom ``fx.rocdl.cdna5.WMMAScale(16, 16, 128, T, block_size=32)``
  (FlyDSL marks cdna5 unstable); gfx1250 has no MFMA;
- the atom's fragment: lane ``l`` holds row (column) ``l % 16`` and eight 8-value K chunks
  ``16 c + 8 (l // 16)`` for c = 0..7, so each lane's values span all four MX blocks of the
  atom's 128 K, and LDS -> register copies are 8 values (64 bits for fp8) wide;
- lane scales: each lane passes one i32 holding the four E8M0 scales of its row, K block b
  in byte b (NOTE [WMMA lane scales]);
- global -> LDS through registers (16-byte buffer loads), as on gfx950, not the Tensor
  Data Mover of the bf16 gfx1250 template: the K-tail zeroing works on loaded bytes, and
  a TDM path for the scaled tiles is not written yet.

NOTE [WMMA lane scales]: lanes 16-31 pass the same word as lane ``l - 16`` (same row). That
the instruction takes scale byte b of the row's lane for K block b (``scaleAType`` 0,
E8M0 format) is an assumption read from the instruction's operand description, not
checked here; tests/rocm/test_scaled_compile.py proves only the fragment side (which
row and K values each lane holds, and that the packed K blocks are that row's). The
correctness gate must catch a wrong lane/byte mapping on the first gfx1250 run.

NOTE [unverified numerics]: compiled to real gfx1250 code objects on a CPU; never run.
"""

from . import gemm_gfx1250, scaled_gfx950

ARCH = "gfx1250"
WAVE = 32
ATOM_M = scaled_gfx950.ATOM_M
ATOM_K = scaled_gfx950.ATOM_K
MX_BLOCK = scaled_gfx950.MX_BLOCK
C_VALS = 8  # accumulator values per lane and atom (16 x 16 / 32 lanes)
C_RUN = gemm_gfx1250.C_RUN  # all 8 are consecutive accumulator M (our N): one run
CHUNK_K = 8  # contiguous K values per lane and LDS read
lds_bytes = scaled_gfx950.lds_bytes


def lane_copy_bits(bits: int) -> int:
    return CHUNK_K * bits


def scaled_atom(fx, T):
    return fx.rocdl.cdna5.WMMAScale(ATOM_M, ATOM_M, ATOM_K, T, block_size=MX_BLOCK)


def lane_scale_coords(cfg, tid: int, i: int, kk: int, *, operand: str = "a"):
    """(row in the tile, (K blocks in the tile, byte 0 first)) lane ``tid`` packs into the
    scale word of atom (``i``, ``kk``); waves laid out as on gfx950 (M fastest)."""
    wave = tid // WAVE
    lane = tid % WAVE
    if operand == "a":
        w, n_w = wave % cfg.warps_m, cfg.warps_m
    else:
        w, n_w = wave // cfg.warps_m, cfg.warps_n
    row = (i * n_w + w) * ATOM_M + lane % ATOM_M
    per_atom = ATOM_K // MX_BLOCK
    return row, tuple(kk * per_atom + b for b in range(per_atom))


def build(cfg, *, fmt: str = "e4m3", out_dtype: str = "bf16", recipe: str = "mx",
          n_align: int = 1):
    """The ``@flyc.jit`` launcher of one specialization (recipes as in ``scaled_gfx950``):
    (launcher, LDS bytes, threads)."""
    import sys
    return scaled_gfx950.build(cfg, fmt=fmt, out_dtype=out_dtype, recipe=recipe,
                               n_align=n_align, machine=sys.modules[__name__])
