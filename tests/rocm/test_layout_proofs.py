"""Layout proofs (l1): FlyDSL's layout algebra, evaluated on the CPU, for every shipped config.

For each arch and config: the tiled MMA's thread-value layouts cover its C tile exactly once
and its A/B tiles exactly ``warps_n`` / ``warps_m`` times (each wave of the other dimension
holds a copy), the workgroup tile is a whole number of MMA tiles, and the G2S copies of the
gfx950 templates cover their (rows, block_k) tile exactly once. The layouts are built by
the templates' own functions; FlyDSL evaluates them (shape/stride come back from the MLIR
types) and the counting is done here in Python. Grouped tiles never cross a group boundary:
``tiling.ragged_m_tiles`` (the host twin of the kernels' scan) is checked on random offs.
"""

import itertools
import random
from collections import Counter

import pytest

fx = pytest.importorskip("flydsl.expr")

from xvendor.rocm import configs, gemm_gfx950, gemm_gfx1250, tiling  # noqa: E402

pytestmark = pytest.mark.l1

MODULES = {"gfx950": gemm_gfx950, "gfx1250": gemm_gfx1250}
CASES = [(arch, cfg) for arch in configs.TARGETS
         for cfg in dict.fromkeys(c for t in configs.TEMPLATES for c in configs.SPACES[arch][t])]


def _flat(shape, stride):
    if isinstance(shape, tuple):
        out = []
        for s, d in zip(shape, stride):
            out += _flat(s, d)
        return out
    return [(shape, stride)]


def _mode_offsets(shape, stride):
    """Offsets of every coordinate of one layout mode, in colexicographic order."""
    modes = _flat(shape, stride)
    offs = [0]
    for size, st in modes:
        offs = [o + i * st for i in range(size) for o in offs]
    return offs


def _tv_image(layout):
    """Counter of the indices the (thread, value) layout maps to."""
    shape, stride = layout.shape.to_py_value(), layout.stride.to_py_value()
    threads = _mode_offsets(shape[0], stride[0])
    values = _mode_offsets(shape[1], stride[1])
    return Counter(t + v for t in threads for v in values), len(threads)


@pytest.fixture(scope="module")
def mlir():
    from flydsl._mlir import ir
    ctx = ir.Context()
    ctx.load_all_available_dialects()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            yield


def _exactly(counter, size, times):
    assert set(counter) == set(range(size)), "some element is missed or out of the tile"
    assert set(counter.values()) == {times}, f"multiplicities {set(counter.values())} != {times}"


@pytest.mark.parametrize("arch, cfg", CASES, ids=[f"{a}-{c.name}" for a, c in CASES])
def test_mma_partitions_cover_the_tile(mlir, arch, cfg, monkeypatch):
    monkeypatch.setenv("FLYDSL_GPU_ARCH", arch)  # MFMA vs WMMA is chosen at trace time
    mod = MODULES[arch]
    mma = mod.tiled_mma(fx, cfg, fx.BFloat16)
    tm, tn, tk = mma.tile_size_mnk.to_py_value()
    threads = cfg.num_warps * mod.WAVE
    c, nc = _tv_image(mma.tv_layout_C_tiled)
    a, na = _tv_image(mma.tv_layout_A_tiled)
    b, nb = _tv_image(mma.tv_layout_B_tiled)
    assert nc == na == nb == threads
    _exactly(c, tm * tn, 1)  # every C element owned by exactly one thread: none written twice
    _exactly(a, tm * tk, cfg.warps_n)  # A replicated across the N waves
    _exactly(b, tn * tk, cfg.warps_m)  # B replicated across the M waves
    # the workgroup tile is a whole number of MMA tiles (the fragments repeat, never overlap)
    assert cfg.block_m % tm == 0 and cfg.block_n % tn == 0 and cfg.block_k % tk == 0


@pytest.mark.parametrize("arch, cfg", [c for c in CASES if c[0] == "gfx950"],
                         ids=[c.name for a, c in CASES if a == "gfx950"])
@pytest.mark.parametrize("rows_of", ["block_m", "block_n"])
@pytest.mark.parametrize("k_major", [True, False], ids=["k_major", "mn_major"])
def test_g2s_copies_cover_the_tile_once(mlir, arch, cfg, rows_of, k_major, monkeypatch):
    monkeypatch.setenv("FLYDSL_GPU_ARCH", arch)
    rows = getattr(cfg, rows_of)
    threads = cfg.num_warps * gemm_gfx950.WAVE
    make = gemm_gfx950._k_major_copy if k_major else gemm_gfx950._mn_major_copy
    copy = make(fx, fx.BFloat16, rows, cfg.block_k, threads)
    image, n = _tv_image(copy.layout_tv_tiled)
    tr, tc = (t if isinstance(t, int) else fx.size(t).to_py_value() for t in copy.tile_mn.unpack())
    assert n == threads
    _exactly(image, tr * tc, 1)
    assert rows % tr == 0 and cfg.block_k % tc == 0  # the tile repeats over (rows, block_k)


@pytest.mark.parametrize("block_m", sorted({c.block_m for _, c in CASES}))
def test_grouped_tiles_never_cross_a_group_boundary(block_m):
    rng = random.Random(block_m)
    for _ in range(200):
        groups = rng.randint(1, 9)
        sizes = [rng.choice([0, 0, 1, block_m - 1, block_m, block_m + 1, rng.randint(0, 700)])
                 for _ in range(groups)]
        offs = list(itertools.accumulate(sizes))
        tiles = tiling.ragged_m_tiles(offs, block_m)
        covered = Counter()
        for g, row0, end in tiles:
            start = offs[g - 1] if g else 0
            assert start <= row0 < end == offs[g]  # the tile starts inside its group ...
            covered.update(range(row0, min(row0 + block_m, end)))  # ... and stores stop at its end
        assert covered == Counter(range(offs[-1] if offs else 0))  # every row once
        m = max(offs[-1], 1)
        tn = 3
        assert len(tiles) * tn <= tiling.grid_size("2Dx3D", m, tn * 64, groups, block_m, 64)
