"""FlyDSL MX (BlockWise1x32) scaled GEMM templates: host plans (l0), layout proofs and real
gfx950 / gfx1250 code objects (l1).

Compiled here (worker processes: LLVM errors abort): each arch's default config for MX
e4m3 x e4m3 and e2m1 x e2m1, a small MX config, and the rowwise recipe (e4m3, fp32 row and
column scales in the epilogue, unit block scales in the same instruction), built by the backend's own plan (``scaled_launch``)
on a problem whose M, N and K are off the tile grid (every tail path is in the code). The
code object is checked as an AMDGPU ELF for the target, then inspected: the exact
instruction (``v_mfma_scale_f32_16x16x128_f8f6f4`` on gfx950, with ``cbsz:4 blgp:4`` for
fp4; ``v_wmma_scale_f32_16x16x128_f8f6f4`` on gfx1250, with ``MATRIX_FMT_FP4`` for fp4),
one per atom of the workgroup tile per K step, no spills, no scratch, LDS within the arch.

Proven on the layout algebra: for every thread and every atom of the tile, the operand
values the kernel's LDS -> register copies hand the atom lie in the row and the MX K
blocks whose scales ``lane_scale_coords`` loads for that lane (gfx950: one block of 32
contiguous K; gfx1250: the row's four blocks, one per byte).

Not verified here (no hardware): that the instructions apply each lane's scale byte to
those values (NOTE [MX lane scales] / [WMMA lane scales] in the modules), and any numerics:
the correctness gate checks them on a device's first run.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from xvendor import devices
from xvendor.rocm import scaled_configs, scaled_launch
from xvendor.rocm.configs import Config

ROOT = Path(__file__).resolve().parents[2]
SMALL = Config(64, 64, 128, 2, 2, 2, 16)
JOBS = {arch: [(fmt, None, "mx") for fmt in scaled_configs.FORMATS]
        + [("e4m3", SMALL.to_dict(), "mx"), ("e4m3", None, "rowwise")]
        for arch in scaled_configs.TARGETS}
FP4_MARK = {"gfx950": "cbsz:4 blgp:4", "gfx1250": "matrix_a_fmt:MATRIX_FMT_FP4"}
# bf16 C of the representative problem (N = 136, a multiple of 8): one accumulator run per
# store, 4 elements on gfx950, 8 on gfx1250 (where one element took buffer_store_short/b16)
C_STORE = {"gfx950": "buffer_store_dwordx2", "gfx1250": "buffer_store_b128"}
# Runs in a fresh interpreter per arch: compiles its jobs, prints one JSON record each.
_WORKER = """
import json, re, sys
from xvendor.rocm import scaled_launch, scaled_configs
from xvendor.tuning import resources
arch, jobs = sys.argv[1], json.loads(sys.argv[2])
for fmt, config, recipe in jobs:
    raw = scaled_launch.compile_mx(arch, fmt, config, recipe)
    rec = resources.inspect(arch, raw)
    instr = scaled_configs.MX_INSTR[arch]
    lines = [l for l in raw["asm"].splitlines() if instr in l]
    stores = re.findall(r"^\\s+(buffer_store_\\w+)", raw["asm"], re.M)
    rec.update(fmt=fmt, config=config, recipe=recipe, exact=len(lines), lines=lines[:2],
               fp4_lines=sum({fp4!r}[arch] in l for l in lines), stores=sorted(set(stores)))
    print("RECORD" + json.dumps(rec), flush=True)
