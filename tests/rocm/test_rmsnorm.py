"""The FlyDSL RMSNorm templates (forward, fused residual, backward): config spaces, backend
wiring, row proofs, real compiles.

l0: the config space and defaults, the gate identity (one per compiled specialization),
the dispatch record (explicit only, no default), the probe's reason on this machine, the
ValueError for what the kernel does not do, and the host plan.
l1: the row partition proven on the kernel's own index functions and on its vector layout
as FlyDSL evaluates it (every element of every row accessed exactly once, no vector
straddling a descriptor bound, dead rows touch nothing), and real code objects for
gfx950/gfx1250 (defaults, the several-rows default, fp32 weights, one non-default vector
width) built by the sweep's workers: no spills, no scratch, LDS within the arch, vector
memory instructions exactly as wide as the config's ``vec``.
Backward: l0 the space, the per-row formula against autograd (fp64), the refusals and the
host plan (no padding, fp32 partial rows summed on the host); l1 the row walk and the
partial-row ownership proven with the kernel's index functions and FlyDSL's vector layout,
and code objects (bf16, fp32, no weight, vec 4) with 0 spills and accesses as wide as
``vec``. Fused residual: l0 the plan, l1 its code objects (two vector loads and stores).
Numerics are not checked here: no gfx950/gfx1250 device (the gate checks on first use);
the l2 tests compare with torch where one exists, with poisoned outputs.
"""

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from xvendor import devices, registry
from xvendor.rocm import backend, configs, rmsnorm

ROOT = Path(__file__).resolve().parents[2]
BF16 = torch.bfloat16


def _x(*shape, dtype=BF16):
    return torch.randn(*shape).to(dtype)


# -- l0 ------------------------------------------------------------------------------

@pytest.mark.l0
def test_space_is_data_with_a_default_per_arch():
    for arch in configs.TARGETS:
        space = configs.NORM_SPACES[arch]
        assert len(set(space)) == len(space) >= 8
        for c in space:
            assert c.vec in (2, 4, 8) and c.rows in (1, c.waves)  # the two row forms
            assert rmsnorm.lds_bytes(c) <= devices.ARCHS[arch].lds_bytes
        for name in ("rms_norm", "rms_norm:rows"):
            assert configs.default(arch, name) in space
        assert configs.default(arch, "rms_norm").rows == 1
        assert configs.default(arch, "rms_norm:rows").rows > 1
        assert configs.candidates(arch, "rms_norm")[0] == configs.default(arch, "rms_norm")
        # short rows go to the several-rows form, long rows to one row per workgroup
        assert configs.norm_for(arch, 1024).rows > 1 and configs.norm_for(arch, 4096).rows == 1
    assert "rms_norm" not in configs.TEMPLATES and "rms_norm" in configs.ALL_TEMPLATES


@pytest.mark.l0
def test_record_serves_rms_norm_on_request_only():
    import xvendor.ops  # noqa: F401 (defines the ops)
    rec = registry.backends()["flydsl"]
    assert "rms_norm" in rec.ops and "rms_norm" not in rec.defaults  # no evidence: no default
    info = devices.hypothetical("gfx950")
    assert registry.select("rms_norm", info, BF16, dry_run=True).backend == "torch"
    dec = registry.select("rms_norm", info, BF16, requested="flydsl", dry_run=True)
    assert dec.backend == "flydsl"
    import xvendor
    dec = xvendor.explain("rms_norm", _x(4, 4096), _x(4096), arch="gfx950", backend="flydsl")
    assert dec.backend == "flydsl" and "-> flydsl" in str(dec)


@pytest.mark.l0
def test_explicit_request_here_names_the_probe_reason():
    if torch.version.hip and torch.cuda.is_available():
        pytest.skip("a ROCm build with a device: the probe may pass")
    import xvendor
    registry.reset()
    with pytest.raises(xvendor.BackendUnavailable, match="no ROCm device"):
        registry.select("rms_norm", devices.hypothetical("gfx950"), BF16, requested="flydsl")
    with pytest.raises(xvendor.BackendUnavailable, match="flydsl"):  # CPU tensors: not here
        xvendor.rms_norm(_x(4, 64), _x(64), backend="flydsl")


