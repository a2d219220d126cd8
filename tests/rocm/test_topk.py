"""The FlyDSL topk templates: config space, keys, the selection logic, row proofs, real compiles.

l0: the space and the form chosen per shape, the errors for what the kernels do not do, the
host plan (no padding), the order keys (monotone, exact inverse, NaN above +inf), and the
radix kernel's selection logic run pass by pass on the CPU (``topk.reference_select``, built
from the kernel's own key/digit/mask functions) against torch on ties, NaNs, k = n, smallest,
odd row lengths; the gate identity per compiled specialization.
l1: every element of a row visited exactly once by the kernels' index functions and their
vector layout as FlyDSL evaluates it (router: one wave per row; radix: the whole workgroup),
and real gfx950/gfx1250 code objects (router and radix, bf16/fp16/fp32, largest/smallest)
compiled in a child process: no spills, no scratch, LDS as planned and within the arch,
loads exactly as wide as the config's ``vec``, LDS atomics for the radix histogram.
l2: numerics against torch.topk on a gfx950/gfx1250 device; skipped here (no AMD GPU):
the kernels' numerics are unverified without the hardware.
"""

from collections import Counter

import pytest
import torch

from xvendor import devices
from xvendor.rocm import backend, configs, rmsnorm, topk



# -- l0 ------------------------------------------------------------------------------

@pytest.mark.l0
def test_space_is_data_and_the_form_follows_the_shape():
    for arch in configs.TARGETS:
        wave = topk.WAVE[arch]
        for c in configs.TOPK_SPACES[arch]:
            assert topk.lds_bytes(arch, c) <= devices.ARCHS[arch].lds_bytes
            assert c.form in ("router", "radix")
            if c.form == "router":
                assert c.vec * wave >= 256  # experts up to 256
            else:
                assert c.k_max >= 1024 and c.k_max % (c.waves * wave) == 0
        for form, d in configs.TOPK_DEFAULTS[arch].items():
            assert d in configs.TOPK_SPACES[arch] and d.form == form
        assert configs.topk_for(arch, 256, 8).form == "router"  # MoE router
        assert configs.topk_for(arch, 8, 1).form == "router"
        assert configs.topk_for(arch, 257, 8).form == "radix"
        assert configs.topk_for(arch, 128, wave + 1).form == "radix"  # k above the lanes
        assert configs.topk_for(arch, 262144, 1024).form == "radix"  # sampling


@pytest.mark.l0
@pytest.mark.parametrize("args, cfg, why", [
    ((torch.zeros(2, 8, dtype=torch.float64), 2), ("radix", 8, 4, 1024), "not bf16"),
    ((torch.zeros(2, 40000), 1025), ("radix", 8, 4, 1024), "k <= 1024"),
    ((torch.zeros(2, 300), 2), ("router", 4, 4, 0), "up to 256 elements"),
    ((torch.zeros(2, 200), 65), ("router", 4, 4, 0), "k <= 64"),
])
def test_what_the_kernels_do_not_do_raises_value_error(args, cfg, why):
    with pytest.raises(ValueError, match=why):
        topk.specialization(args, configs.TopkConfig(*cfg), "gfx950")


@pytest.mark.l0
def test_plan_views_rows_without_padding():
    cfg = configs.topk_for("gfx950", 100, 8)
    x = torch.randn(3, 5, 100).bfloat16()
    p = topk.plan(x, 8, -1, True, cfg, "gfx950")
    a = dict(zip(topk.ARGS, p.args))
    assert a["X"].shape == (15, 100) and a["X"].data_ptr() == x.data_ptr()  # no copy
    assert a["V"].shape == (15, 8) and a["I"].dtype == torch.int64
    assert (a["rows"], a["n"], a["k"], a["grid"]) == (15, 100, 8, 4)  # 4 rows per workgroup
    assert p.spec == {"dtype": "bf16", "largest": True, "ragged": False}  # 100 % vec 4 == 0
    v, i = p.result()
    assert v.shape == i.shape == (3, 5, 8)
    p0 = topk.plan(x, 2, 0, False, configs.topk_for("gfx950", 3, 2), "gfx950")  # dim 0
    a0 = dict(zip(topk.ARGS, p0.args))
    assert a0["X"].shape == (500, 3) and a0["X"].is_contiguous()
    assert p0.result()[0].shape == (2, 5, 100)
    big = topk.plan(torch.randn(2, 5003), 50, -1, True, configs.topk_for("gfx950", 5003, 50),
                    "gfx950")
    assert dict(zip(topk.ARGS, big.args))["grid"] == 2  # one workgroup per row