"""


def _fp8(*shape):
    return torch.randn(*shape).to(torch.float8_e4m3fn)


# ---------------------------------------------------------------- host plans (l0)

@pytest.mark.l0
def test_plan_passes_the_callers_operands_without_copies():
    M, N, K = 200, 136, 544  # M, N off the 128 tile; K % 128 = 32: the K tail path
    a, w = _fp8(M, K), _fp8(N, K)
    sa = torch.randint(100, 140, (M, K // 32), dtype=torch.uint8).view(torch.float8_e8m0fnu)
    sb = torch.randint(100, 140, (N, K // 32), dtype=torch.uint8).view(torch.float8_e8m0fnu)
    cfg = scaled_configs.default("gfx950")
    plan = scaled_launch.plan_mx(a, w.t(), sa, sb, cfg)
    args = dict(zip(scaled_launch.ARGS, plan.args))
    assert plan.template == "scaled_mm:mx"
    assert plan.spec == {"fmt": "e4m3", "out_dtype": "bf16", "recipe": "mx", "n_align": 8}
    assert args["A"].data_ptr() == a.data_ptr() and args["B"].data_ptr() == w.data_ptr()
    assert args["SA"].data_ptr() == sa.data_ptr() and args["SB"].data_ptr() == sb.data_ptr()
    assert (args["M"], args["N"], args["K"]) == (M, N, K)
    assert (args["lda"], args["ldb"], args["ldsa"], args["ldsb"]) == (K, K, K // 32, K // 32)
    assert (args["tiles_m"], args["tiles_n"], args["grid"]) == (2, 2, 4)
    assert plan.result().shape == (M, N) and plan.result().dtype == torch.bfloat16


@pytest.mark.l0
def test_plan_fp4_counts_k_in_elements_and_copies_unaligned_rows():
    M, N, K = 33, 17, 96  # packed rows of 48 bytes: aligned; B's rows after t() too
    a = torch.randint(0, 256, (M, K // 2), dtype=torch.uint8)
    w = torch.randint(0, 256, (N, K // 2 + 1), dtype=torch.uint8)[:, 1:]  # misaligned start
    s = lambda r: torch.full((r, K // 32), 127, dtype=torch.uint8)  # noqa: E731
    plan = scaled_launch.plan_mx(a, w.t(), s(M), s(N), scaled_configs.default("gfx1250"))
    args = dict(zip(scaled_launch.ARGS, plan.args))
    assert plan.spec["fmt"] == "e2m1" and args["K"] == K and args["lda"] == K // 2
    assert args["A"].data_ptr() == a.data_ptr()
    B = args["B"]  # copied to 16-byte aligned rows, same values
    assert B.data_ptr() % 16 == 0 and B.stride(0) % 16 == 0 and torch.equal(B, w)


@pytest.mark.l0
@pytest.mark.parametrize("case, match", [
    ("k_not_32", "multiple of 32"),
    ("scale_shape", r"scale_a: BlockWise1x32 scales have shape \(8, 2\)"),
    ("mixed", "one element format"),
    ("scale_dtype", "scale_b: MX scales are float8_e8m0fnu"),
    ("out_dtype", "output_dtype"),
    ("e5m2", "a: the FlyDSL MX templates take"),
])
def test_plan_rejects_bad_input_naming_the_argument(case, match):
    K = 48 if case == "k_not_32" else 64
    a, b = _fp8(8, K), _fp8(16, K).t()
    sa = torch.full((8, K // 32), 127, dtype=torch.uint8)
    sb = torch.full((16, K // 32), 127, dtype=torch.uint8)
    kw = {}
    if case == "scale_shape":
        sa = sa[:, :1]
    elif case == "mixed":
        b = torch.zeros((K // 2, 16), dtype=torch.uint8)
    elif case == "scale_dtype":
        sb = sb.float()
    elif case == "out_dtype":
        kw["out_dtype"] = torch.float16
    elif case == "e5m2":
        a = a.float().to(torch.float8_e5m2)
    with pytest.raises(ValueError, match=match):
        scaled_launch.plan_mx(a, b, sa, sb, scaled_configs.default("gfx950"), **kw)


@pytest.mark.l0
@pytest.mark.parametrize("arch", scaled_configs.TARGETS)
def test_config_space_obeys_the_rules_and_fits_lds(arch):
    assert scaled_configs.default(arch) in scaled_configs.SPACES[arch]
    for cfg in scaled_configs.SPACES[arch]:
        scaled_configs.check(cfg, arch)
        for fmt in scaled_configs.FORMATS:
            assert scaled_launch.template_module(arch).lds_bytes(cfg, fmt) <= \
                devices.ARCHS[arch].lds_bytes
    with pytest.raises(ValueError, match="block_k must be a multiple of 128"):
        scaled_configs.check(Config(128, 128, 64, 2, 2, 2, 16), arch)


@pytest.mark.l0
@pytest.mark.parametrize("arch", scaled_configs.TARGETS)
def test_each_wave_passes_every_row_and_k_block_scale_once(arch):
    """Per wave and atom (here K step 1: blocks 4-7), the lanes' (row, K block, byte)
    triples cover the atom's 16 rows x 4 K blocks, none missing."""
    mod = scaled_launch.template_module(arch)
    cfg = scaled_configs.default(arch)
    rep_m = cfg.block_m // (16 * cfg.warps_m)
    for operand in "ab":
        for wave in range(cfg.num_warps):
            for i in range(rep_m):
                seen = set()
                for lane in range(mod.WAVE):
                    row, kbs = mod.lane_scale_coords(cfg, wave * mod.WAVE + lane, i, 1,
                                                     operand=operand)
                    seen |= {(row, kb, b) for b, kb in enumerate(kbs)}
                rows = {r for r, _, _ in seen}
                assert len(rows) == 16 and {kb for _, kb, _ in seen} == {4, 5, 6, 7}
                # gfx950: 64 lanes, one (row, block) each; gfx1250: lanes l and l + 16
                # pass the same row's four blocks, block 4 + b in byte b
                assert len(seen) == 64
                assert all(kb == 4 + b for _, kb, b in seen) or arch == "gfx950"


