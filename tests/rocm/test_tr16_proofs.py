"""gfx1250's transposing fragment reads (l1), proven on the CPU for every shipped config.

The gfx1250 templates read MN-major operands from LDS with ``ds_load_tr16_b128`` at per-lane
addresses (NOTE [tr16 reads] in ``xvendor.rocm.gemm_gfx1250``). Proven here: a model of the
instruction (NOTE [tr16 proof]), applied to an integer-labelled LDS tile at the addresses the
kernel computes, delivers exactly the WMMA fragment that FlyDSL's partition assigns to each
lane (what the element-wise read filled), for every lane of every wave, operand A and B;
and the proof is not vacuous (five perturbed address formulas are each caught). Not proven:
the model against the hardware (no gfx1250 here; the correctness gate checks the kernels on
first use on a device).
"""

import pytest

fx = pytest.importorskip("flydsl.expr")

from xvendor.rocm import configs, gemm_gfx1250, tiling  # noqa: E402
from xvendor.testing.layouts import partition_coords  # noqa: E402

pytestmark = pytest.mark.l1

GFX1250 = list(dict.fromkeys(c for t in configs.TEMPLATES for c in configs.SPACES["gfx1250"][t]))


# NOTE [tr16 proof]: gfx1250 reads MN-major fragments with ds_load_tr16_b128 (NOTE [tr16
# reads] in xvendor.rocm.gemm_gfx1250). The instruction is modelled here from its published
# descriptions (no AMD ISA manual text for gfx1250 was at hand):
# - LLVM commit bda0016 ("[MLIR][AMDGPU] Add amdgpu.global_transpose_load op",
#   https://github.com/llvm/llvm-project/commit/bda0016aa2b43f0817dddbd790ce4abd3df22e99):
#   the 16-bit transpose loads return 8 elements (128 bits) per lane; each lane reads a
#   row-vector and receives the transposed column;
# - the ds_load_tr16_b128 demonstration for gfx1250 and FlyDSL's own WMMA B-operand loader
#   (ROCm/FlyDSL, the ``rocdl.lds_transpose_load`` callers): a wave32 works in blocks of 8
#   lanes; each lane of a block supplies the address of 8 contiguous 16-bit elements (one
#   16-byte row), and lane i of the block receives element i of the block's 8 rows, in lane
#   order (an 8x8 transpose per block of lanes).
# Unverified on hardware: the correctness gate checks the kernels on first use on a device.
def tr16_model(addresses, memory):
    """What each lane of a wave32 receives from ds_load_tr16_b128 (the model above):
    ``addresses`` per lane (elements), ``memory`` a list of labels; 8 values per lane."""
    assert len(addresses) == 32
    out = []
    for lane in range(32):
        block, i = lane - lane % 8, lane % 8
        for a in addresses[block:block + 8]:
            assert a % 8 == 0, "a row address is not 16-byte aligned"
            assert 0 <= a and a + 8 <= len(memory), "a row outside the LDS tile"
        out.append([memory[addresses[block + j] + i] for j in range(8)])
    return out