SPECIAL = [float("-inf"), -3.5, -1e-30, -0.0, 0.0, 1e-30, 2.0, float("inf"), float("nan")]


@pytest.mark.l0
def test_order_keys_follow_float_order_and_decode_exactly():
    x = torch.tensor(SPECIAL + torch.randn(200).tolist(), dtype=torch.float32)
    bits = x.view(torch.int32).to(torch.int64)
    bits = torch.where(torch.isnan(x), 0x7FC00000, bits)
    for largest in (True, False):
        key = topk.order_key(bits, largest)
        assert key.min() >= -2**31 and key.max() < 2**31  # int32 keys
        dec = topk.decode_key(key, largest)
        assert torch.equal(dec, bits)
        finite = ~torch.isnan(x)
        fx, fk = x[finite], key[finite]
        for i in range(len(fx)):  # float order (-0 just below +0), reversed when smallest
            above = fx > fx[i] if largest else fx < fx[i]
            assert bool((fk[above] > fk[i]).all())
        nan_key = key[torch.isnan(x)][0]
        assert (nan_key > fk.max()) if largest else (nan_key < fk.min())  # NaN: largest


@pytest.mark.l0
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("n, k", [(1, 1), (7, 7), (300, 5), (1000, 64), (5003, 50),
                                  (70000, 300)])  # k = n; ragged rows; > 2**16: 3 index passes