@pytest.mark.l0
def test_rowwise_plan_broadcasts_tensorwise_and_checks_shapes():
    M, N, K = 70, 50, 80  # K is not a multiple of 32: fine for rowwise
    a, b = _fp8(M, K), _fp8(N, K).t()
    cfg = scaled_configs.default("gfx950")
    sa, sb = torch.rand(M, 1) + 0.5, torch.rand(1, N) + 0.5
    plan = scaled_launch.plan_rowwise(a, b, sa, sb, cfg)
    args = dict(zip(scaled_launch.ARGS, plan.args))
    assert plan.template == "scaled_mm:rowwise" and plan.spec["recipe"] == "rowwise"
    assert torch.equal(args["SA"], sa.reshape(M)) and torch.equal(args["SB"], sb.reshape(N))
    assert args["K"] == K and (args["ldsa"], args["ldsb"]) == (0, 0)
    tw = scaled_launch.plan_rowwise(a, b, torch.tensor(2.0), torch.tensor(0.25), cfg)
    targs = dict(zip(scaled_launch.ARGS, tw.args))
    assert torch.equal(targs["SA"], torch.full((M,), 2.0))
    assert torch.equal(targs["SB"], torch.full((N,), 0.25))
    with pytest.raises(ValueError, match=r"scale_b: RowWise scales have shape \(1, 50\)"):
        scaled_launch.plan_rowwise(a, b, sa, torch.rand(N, 1), cfg)
    with pytest.raises(ValueError, match="scale_a: TensorWise / RowWise scales are float32"):
        scaled_launch.plan_rowwise(a, b, sa.double(), sb, cfg)