@pytest.mark.l0
def test_gate_identity_is_one_per_compiled_specialization():
    info = devices.hypothetical("gfx950")
    x = _x(4, 4096)
    calls = {
        "bf16 w": (x, _x(4096), 1e-6),
        "fp32 w": (x, _x(4096, dtype=torch.float32), 1e-6),
        "no w": (x, None, 1e-6),
        "fp16": (_x(4, 4096, dtype=torch.float16), _x(4096, dtype=torch.float16), None),
        "ragged": (_x(4, 4097), _x(4097), 1e-6),
        "short rows": (_x(4, 512), _x(512), 1e-6),
    }
    idents = {k: backend.gate_identity("rms_norm", info, a[0].dtype, a, None)
              for k, a in calls.items()}
    assert len(set(idents.values())) == len(idents), idents
    assert all(i.startswith("rms_norm/") and "/flydsl-" in i for i in idents.values())
    assert f"/{configs.default('gfx950', 'rms_norm').name}/" in idents["bf16 w"]
    assert f"/{configs.default('gfx950', 'rms_norm:rows').name}/" in idents["short rows"]
    other = configs.NORM_SPACES["gfx950"][-1].to_dict()
    assert backend.gate_identity("rms_norm", info, BF16, calls["bf16 w"], other) \
        != idents["bf16 w"]  # the config counts too


@pytest.mark.l0
@pytest.mark.parametrize("args, why", [
    ((_x(2, 3, 8), _x(3, 8)), "weight must be 1-D"),
    ((_x(2, 8, dtype=torch.float32), None), "not bf16 or fp16"),
])
def test_what_the_kernel_does_not_do_raises_value_error(args, why):
    with pytest.raises(ValueError, match=why):
        rmsnorm.specialization(args, configs.default("gfx950", "rms_norm"))


@pytest.mark.l0
def test_plan_views_rows_without_padding():
    cfg = configs.default("gfx950", "rms_norm:rows")
    x = _x(3, 5, 33)
    p = rmsnorm.plan(x, None, None, cfg)
    a = dict(zip(rmsnorm.ARGS, p.args))
    assert a["X"].shape == (15, 33) and a["Y"].shape == (15, 33)  # hidden 33: not padded
    assert (a["rows"], a["hidden"], a["grid"]) == (15, 33, 4)  # 4 rows per workgroup
    assert a["eps"] == torch.finfo(torch.float32).eps  # eps=None: torch's default for bf16
    assert p.spec["ragged"] and not p.spec["has_weight"]
    assert p.result().shape == x.shape
    t = _x(64, 16).t()  # non-contiguous: copied to rows
    assert dict(zip(rmsnorm.ARGS, rmsnorm.plan(t, None, 0.0, cfg).args))["X"].is_contiguous()


# -- l1: row proofs ------------------------------------------------------------------

def _vector_offsets(n_vectors, piece):
    """{vector index: element offsets} of the kernel's vector layout, evaluated by FlyDSL."""
    import flydsl.expr as fx
    lay = rmsnorm.vector_layout(fx, n_vectors, piece)
    (s0, s1), (d0, d1) = lay.shape.to_py_value(), lay.stride.to_py_value()
    assert (s0, s1) == (piece, n_vectors)
    return {i: [j * d0 + i * d1 for j in range(s0)] for i in range(s1)}


NORM_CASES = [(a, c) for a in configs.TARGETS for c in configs.NORM_SPACES[a]]
HIDDEN = (1, 7, 8, 100, 513, 2047, 2048, 2049, 4096, 7168 + 3)