@pytest.mark.parametrize("largest", [True, False])
def test_radix_select_logic_matches_torch(dtype, n, k, largest):
    g = torch.Generator().manual_seed(n * 7 + k)
    x = torch.randn(3, n, generator=g).to(dtype)
    x[0, ::3] = x[0, n // 2]  # many equal keys: the index passes decide
    if n > 10:
        x[1, 5], x[1, 6], x[2, 3] = float("nan"), float("-inf"), float("inf")
    v, i = topk.reference_select(x, k, largest)
    # torch's order for equal values is not promised; the stable sort states ours
    sv, si = torch.sort(x.float(), dim=1, descending=largest, stable=True)
    assert torch.equal(i, si[:, :k])
    assert torch.equal(v.float().nan_to_num(nan=7.0), sv[:, :k].nan_to_num(nan=7.0))
    tv, _ = torch.topk(x.float(), k, largest=largest)
    assert torch.equal(v.float().nan_to_num(nan=7.0), tv.nan_to_num(nan=7.0))
    assert v.dtype == dtype


def _router_twin(x, k, largest, vec, wave):
    """The router kernel's rounds on one row, lane by lane: each lane's candidates (vector
    ``lane`` and its tail element, by the kernel's index functions), per round the best
    candidate below the previous winner, then the butterfly over the wave."""
    n = x.shape[0]
    bits = x.float().view(torch.int32).tolist()
    key = [topk.order_key(0x7FC00000 if v != v else b, largest)
           for b, v in zip(bits, x.float().tolist())]
    nvec, nn = rmsnorm.bounds(0, 1, n, vec)
    lanes = []
    for lane in range(wave):
        es = [lane * vec + i for i in range(vec)]
        cands = [(key[e] if e < nvec else topk.INT_MIN, e) for e in es]
        t = rmsnorm.tail_index(n, lane, vec)
        lanes.append(cands + [(key[t] if t < nn else topk.INT_MIN, t)])
    better = lambda a, b: topk._better(None, a[0], a[1], b[0], b[1])  # noqa: E731
    prev, out = (topk.INT_MAX, -1), []
    for _ in range(k):
        best = []
        for cands in lanes:
            b = (topk.INT_MIN, topk.INT_MAX)
            for c in cands:
                b = c if better(prev, c) and better(c, b) else b
            best.append(b)
        for s in range(wave.bit_length() - 1):  # shuffle_xor butterfly
            best = [best[i ^ (wave >> (s + 1))] if better(best[i ^ (wave >> (s + 1))], best[i])
                    else best[i] for i in range(wave)]
        assert len(set(best)) == 1  # every lane agrees on the winner
        prev = best[0]
        out.append(prev[1])
    return torch.tensor(out)


@pytest.mark.l0
@pytest.mark.parametrize("arch", configs.TARGETS)
@pytest.mark.parametrize("n, k", [(8, 1), (60, 6), (100, 8), (256, 8), (9, 9)])
@pytest.mark.parametrize("largest", [True, False])
def test_router_rounds_match_torch(arch, n, k, largest):
    cfg = configs.topk_for(arch, n, k)
    assert cfg.form == "router"
    g = torch.Generator().manual_seed(n + k)
    x = torch.randn(n, generator=g).bfloat16()
    x[::4] = x[n // 2]  # ties
    if n > 20:
        x[3], x[11] = float("nan"), float("inf")
    got = _router_twin(x, k, largest, cfg.vec, topk.WAVE[arch])
    _, si = torch.sort(x.float(), descending=largest, stable=True)
    assert torch.equal(got, si[:k])


@pytest.mark.l0
def test_gate_identity_is_one_per_compiled_specialization():
    info = devices.hypothetical("gfx950")
    calls = {
        "router": (torch.randn(4, 128).bfloat16(), 8, -1, True, True),
        "router ragged": (torch.randn(4, 130).bfloat16(), 8, -1, True, True),
        "router smallest": (torch.randn(4, 128).bfloat16(), 8, -1, False, True),
        "router fp32": (torch.randn(4, 128), 8, -1, True, True),
        "radix": (torch.randn(2, 40000).bfloat16(), 100, -1, True, True),
    }
    idents = {n: backend.gate_identity("topk", info, a[0].dtype, a, None) for n, a in calls.items()}
    assert len(set(idents.values())) == len(idents), idents
    assert idents["router"].startswith("topk:router/router_v4_w4/")
    assert idents["radix"].startswith("topk:radix/radix_v8_w4_k1024/")


# -- l1: row proofs ------------------------------------------------------------------

def _vector_offsets(n_vectors, piece):
    """{vector index: element offsets} of the kernels' vector layout, evaluated by FlyDSL."""
    import flydsl.expr as fx
    lay = rmsnorm.vector_layout(fx, n_vectors, piece)
    (s0, s1), (d0, d1) = lay.shape.to_py_value(), lay.stride.to_py_value()
    return {i: [j * d0 + i * d1 for j in range(s0)] for i in range(s1)}


CASES = [(a, c) for a in configs.TARGETS for c in configs.TOPK_SPACES[a]]


@pytest.mark.l1
@pytest.mark.parametrize("arch, cfg", CASES, ids=[f"{a}-{c.name}" for a, c in CASES])
def test_every_element_of_a_row_is_visited_once(mlir, arch, cfg):
    """Router: vector ``lane`` of its wave's row, then the tail element; radix: the chunks
    of the whole workgroup, then the tail. Elements past the row are never counted
    (in range: ``e < nvec`` for vectors, ``t < n`` for the tail, as the kernels test)."""
    wave = topk.WAVE[arch]
    lanes = wave if cfg.form == "router" else cfg.waves * wave
    lengths = (1, 7, 8, 100, cfg.vec * wave - 1, cfg.vec * wave) if cfg.form == "router" \
        else (1, 7, 2049, 5003, 32768 + 5)
    for n in lengths:
        chunks = 1 if cfg.form == "router" else rmsnorm.n_chunks(n, cfg.vec, lanes)
        if cfg.form == "router":
            assert rmsnorm.n_chunks(n, cfg.vec, lanes) <= 1  # one vector per lane covers it
        vecs = _vector_offsets(chunks * lanes, cfg.vec)
        nvec, nn = rmsnorm.bounds(0, 1, n, cfg.vec)
        seen = Counter()
        for lane in range(lanes):
            for c in range(chunks):
                v = rmsnorm.chunk_index(c, lane, lanes)
                assert vecs[v] == [v * cfg.vec + i for i in range(cfg.vec)]  # e = v*VEC + i
                seen.update(e for e in vecs[v] if e < nvec)
            t = rmsnorm.tail_index(n, lane, cfg.vec)
            if t < nn:
                seen[t] += 1
        assert set(seen) == set(range(n)) and set(seen.values()) == {1}, n


# -- l1: real code objects -----------------------------------------------------------

JOBS = [(t, a, configs.TOPK_DEFAULTS[a][t.split(":")[1]]) for a in configs.TARGETS
        for t in ("topk:router", "topk:radix")]
JOBS += [("topk:radix:smallest", "gfx950", configs.TOPK_DEFAULTS["gfx950"]["radix"]),
         ("topk:router:fp32", "gfx1250", configs.TOPK_DEFAULTS["gfx1250"]["router"])]
IDS = [f"{a}-{t}-{c.name}" for t, a, c in JOBS]
_MEM = r"\b((?:buffer|global)_(?:load|store)_\w+|ds_add\w*)"


@pytest.fixture(scope="module")
def compiled(compile_in_child):
    """{(template, arch): inspection record + Counter of memory instructions}, compiled in
    one child process."""
    return {(t, a): r for (t, a, _), r in zip(JOBS, compile_in_child(JOBS, _MEM))}


@pytest.mark.l1
@pytest.mark.parametrize("template, arch, cfg", JOBS, ids=IDS)
def test_code_object_is_clean_and_loads_are_as_wide_as_vec(compiled, template, arch, cfg):
    rec = compiled[(template, arch)]
    assert rec["ok"], rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert rec["lds_bytes"] == topk.lds_bytes(arch, cfg) <= devices.ARCHS[arch].lds_bytes
    assert rec["occupancy"] >= 1 and rec["code_object_bytes"] > 1000
    dtype = {"fp32": 32, "smallest": 16}.get(template.rpartition(":")[2], 16)
    width = rmsnorm.piece(cfg.vec, dtype) * dtype // 8
    load = rmsnorm.vector_instrs(arch, width)[0]
    tail_load = rmsnorm.vector_instrs(arch, dtype // 8)[0]
    mem = Counter(rec["mem"])
    loads = {m for m in mem if "_load_" in m}
    assert mem[load] > 0 and loads <= {load, tail_load}, mem  # x: vec-wide, plus the tail
    stores = {m for m in mem if "_store_" in m}  # values (x's width) and int64 indices
    assert stores == {rmsnorm.vector_instrs(arch, dtype // 8)[1],
                      rmsnorm.vector_instrs(arch, 8)[1]}, mem
    assert not any(m.startswith("global_") for m in mem)  # every access is bounded
    if cfg.form == "radix":
        assert mem["ds_add_u32"] > 0 and mem["ds_add_rtn_u32"] > 0  # histogram, gather slots
    else:
        assert not any(m.startswith("ds_add") for m in mem)  # router: shuffles only


# -- l2: numerics on the device --------------------------------------------------------

@pytest.mark.l2
@pytest.mark.skipif(backend.probe() is not None,
                    reason=f"needs a gfx950/gfx1250 ROCm device: {backend.probe()}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rows, n, k, largest", [
    (513, 256, 8, True), (77, 60, 6, True), (9, 8, 1, False),  # router: tails, smallest
    (3, 32768 + 5, 1024, True), (2, 262144, 50, False), (2, 5003, 5003 // 5, True)])  # radix
def test_matches_torch_on_the_device(dtype, rows, n, k, largest):
    x = torch.randn(rows, n, device="cuda").to(dtype)
    x[0, ::3] = x[0, 1]  # ties: lowest index first
    arch = devices.info(x.device).arch
    cfg = configs.topk_for(arch, n, k)
    p = topk.plan(x, k, -1, largest, cfg, arch)
    a = dict(zip(topk.ARGS, p.args))
    a["V"].fill_(float("nan"))  # poisoned: every entry must be written
    a["I"].fill_(-1)
    topk.build(cfg, arch=arch, **p.spec)[0](*p.args, torch.cuda.current_stream())
    v, i = p.result()
    sv, si = torch.sort(x.float(), dim=1, descending=largest, stable=True)
    assert torch.equal(i, si[:, :k]) and torch.equal(v.float(), sv[:, :k])