@pytest.mark.l0
def test_op_arguments_map_to_the_recipes_plans_or_a_fallback_error():
    from torch.nn.functional import ScalingType, SwizzleType
    M, N, K = 40, 24, 64
    a, b = _fp8(M, K), _fp8(N, K).t()
    cfg = scaled_configs.default("gfx950")
    e8 = lambda r: torch.full((r, K // 32), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)  # noqa: E731
    mx = scaled_launch.plan_scaled_mm(a, b, e8(M), ScalingType.BlockWise1x32, e8(N),
                                      ScalingType.BlockWise1x32, cfg=cfg)
    row = scaled_launch.plan_scaled_mm(a, b, torch.ones(M, 1), ScalingType.RowWise.value,
                                       torch.ones(1, N), ScalingType.RowWise.value, cfg=cfg)
    ten = scaled_launch.plan_scaled_mm(a, b, torch.ones(()), ScalingType.TensorWise,
                                       torch.ones(()), ScalingType.TensorWise, cfg=cfg)
    assert (mx.template, row.template, ten.template) == (
        "scaled_mm:mx", "scaled_mm:rowwise", "scaled_mm:rowwise")
    ones = (torch.ones(M, 1), ScalingType.RowWise, torch.ones(1, N), ScalingType.RowWise)
    with pytest.raises(ValueError, match="bias"):
        scaled_launch.plan_scaled_mm(a, b, *ones, bias=torch.zeros(N), cfg=cfg)
    with pytest.raises(ValueError, match="swizzle"):
        scaled_launch.plan_scaled_mm(a, b, *ones, SwizzleType.SWIZZLE_32_4_4, cfg=cfg)
    with pytest.raises(ValueError, match="b: the FlyDSL rowwise template takes float8_e4m3fn"):
        scaled_launch.plan_scaled_mm(a, b.float().to(torch.float8_e5m2), *ones, cfg=cfg)


# ---------------------------------------------------------------- layout proofs (l1)

# One symmetric config and one whose blocks and waves differ along M and N: the kernel asks
# the MMA's view of it (``mma_config``: M and N swapped, the MMA tiles C^T).
PROOF_CFGS = [Config(64, 64, 256, 2, 2, 2, 16), Config(128, 64, 256, 4, 1, 2, 16)]


@pytest.mark.l1
@pytest.mark.parametrize("cfg", PROOF_CFGS, ids=[c.name for c in PROOF_CFGS])
@pytest.mark.parametrize("arch", scaled_configs.TARGETS)
def test_lane_scales_match_the_fragments_the_copies_build(arch, cfg, mlir):
    """For every thread and atom of the tile (several along M/N, two along K), the values the
    LDS -> register copy gives the atom are in row ``lane_scale_coords``'s row, in exactly
    its K blocks (gfx950: 32 contiguous K of one block; gfx1250: 8-value chunks of the row's
    four blocks), as the kernel assumes. As in the kernel: our B is the MMA's A operand
    (rows along block_n), our A its B operand, and the lane scales are asked of
    ``mma_config(cfg)``."""
    import flydsl.expr as fx
    mod = scaled_launch.template_module(arch)
    from xvendor.rocm import scaled_gfx950
    mcfg = scaled_gfx950.mma_config(cfg)
    T = fx.Float8E4M3FN
    _, mma = scaled_gfx950.tiled_mma(fx, mcfg, T, mod)
    atom = fx.make_copy_atom(fx.UniversalCopy(mod.lane_copy_bits(8)), T)
    rep_k = cfg.block_k // 128
    chunk = 32 if arch == "gfx950" else 8
    per_atom = 32 if arch == "gfx950" else 64  # values per lane and atom
    for ours, operand, make in (("B", "a", fx.make_tiled_copy_A), ("A", "b", fx.make_tiled_copy_B)):
        rows = cfg.block_n if ours == "B" else cfg.block_m
        rep = rows // (16 * (mcfg.warps_m if operand == "a" else mcfg.warps_n))
        tiled = make(atom, mma)
        ident = fx.make_view((0, 0), fx.make_identity_layout((rows, cfg.block_k)))
        for tid in range(cfg.num_warps * mod.WAVE):
            c = tiled.get_slice(tid).partition_S(ident)
            assert fx.size(c).to_py_value() == per_atom * rep * rep_k
            for kk in range(rep_k):
                for i in range(rep):
                    row, kbs = mod.lane_scale_coords(mcfg, tid, i, kk, operand=operand)
                    blocks = []
                    for start in range(0, per_atom, chunk):
                        flat = start + per_atom * (i + rep * kk)
                        (r0, k0), (r1, k1) = (c[flat].to_py_value(),
                                              c[flat + chunk - 1].to_py_value())
                        assert r0 == r1 == row, (ours, tid, i, kk)
                        assert k1 - k0 == chunk - 1 and k0 // 32 == k1 // 32
                        blocks.append(k0 // 32)
                    assert sorted(set(blocks)) == sorted(kbs), (ours, tid, i, kk, blocks)


@pytest.mark.l1
@pytest.mark.parametrize("cfg", PROOF_CFGS, ids=[c.name for c in PROOF_CFGS])
@pytest.mark.parametrize("arch", scaled_configs.TARGETS)
def test_c_stores_cover_the_tile_once_in_runs_along_n(arch, cfg, mlir):
    """The epilogue's stores (``store_c_t`` on the scaled atom's C^T tiling): each lane's
    accumulator holds runs of ``C_RUN`` consecutive N at one M, and for every store width N
    allows, every element of the (block_n, block_m) C^T tile is stored exactly once, each
    store ``vec`` consecutive N starting at a multiple of ``vec`` (so one predicate per
    store on its first element is exact for N a multiple of ``vec``)."""
    import flydsl.expr as fx

    from xvendor.rocm import gemm_gfx950, scaled_gfx950
    from xvendor.testing.layouts import partition_coords, store_coverage
    mod = scaled_launch.template_module(arch)
    _, mma = scaled_gfx950.tiled_mma(fx, scaled_gfx950.mma_config(cfg), fx.Float8E4M3FN, mod)
    threads = cfg.num_warps * mod.WAVE
    ident = fx.make_view((0, 0), fx.make_identity_layout((cfg.block_n, cfg.block_m)))
    for tid in (0, 1, 17, threads - 1):
        coords = partition_coords(mma.thr_slice(tid).partition_C(ident))
        for i in range(0, len(coords), mod.C_RUN):
            n0, m0 = coords[i]
            assert coords[i:i + mod.C_RUN] == [(n0 + j, m0) for j in range(mod.C_RUN)], tid
    for n_align in (8, 2, 1):
        vec = gemm_gfx950.store_width(mod.C_RUN, n_align, 16)
        assert vec == min(mod.C_RUN, n_align)
        _, tiled = gemm_gfx950.store_copy(fx, mma, fx.BFloat16, vec)  # the epilogue's copy
        seen = store_coverage(tiled, threads, cfg.block_n, cfg.block_m, vec)
        assert set(seen) == {(n, m) for n in range(cfg.block_n) for m in range(cfg.block_m)}
        assert set(seen.values()) == {1}, n_align


@pytest.mark.l1
@pytest.mark.parametrize("fmt", scaled_configs.FORMATS)
def test_byte_and_element_lds_views_agree(fmt, mlir):
    """The G2S copies write LDS through a byte view, the fragments read it through an
    element view (fp4: two per byte): both put (row, k) at the same byte."""
    import flydsl.expr as fx
    from xvendor.rocm import scaled_gfx950
    bits = scaled_gfx950.ELEM_BITS[fmt]
    rows, bk = 32, 128
    T = scaled_gfx950.elem_type(fx, fmt)
    base_b = fx.recast_iter(fx.PointerType.get(fx.Uint8.ir_type, fx.AddressSpace.Shared, 512),
                            fx.get_dyn_shared())
    base_e = fx.recast_iter(fx.PointerType.get(T.ir_type, fx.AddressSpace.Shared, 512),
                            fx.get_dyn_shared())
    vb = scaled_gfx950.k_major_lds(fx, base_b, rows, bk * bits // 8, 2, 8).layout
    ve = scaled_gfx950.k_major_lds(fx, base_e, rows, bk, 2, bits).layout
    seen = set()
    for r in range(rows):
        for kbyte in range(0, bk * bits // 8, 4):
            b = fx.crd2idx((r, kbyte, 1), vb).to_py_value()
            e = fx.crd2idx((r, kbyte * 8 // bits, 1), ve).to_py_value()
            assert e * bits // 8 == b, (r, kbyte)
            seen.add(b)
    assert len(seen) == rows * bk * bits // 8 // 4  # distinct bytes: a bijection on samples


# ---------------------------------------------------------------- code objects (l1)

@pytest.fixture(scope="module")
def records():
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = {}
    for arch, jobs in JOBS.items():
        proc = subprocess.run([sys.executable, "-c", _WORKER.replace("{fp4!r}", repr(FP4_MARK)),
                               arch, json.dumps(jobs)],
                              capture_output=True, text=True, env=env, timeout=600)
        recs = [json.loads(line[6:]) for line in proc.stdout.splitlines()
                if line.startswith("RECORD")]
        assert len(recs) == len(jobs), proc.stderr[-3000:]
        out[arch] = recs
    return out


@pytest.mark.l1
@pytest.mark.parametrize("arch", scaled_configs.TARGETS)
def test_code_objects_use_the_exact_scaled_instruction(records, arch):
    for rec in records[arch]:
        cfg = scaled_configs.config_from(rec["config"], arch)
        label = (arch, rec["recipe"], rec["fmt"], cfg.name)
        assert rec["ok"], (label, rec["reason"])
        assert rec["mma_instr"] == scaled_configs.MX_INSTR[arch], label
        atoms = (cfg.block_m * cfg.block_n) // (16 * 16) // cfg.num_warps * (cfg.block_k // 128)
        assert rec["exact"] == rec["mma_count"] == atoms, (label, rec["exact"], atoms)
        assert rec["spills"] == 0 and rec["scratch"] == 0, label
        assert 0 < rec["lds_bytes"] <= devices.ARCHS[arch].lds_bytes, label
        assert rec["lds_bytes"] == scaled_launch.template_module(arch).lds_bytes(cfg, rec["fmt"])
        assert rec["code_object_bytes"] > 1000 and rec["occupancy"] >= 1, label
        assert rec["stores"] == [C_STORE[arch]], (label, rec["stores"])
        fp4 = rec["fmt"] == "e2m1"
        assert (rec["fp4_lines"] == rec["exact"]) if fp4 else rec["fp4_lines"] == 0, \
            (label, rec["lines"])