@pytest.mark.l1
@pytest.mark.parametrize("arch, cfg", NORM_CASES, ids=[f"{a}-{c.name}" for a, c in NORM_CASES])
def test_every_element_of_every_row_is_accessed_once(mlir, arch, cfg):
    lanes = rmsnorm.lanes_per_row(arch, cfg)
    threads = cfg.waves * rmsnorm.WAVE[arch]
    for hidden in HIDDEN:
        chunks = rmsnorm.n_chunks(hidden, cfg.vec, lanes)
        vecs = _vector_offsets(chunks * lanes, cfg.vec)  # x and y: pieces of vec elements
        # fp32 weights come in 16-byte pieces: the pieces of vector i are its elements
        wp = _vector_offsets(chunks * lanes * (cfg.vec // min(cfg.vec, 4)), min(cfg.vec, 4))
        k = len(wp) // max(len(vecs), 1)
        assert all(sum((wp[i * k + p] for p in range(k)), []) == vecs[i] for i in vecs)
        rows = 2 * cfg.rows + 1  # the last workgroup holds dead rows in the several-rows form
        grid = dict(zip(rmsnorm.ARGS, rmsnorm.plan(_x(rows, hidden), None, None, cfg).args))
        seen = Counter()
        for bid in range(grid["grid"]):
            for tid in range(threads):
                row, lane = rmsnorm.row_of(bid, tid, cfg.rows, lanes)
                assert 0 <= lane < lanes
                nvec, n = rmsnorm.bounds(row, rows, hidden, cfg.vec)
                if row >= rows:
                    assert (nvec, n) == (0, 0)  # reads zeros, writes nothing
                    continue
                for c in range(chunks):
                    offs = vecs[rmsnorm.chunk_index(c, lane, lanes)]
                    inside = [o < nvec for o in offs]
                    assert all(inside) or not any(inside), "a vector straddles the bound"
                    if all(inside):
                        seen.update((row, o) for o in offs)
                t = rmsnorm.tail_index(hidden, lane, cfg.vec)
                assert (t < n) == (lane < hidden % cfg.vec) and t >= nvec
                if t < n:
                    seen[(row, t)] += 1
        assert set(seen) == {(r, e) for r in range(rows) for e in range(hidden)}, hidden
        assert set(seen.values()) == {1}, hidden


# -- l1: real code objects -----------------------------------------------------------

def _nondefault_vec(arch):
    d = configs.default(arch, "rms_norm")
    return next(c for c in configs.NORM_SPACES[arch] if c.vec != d.vec and c.rows == 1)


JOBS = [(t, a, configs.default(a, t)) for a in configs.TARGETS
        for t in ("rms_norm", "rms_norm:rows")]
JOBS += [("rms_norm:fp32w", "gfx950", configs.default("gfx950", "rms_norm:fp32w")),
         ("rms_norm", "gfx1250", _nondefault_vec("gfx1250"))]
IDS = [f"{a}-{t}-{c.name}" for t, a, c in JOBS]
_MEM = re.compile(r"\b(buffer_(?:load|store)_\w+|global_(?:load|store)_\w+)")


@pytest.fixture(scope="module")
def records(compile_cache):
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    from xvendor.tuning import sweep
    return {(r["template"], r["target"], r["config_name"]): r
            for r in sweep.sweep("flydsl", jobs=JOBS, cache_dir=compile_cache, workers=2)}


@pytest.fixture(scope="module")
def memory_instrs():
    """{(template, arch, config): Counter of vector memory instructions}, compiled in a
    child process (an LLVM abort must not kill pytest), through crosscompile.compile_one."""
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    code = (
        "import json, re, sys\nfrom collections import Counter\n"
        "from xvendor.rocm import crosscompile\n"
        "rx = re.compile(sys.argv[1])\nout = {}\n"
        "for t, a, c in json.loads(sys.argv[2]):\n"
        "    out[f'{t}|{a}|{c[\"vec\"]}_{c[\"rows\"]}_{c[\"waves\"]}'] = "
        "Counter(rx.findall(crosscompile.compile_one(t, a, c)['asm']))\n"
        "print('RESULT' + json.dumps(out))\n")
    jobs = [(t, a, c.to_dict()) for t, a, c in JOBS]
    proc = subprocess.run([sys.executable, "-c", code, _MEM.pattern, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return {tuple(k.split("|")[:2]) + (k.split("|")[2],): Counter(v)
            for k, v in json.loads(line[6:]).items()}


@pytest.mark.l1
@pytest.mark.parametrize("template, arch, cfg", JOBS, ids=IDS)
def test_code_object_passes_the_checks(records, template, arch, cfg):
    rec = records[(template, arch, cfg.name)]
    # resources.inspect still asks every FlyDSL kernel for a matrix instruction; RMSNorm has
    # none, so that is the one reason allowed (see crosscompile's ``expects_mma``)
    mma = devices.ARCHS[arch].mma_instr
    others = [r for r in rec["reason"].split("; ") if r and not r.startswith(f"no {mma} ")]
    assert not others, rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert rec["lds_bytes"] == rmsnorm.lds_bytes(cfg) <= devices.ARCHS[arch].lds_bytes
    assert rec["vgpr"] > 0 and rec["occupancy"] >= 1 and rec["code_object_bytes"] > 1000
    load, store = rmsnorm.vector_instrs(arch, cfg.vec * 2)
    assert rec["required"][load] > 0 and rec["required"][store] > 0
    assert rec["default"] == (cfg == configs.default(arch, template))


@pytest.mark.l1
@pytest.mark.parametrize("template, arch, cfg", JOBS, ids=IDS)
def test_vector_accesses_are_as_wide_as_vec(memory_instrs, template, arch, cfg):
    """x and y move in vec-element accesses; the only narrower ones are the per-lane tail
    element (2 bytes) and, with fp32 weights, the weight's own 16-byte pieces / tail."""
    seen = memory_instrs[(template, arch, f"{cfg.vec}_{cfg.rows}_{cfg.waves}")]
    load, store = rmsnorm.vector_instrs(arch, cfg.vec * 2)
    tail_load, tail_store = rmsnorm.vector_instrs(arch, 2)
    allowed = {load, store, tail_load, tail_store}
    if template == "rms_norm:fp32w":  # 8 fp32 weights: two 16-byte loads, a 4-byte tail
        allowed |= {rmsnorm.vector_instrs(arch, 16)[0], rmsnorm.vector_instrs(arch, 4)[0]}
    assert seen[load] > 0 and seen[store] > 0 and seen[tail_store] > 0
    assert set(seen) <= allowed, seen
    assert not any(n.startswith("global_") for n in seen)  # every access is bounded
    stores = {n for n in seen if "_store_" in n}
    assert stores == {store, tail_store}  # y: vector stores, plus the tail element


# -- backward (NOTE [rms_norm backward]) ------------------------------------------------

@pytest.mark.l0
def test_backward_space_is_data_with_a_default_per_arch():
    for arch in configs.TARGETS:
        space = configs.NORM_BWD_SPACES[arch]
        assert len(set(space)) == len(space) >= 4
        assert configs.NORM_BWD_DEFAULTS[arch] in space
        for c in space:
            assert c.vec in (4, 8) and c.rows >= 1
            assert rmsnorm.bwd_lds_bytes(c) <= devices.ARCHS[arch].lds_bytes


@pytest.mark.l0
def test_backward_formula_is_torchs_gradient():
    """The kernel's per-row formula (NOTE [rms_norm backward]) against autograd, in fp64."""
    x = torch.randn(5, 37, dtype=torch.float64, requires_grad=True)
    w = torch.randn(37, dtype=torch.float64, requires_grad=True)
    g = torch.randn(5, 37, dtype=torch.float64)
    torch.nn.functional.rms_norm(x, (37,), w, 1e-5).backward(g)
    r = torch.rsqrt(x.detach().pow(2).mean(-1, keepdim=True) + 1e-5)
    gw = g * w.detach()
    coef = r ** 3 * (gw * x.detach()).sum(-1, keepdim=True) / 37
    assert torch.allclose(gw * r - x.detach() * coef, x.grad)
    assert torch.allclose((g * x.detach() * r).sum(0), w.grad)


@pytest.mark.l0
@pytest.mark.parametrize("args, why", [
    ((_x(2, 8), _x(2, 8, dtype=torch.float16), None), "the same for both"),
    ((_x(2, 8), _x(2, 8), _x(2, 8)), "weight must be 1-D"),
    ((_x(2, 8), _x(2, 8), _x(8, dtype=torch.float16)), "x's dtype or fp32"),
])
def test_backward_refuses_what_it_does_not_do(args, why):
    with pytest.raises(ValueError, match=why):
        rmsnorm.specialization_backward(args, configs.NORM_BWD_DEFAULTS["gfx950"])


@pytest.mark.l0
def test_backward_plan_views_rows_without_padding():
    cfg = configs.NORM_BWD_DEFAULTS["gfx950"]
    x, g, w = _x(3, 7, 33), _x(3, 7, 33), _x(33, dtype=torch.float32)
    p = rmsnorm.plan_backward(g, x, w, None, cfg)
    a = dict(zip(rmsnorm.BWD_ARGS, p.args))
    assert a["X"].shape == a["G"].shape == a["DX"].shape == (21, 33)  # hidden 33: not padded
    assert a["X"].data_ptr() == x.data_ptr()  # contiguous rows: no copy
    assert (a["rows"], a["hidden"], a["per_wg"], a["grid"]) == (21, 33, 8, 3)
    assert a["DW"].shape == (3, 33) and a["DW"].dtype == torch.float32
    assert not a["DW"].any()  # the kernel adds each row's term to its partial row
    assert p.template == "rms_norm_bwd"
    assert p.spec == {"dtype": "bf16", "w_dtype": "fp32", "has_weight": True, "ragged": True}
    a["DW"].fill_(1.0)  # the host's last step: dweight = sum of the partial rows
    dx, dw = p.result()
    assert dx.shape == x.shape and dw.dtype == torch.float32 and torch.equal(dw, 3 * a["DW"][0])
    assert rmsnorm.plan_backward(g, x, None, 0.0, cfg).result()[1] is None


BWD_CASES = [(a, c) for a in configs.TARGETS for c in configs.NORM_BWD_SPACES[a]]


@pytest.mark.l1
@pytest.mark.parametrize("arch, cfg", BWD_CASES, ids=[f"{a}-{c.name}" for a, c in BWD_CASES])
def test_backward_walks_every_row_once_and_owns_its_partial_row(mlir, arch, cfg):
    """Workgroup b walks rows b*per_wg + j (j < per_wg) with every thread on each row; the
    rows' elements are covered once (chunks of the whole workgroup, then the tail), rows
    past the end are dead (0-byte descriptors), and partial row b is written only by b."""
    threads = cfg.waves * rmsnorm.WAVE[arch]
    for rows, hidden in ((1, 1), (3 * cfg.rows + 1, 2049), (cfg.rows, 100), (5, 4096 + 3)):
        a = dict(zip(rmsnorm.BWD_ARGS,
                     rmsnorm.plan_backward(_x(rows, hidden), _x(rows, hidden), _x(hidden),
                                           None, cfg).args))
        chunks = rmsnorm.n_chunks(hidden, cfg.vec, threads)
        vecs = _vector_offsets(chunks * threads, cfg.vec)
        seen, partial = Counter(), Counter()
        for bid in range(a["grid"]):
            for j in range(a["per_wg"]):
                row = bid * a["per_wg"] + j
                nvec, n = rmsnorm.bounds(row, rows, hidden, cfg.vec)
                pv, ps = rmsnorm.bounds(bid, bid + 1, hidden, cfg.vec)
                assert (pv, ps) == (hidden // cfg.vec * cfg.vec, hidden)
                if row >= rows:
                    assert (nvec, n) == (0, 0)
                    continue
                for tid in range(threads):
                    for c in range(chunks):
                        offs = vecs[rmsnorm.chunk_index(c, tid, threads)]
                        inside = [o < nvec for o in offs]
                        assert all(inside) or not any(inside), "a vector straddles the bound"
                        if all(inside):
                            seen.update((row, o) for o in offs)
                            partial.update((bid, o) for o in offs)
                    t = rmsnorm.tail_index(hidden, tid, cfg.vec)
                    if t < n:
                        seen[(row, t)] += 1
                        partial[(bid, t)] += 1
        assert set(seen) == {(r, e) for r in range(rows) for e in range(hidden)}
        assert set(seen.values()) == {1}
        # each partial row gets one term per live row of its workgroup, from no other
        assert all(v == min(a["per_wg"], rows - b * a["per_wg"]) for (b, _), v in partial.items())


BWD_JOBS = [("rms_norm_bwd", a, configs.NORM_BWD_DEFAULTS[a]) for a in configs.TARGETS]
BWD_JOBS += [("rms_norm_bwd:fp32", "gfx1250", configs.NORM_BWD_DEFAULTS["gfx1250"]),
             ("rms_norm_bwd:nw", "gfx950", configs.NORM_BWD_DEFAULTS["gfx950"]),
             ("rms_norm_bwd", "gfx950", configs.NORM_BWD_SPACES["gfx950"][-1])]  # vec 4
RES_JOBS = [("rms_norm:residual", a, configs.default(a, "rms_norm")) for a in configs.TARGETS]
BWD_IDS = [f"{a}-{t}-{c.name}" for t, a, c in BWD_JOBS]


@pytest.fixture(scope="module")
def bwd_compiled(compile_in_child):
    """{(template, arch, config): inspection record + memory instructions}: the backend's
    plan on placeholders, compiled in a child process."""
    recs = compile_in_child(BWD_JOBS + RES_JOBS, _MEM.pattern)
    return {(t, a, c.name): r for (t, a, c), r in zip(BWD_JOBS + RES_JOBS, recs)}


@pytest.mark.l1
@pytest.mark.parametrize("template, arch, cfg", BWD_JOBS, ids=BWD_IDS)
def test_backward_code_object_is_clean_and_as_wide_as_vec(bwd_compiled, template, arch, cfg):
    """x, grad and dx move in ``vec``-element accesses (16-byte pieces for fp32), the
    dweight partials in 16-byte fp32 pieces; the only narrower accesses are the per-lane
    tail elements (one x element, one fp32 partial)."""
    rec = bwd_compiled[(template, arch, cfg.name)]
    assert rec["ok"], rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert rec["lds_bytes"] == rmsnorm.bwd_lds_bytes(cfg) <= devices.ARCHS[arch].lds_bytes
    bits = 32 if template.endswith(":fp32") else 16
    load, store = rmsnorm.vector_instrs(arch, rmsnorm.piece(cfg.vec, bits) * bits // 8)
    tail = rmsnorm.vector_instrs(arch, bits // 8)
    allowed = {load, store, *tail}
    if not template.endswith(":nw"):  # fp32 partial rows: 16-byte pieces and a 4-byte tail
        allowed |= {*rmsnorm.vector_instrs(arch, rmsnorm.piece(cfg.vec, 32) * 4),
                    *rmsnorm.vector_instrs(arch, 4)}
    mem = Counter(rec["mem"])
    assert mem[load] > 0 and mem[store] > 0 and mem[tail[1]] > 0, mem
    assert set(mem) <= allowed, mem
    assert not any(m.startswith("global_") for m in mem)  # every access is bounded


@pytest.mark.l2
@pytest.mark.skipif(backend.probe() is not None,
                    reason=f"needs a gfx950/gfx1250 ROCm device: {backend.probe()}")
@pytest.mark.parametrize("dtype, w_dtype", [(torch.bfloat16, torch.bfloat16),
                                            (torch.float16, torch.float32),
                                            (torch.float32, torch.float32), (BF16, None)])
@pytest.mark.parametrize("rows, hidden", [(513, 4096), (7, 5000 + 3), (3, 1)])  # tails
def test_backward_matches_autograd_on_the_device(dtype, w_dtype, rows, hidden):
    from xvendor import numerics
    x = torch.randn(rows, hidden, device="cuda").to(dtype)
    g = torch.randn(rows, hidden, device="cuda").to(dtype)
    w = torch.randn(hidden, device="cuda").to(w_dtype) if w_dtype else None
    arch = devices.info(x.device).arch
    cfg = configs.NORM_BWD_DEFAULTS[arch]
    p = rmsnorm.plan_backward(g, x, w, 1e-6, cfg)
    dict(zip(rmsnorm.BWD_ARGS, p.args))["DX"].fill_(float("nan"))  # poisoned
    rmsnorm.build_backward(cfg, arch=arch, **p.spec)[0](*p.args, torch.cuda.current_stream())
    dx, dw = p.result()
    xr = x.double().requires_grad_()
    wr = w.double().requires_grad_() if w is not None else None
    torch.nn.functional.rms_norm(xr, (hidden,), wr, 1e-6).backward(g.double())
    assert numerics.rel_error(dx, xr.grad) <= numerics.TOLERANCE[dtype]
    if w is not None:
        assert numerics.rel_error(dw, wr.grad) <= numerics.TOLERANCE[w.dtype]


# -- fused residual (NOTE [fused residual]) ---------------------------------------------

@pytest.mark.l0
def test_residual_plan_returns_both_and_checks_the_residual():
    cfg = configs.default("gfx950", "rms_norm")
    x, r = _x(3, 4096), _x(3, 4096)
    p = rmsnorm.plan(x, _x(4096), 1e-6, cfg, residual=r)
    a = dict(zip(rmsnorm.ARGS, p.args))
    assert a["R"].data_ptr() == r.data_ptr() and a["H"].shape == (3, 4096)
    assert p.spec["has_residual"] and not rmsnorm.plan(x, None, None, cfg).spec["has_residual"]
    y, h = p.result()
    assert y.shape == h.shape == x.shape and h.data_ptr() != y.data_ptr()
    with pytest.raises(ValueError, match="residual .* must have x's shape and dtype"):
        rmsnorm.plan(x, None, None, cfg, residual=_x(3, 4096, dtype=torch.float16))


@pytest.mark.l1
@pytest.mark.parametrize("template, arch, cfg", RES_JOBS, ids=[a for _, a, _ in RES_JOBS])
def test_residual_code_object_is_clean_and_as_wide_as_vec(bwd_compiled, template, arch, cfg):
    """x and residual read, h and y written, all in ``vec``-element accesses, plus the tail
    elements: two loads and two stores per chunk more than nothing, no LDS beyond the
    forward's."""
    rec = bwd_compiled[(template, arch, cfg.name)]
    assert rec["ok"], rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert rec["lds_bytes"] == rmsnorm.lds_bytes(cfg)
    load, store = rmsnorm.vector_instrs(arch, cfg.vec * 2)
    tail_load, tail_store = rmsnorm.vector_instrs(arch, 2)
    mem = Counter(rec["mem"])
    assert set(mem) == {load, store, tail_load, tail_store}, mem
    assert mem[tail_store] == 2  # y and h: one tail element each


@pytest.mark.l2
@pytest.mark.skipif(backend.probe() is not None,
                    reason=f"needs a gfx950/gfx1250 ROCm device: {backend.probe()}")
@pytest.mark.parametrize("rows, hidden", [(513, 4096), (7, 5000 + 3), (64, 512)])
def test_residual_matches_torch_on_the_device(rows, hidden):
    from xvendor import numerics
    x, r, w = (torch.randn(*s, device="cuda").to(BF16) for s in ((rows, hidden),
                                                                  (rows, hidden), (hidden,)))
    arch = devices.info(x.device).arch
    cfg = configs.norm_for(arch, hidden)
    p = rmsnorm.plan(x, w, 1e-6, cfg, residual=r)
    a = dict(zip(rmsnorm.ARGS, p.args))
    a["Y"].fill_(float("nan"))  # poisoned
    a["H"].fill_(float("nan"))
    rmsnorm.build(cfg, arch=arch, **p.spec)[0](*p.args, torch.cuda.current_stream())
    y, h = p.result()
    assert torch.equal(h, x + r)  # one bf16 rounding of the sum, as torch
    ref = numerics.rms_norm(x + r, w, 1e-6)
    assert numerics.rel_error(y, ref) <= numerics.TOLERANCE[BF16]