def test_tr16_model_reproduces_the_documented_16x16_example():
    """A 16x16 row-major tile; lanes 8q..8q+7 point at rows 8*(q//2).. at column 8*(q%2):
    lane 0 receives column 0 of rows 0..7, lane 9 column 9 of rows 0..7, lane 16 column 0
    of rows 8..15 (the demonstration's printed expectation)."""
    memory = list(range(256))  # label = row * 16 + col
    addr = [(8 * ((l // 8) // 2) + l % 8) * 16 + 8 * ((l // 8) % 2) for l in range(32)]
    got = tr16_model(addr, memory)
    assert got[0] == [r * 16 for r in range(8)]
    assert got[9] == [r * 16 + 9 for r in range(8)]
    assert got[16] == [(8 + r) * 16 for r in range(8)]
    assert got[31] == [(8 + r) * 16 + 15 for r in range(8)]


_TR16_READS = {}


def _tr16_reads(cfg, operand):
    """For every lane of every wave: the fragment the WMMA needs (labels, slot by slot) and
    the transposing reads the kernel issues (slot, LDS offset of the lane's first element +
    the group's static offset), both from FlyDSL's partitions as the kernel takes them; and
    the integer-labelled MN-major LDS tile (label = row * block_k + k; padding -1)."""
    key = (cfg, operand)
    if key in _TR16_READS:
        return _TR16_READS[key]
    mod = gemm_gfx1250
    rows = cfg.block_m if operand == "A" else cfg.block_n  # ``operand``: ours, A or B
    shape, (s_row, ld, stage) = mod.lds_layout(rows, cfg, False)
    assert s_row == 1 and ld % 8 == 0 and stage % 8 == 0  # 16-byte rows and stages
    # A's stages come first; B's start after them: 16-byte aligned as well
    assert (cfg.block_k * (cfg.block_m + mod._PAD) * cfg.stages) % 8 == 0
    memory = [-1] * stage
    for r in range(rows):
        for k in range(cfg.block_k):
            memory[r * s_row + k * ld] = r * cfg.block_k + k
    mma = mod.tiled_mma(fx, cfg, fx.BFloat16)
    ident = fx.make_view((0, 0), fx.make_identity_layout((rows, cfg.block_k)))
    lds = fx.make_view(0, fx.make_layout(shape, (s_row, ld, stage)))[None, None, 0]
    lanes = []
    for tid in range(cfg.num_warps * mod.WAVE):
        part = getattr(mma.thr_slice(tid), f"partition_{mod.MMA_OPERAND[operand]}")
        coords = partition_coords(part(ident))  # the fragment, slot by slot
        # as the kernel reads them: FlyDSL's partition of the LDS view, its static slot
        # offsets and its first element (the kernel's runtime iterator)
        in_lds = part(lds)
        lay = fx.get_layout(in_lds)
        offs = tiling.layout_offsets(lay.shape.to_py_value(), lay.stride.to_py_value())
        base = in_lds[0].to_py_value()
        assert [r * s_row + k * ld - base for r, k in coords] == offs  # the same elements
        reads = [(slot, base + off) for slot, off in mod.tr16_groups(offs, ld)]
        lanes.append(([r * cfg.block_k + k for r, k in coords], reads))
    _TR16_READS[key] = memory, ld, lanes
    return _TR16_READS[key]


def _tr16_mismatches(cfg, operand, lane_offset):
    """(thread, slot) pairs whose transposing read, at the address the kernel computes
    (``lane_offset`` standing for ``gemm_gfx1250.tr16_lane_offset``), differs from what the
    WMMA fragment needs there (what the element-wise read filled), every lane of every wave."""
    memory, ld, lanes = _tr16_reads(cfg, operand)
    wave = gemm_gfx1250.WAVE
    bad = []
    for w0 in range(0, len(lanes), wave):
        group = lanes[w0:w0 + wave]
        for gi, (slot, _) in enumerate(group[0][1]):
            addrs = []
            for lane, (_, reads) in enumerate(group):
                assert reads[gi][0] == slot  # every lane fills the same slots per read
                addrs.append(reads[gi][1] + lane_offset(lane, ld))
            got = tr16_model(addrs, memory)
            bad += [(w0 + lane, slot + j) for lane in range(wave) for j in range(8)
                    if got[lane][j] != group[lane][0][slot + j]]
    return bad


@pytest.mark.parametrize("cfg", GFX1250, ids=[c.name for c in GFX1250])
@pytest.mark.parametrize("operand", ["A", "B"])
def test_tr16_reads_reproduce_the_wmma_fragment(mlir, cfg, operand, monkeypatch):
    """Every lane of every wave, every fragment slot, every shipped gfx1250 config: the
    transposing reads at the kernel's addresses deliver exactly the element-wise fragment."""
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx1250")
    assert _tr16_mismatches(cfg, operand, gemm_gfx1250.tr16_lane_offset) == []


PERTURBED = {  # the first three stay 16-byte aligned and inside the tile: only labels catch them
    "no K step": lambda lane, ld: -(lane % 8),
    "K rows reversed": lambda lane, ld: (7 - lane % 8) * ld - lane % 8,
    "K rows rotated": lambda lane, ld: ((lane + 1) % 8) * ld - lane % 8,
    "next K run": lambda lane, ld: (lane % 8 + 8) * ld - lane % 8,
    "no M/N step back": lambda lane, ld: (lane % 8) * ld,
}


@pytest.mark.parametrize("name", PERTURBED)
def test_tr16_proof_fails_for_a_perturbed_address_formula(mlir, name, monkeypatch):
    """The proof above is not vacuous: each perturbation of the lane address is caught."""
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx1250")
    cfg = configs.default("gfx1250", "gemm")
    try:
        bad = _tr16_mismatches(cfg, "B", PERTURBED[name])
    except AssertionError as e:  # misaligned or outside the tile
        assert (name, str(e).split("\n")[0]) in {
            ("no M/N step back", "a row address is not 16-byte aligned"),
            ("next K run", "a row outside the LDS tile")}
        return
    assert len(bad) > 1000
