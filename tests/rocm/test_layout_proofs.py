"""Layout proofs (l1), evaluated on the CPU for every shipped config of gfx950 and gfx1250.

Partitions, with FlyDSL's layout algebra: the tiled MMA's thread-value layouts cover its C
tile exactly once and its A/B tiles exactly ``warps_n`` / ``warps_m`` times (each wave of
the other dimension holds a copy), the workgroup tile is a whole number of MMA tiles, and
the G2S copies of the gfx950 templates cover their (rows, block_k) tile exactly once. The
layouts are built by the templates' own functions; FlyDSL evaluates them (shape/stride come
back from the MLIR types) and the counting is done here in Python.

Tail masks (NOTE [tail masks] below): for every thread, the (n, m) coordinates the
epilogue's vector stores cover (both archs; the kernels compute C^T) cover the C tile exactly
once, each store being ``vec`` consecutive N at one M starting at a multiple of ``vec``, so
one predicate per store (``n < columns_left``, with ``vec`` dividing N) keeps exactly the
stores inside C; the (row, k) coordinates the gfx950 K-tail select compares cover their
tile once, so ``k < k_left`` keeps exactly the group's K. gfx1250's transposing fragment
reads deliver exactly the WMMA fragments (tests/rocm/test_tr16_proofs.py). The gfx950 MN-major LDS swizzle (for the
transposing reads) agrees with its intended XOR on samples, is a bijection on the tile and
keeps every 8-aligned group of rows contiguous (16-byte writes, 8-byte transposing reads).

Grids and tile mapping, on the code that runs: ``launch.plan_gemm`` / ``plan_grouped`` are
called with CPU tensors (they only allocate) and every program of the grid they put in the
launch arguments is mapped by ``tiling.tile_of`` and ``tiling.view_bounds`` (the functions
the kernels call at trace time, run here on Python ints) with the arguments the launch
passes, for fixed hard cases and random ones (hypothesis: empty groups, one-row and partial
tiles, rows past offs[-1], N or M not a multiple of the tile, M = 0, N = 0, G = 0, transposed
operands) in gemm, 2Dx3D, 3Dx2D (as the transposed 2Dx3D), 2Dx2D and 3Dx3D. Proven: C has
no padded columns, every output element is written by exactly one program, nothing past
offs[-1] is written (2Dx3D), a tile's rows, its K range and its B / bias views stay inside
its group, programs past the last tile are idle, no program divides by zero or reads offs
out of range, and the launcher's parameters are ``launch.ARGS`` with the kernel calling the
traced ``tile_of``.

Not proven here: that the kernel does nothing when ``valid`` is false (its body is one
``if valid:``, read, not run); FlyDSL's ``flat_divide`` and buffer-descriptor semantics (a
(BN, BM) tile (pid_n, pid_m) of the transposed C view is rows pid_m*BM.., columns
pid_n*BN.. of C; stores at or past
the descriptor's size are dropped, and ``fx.elem_less`` keeps a coordinate whose every
component is below the bound: modelled in ``_written``); which elements the copies
and MMAs inside a tile touch (the partition proofs above cover their shapes, the compile
tests their code; the bounded views they read are checked here, per group); int32 overflow
(the plans refuse operands of 2**31 bytes or more, and the shapes here are small); and
numerics (tests/rocm/test_gpu.py, on a device). ``//`` and ``%`` agree with the kernels'
``floordivsi`` / ``remsi`` because every operand here is non-negative.
"""

import inspect
from collections import Counter

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as hst

fx = pytest.importorskip("flydsl.expr")

from xvendor.rocm import configs, gemm_gfx950, gemm_gfx1250, launch, tiling  # noqa: E402
from xvendor.testing.layouts import partition_coords, store_coverage  # noqa: E402

pytestmark = pytest.mark.l1

MODULES = {"gfx950": gemm_gfx950, "gfx1250": gemm_gfx1250}
CASES = [(arch, cfg) for arch in configs.TARGETS
         for cfg in dict.fromkeys(c for t in configs.TEMPLATES for c in configs.SPACES[arch][t])]


def _tv_image(layout):
    """Counter of the indices the (thread, value) layout maps to."""
    shape, stride = layout.shape.to_py_value(), layout.stride.to_py_value()
    threads = tiling.layout_offsets(shape[0], stride[0])
    values = tiling.layout_offsets(shape[1], stride[1])
    return Counter(t + v for t in threads for v in values), len(threads)


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
    # the MMA tiles C^T (NOTE [C transposed]): its M is our N, its A operand our B
    _exactly(c, tm * tn, 1)  # every C element owned by exactly one thread: none written twice
    _exactly(a, tm * tk, cfg.warps_m)  # our B replicated across the waves along our M
    _exactly(b, tn * tk, cfg.warps_n)  # our A replicated across the waves along our N
    # the workgroup tile is a whole number of MMA tiles (the fragments repeat, never overlap)
    assert cfg.block_n % tm == 0 and cfg.block_m % tn == 0 and cfg.block_k % tk == 0


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


# NOTE [tail masks]: the masks compare the (row, col) that ``tile_coords`` gives each value.
# Proven here for every thread: those coordinates cover the tile exactly once, so the
# predicate / select keeps exactly the values inside C's N columns or the group's K.
MASK_CASES = [(arch, configs.default(arch, "gemm")) for arch in configs.TARGETS] + [
    ("gfx950", next(c for c in configs.SPACES["gfx950"]["gemm"] if c.mma == 32)),
    ("gfx950", next(c for c in configs.SPACES["gfx950"]["gemm"] if c.warps_m == 1))]


C_RUNS = {"gfx950": lambda cfg: gemm_gfx950.C_RUN[cfg.mma], "gfx1250": lambda cfg: gemm_gfx1250.C_RUN}


@pytest.mark.parametrize("arch, cfg", MASK_CASES, ids=[f"{a}-{c.name}" for a, c in MASK_CASES])
@pytest.mark.parametrize("out_bits, n_align", [(16, 8), (32, 8), (16, 2), (16, 1)])
def test_store_predicate_coordinates_cover_the_c_tile_once(mlir, arch, cfg, out_bits, n_align,
                                                           monkeypatch):
    """The epilogue's vector stores (``store_c_t``): every element of the (BN, BM) C^T tile
    is stored once; each store is ``vec`` consecutive N at one M (contiguous in row-major
    C), its first N a multiple of ``vec``, so with ``vec`` dividing N the one predicate per
    store (on its first element) keeps exactly the vectors inside C's N columns."""
    monkeypatch.setenv("FLYDSL_GPU_ARCH", arch)
    mma = MODULES[arch].tiled_mma(fx, cfg, fx.BFloat16)
    vec = gemm_gfx950.store_width(C_RUNS[arch](cfg), n_align, out_bits)
    assert vec == min(C_RUNS[arch](cfg), n_align, 128 // out_bits) and n_align % vec == 0
    TO = fx.Float32 if out_bits == 32 else fx.BFloat16
    _, tiled = gemm_gfx950.store_copy(fx, mma, TO, vec)  # the epilogue's own copy
    # each store: what keep[i // vec] guards
    seen = store_coverage(tiled, cfg.num_warps * MODULES[arch].WAVE, cfg.block_n, cfg.block_m,
                          vec)
    assert set(seen) == {(n, m) for n in range(cfg.block_n) for m in range(cfg.block_m)}
    assert set(seen.values()) == {1}
    # the epilogue keeps a vector iff fx.elem_less((n0, m0), (n_left, block_m)): every
    # component below (FlyDSL's documented meaning, not evaluated here: it is not folded
    # at trace time); n_left is a multiple of vec, so the vector is all in or all out


def test_accumulator_runs_are_what_the_store_width_assumes(mlir, monkeypatch):
    """Each lane's C^T accumulator holds runs of ``C_RUN`` consecutive N at one M."""
    for arch, cfg in MASK_CASES:
        monkeypatch.setenv("FLYDSL_GPU_ARCH", arch)
        mma = MODULES[arch].tiled_mma(fx, cfg, fx.BFloat16)
        run = C_RUNS[arch](cfg)
        ident = fx.make_view((0, 0), fx.make_identity_layout((cfg.block_n, cfg.block_m)))
        for tid in (0, 1, 17, cfg.num_warps * MODULES[arch].WAVE - 1):
            coords = partition_coords(mma.thr_slice(tid).partition_C(ident))
            for i in range(0, len(coords), run):
                n0, m0 = coords[i]
                assert coords[i:i + run] == [(n0 + j, m0) for j in range(run)], (arch, tid)


@pytest.mark.parametrize("arch, cfg", [c for c in MASK_CASES if c[0] == "gfx950"],
                         ids=[c.name for a, c in MASK_CASES if a == "gfx950"])
def test_k_tail_select_coordinates_cover_the_loaded_tile_once(mlir, arch, cfg, monkeypatch):
    monkeypatch.setenv("FLYDSL_GPU_ARCH", arch)
    threads = cfg.num_warps * gemm_gfx950.WAVE
    for rows in {cfg.block_m, cfg.block_n}:
        copy = gemm_gfx950._k_major_copy(fx, fx.BFloat16, rows, cfg.block_k, threads)
        seen = Counter()
        for tid in range(threads):
            seen.update(partition_coords(
                gemm_gfx950.tile_coords(fx, copy.get_slice(tid), rows, cfg.block_k)))
        assert set(seen) == {(r, k) for r in range(rows) for k in range(cfg.block_k)}
        assert set(seen.values()) == {1}
    # the bound the kernel compares with, on the last (partial) K tile and past it
    assert tiling.k_left(100, 1, 64) == 36 and tiling.k_left(100, 2, 64) < 0


def _swizzled(r, k, rows):
    """The intended MN-major LDS offset: row index bits 4.. XOR the low K bits."""
    shift = rows.bit_length() - 1 - 4
    bits = min(2, shift)
    return k * rows + (r ^ ((k & ((1 << bits) - 1)) << 4))


@pytest.mark.parametrize("rows, block_k", sorted({(r, c.block_k) for _, c in CASES
                                                  for r in (c.block_m, c.block_n)}))
def test_mn_major_swizzle_is_a_bijection_that_keeps_vectors_whole(mlir, rows, block_k):
    """FlyDSL's composed layout agrees with the intended XOR on a sample, and that XOR maps
    the tile onto itself with every 8-aligned group of rows (one G2S write, two transposing
    reads) kept as 8 consecutive elements."""
    layout = fx.make_composed_layout(gemm_gfx950.mn_major_swizzle(fx, rows),
                                     fx.make_ordered_layout((rows, block_k, 2), (0, 1, 2)))
    for r, k in [(0, 0), (rows - 1, block_k - 1), (16, 1), (17, 3), (rows // 2 + 5, 6),
                 (rows - 9, block_k // 2 + 1)]:
        assert fx.crd2idx((r, k, 1), layout).to_py_value() == _swizzled(r, k, rows) + rows * block_k
    offsets = [_swizzled(r, k, rows) for k in range(block_k) for r in range(rows)]
    assert sorted(offsets) == list(range(rows * block_k))
    for k in range(block_k):
        for r0 in range(0, rows, 8):
            base = _swizzled(r0, k, rows)
            assert base % 8 == 0 and [_swizzled(r0 + i, k, rows) for i in range(8)] == \
                list(range(base, base + 8))


CONFIGS = [c for _, c in CASES]
TEMPLATES = ("gemm", "2Dx3D", "2Dx2D", "3Dx3D")


def _closure(f):
    return dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__)))


@pytest.mark.parametrize("arch", configs.TARGETS)
@pytest.mark.parametrize("template", TEMPLATES)
def test_launch_arguments_reach_the_traced_tile_mapping(arch, template):
    fn = MODULES[arch].build(template, configs.default(arch, "gemm"), dtype="bf16",
                             out_dtype="bf16", has_bias=False, a_k_major=True, b_k_major=True)[0]
    params = list(inspect.signature(fn.func).parameters)
    assert tuple(params) == launch.ARGS + ("stream",)  # launch.args are passed by position
    kernel = _closure(fn.func)["kernel"]._original_func  # the @flyc.kernel it launches
    assert _closure(kernel)["tile"] is tiling.traced(tiling.tile_of)


class _Offs:
    """offs as the kernel reads it; a negative or past-the-end index is a failed proof."""

    def __init__(self, ends):
        self.ends = list(ends)

    def __getitem__(self, i):
        assert 0 <= i < len(self.ends), f"offs[{i}] read, offs has {len(self.ends)} entries"
        return self.ends[i]


def _extent(t):
    """Elements addressable from t's first element (its storage past its offset)."""
    return t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()


def _written(view, pid_m, pid_n, cfg, N, rows, row_base, c_strides):
    """(rows, columns) of C (logical (rows, N), row ``row_base`` first in the group's view)
    that tile (pid_m, pid_n) of a C view stores. Both ranges are [first, end).

    The tile is view rows pid_m*BM.., columns pid_n*BN..; the epilogue keeps tile row r and
    column c only when r < ``tiling.rows_left`` and c < ``tiling.columns_left`` (the
    kernels' own bounds); every kept element must lie inside the view's descriptor (else it
    would be dropped: a missed write). The view's strides must be C's own (the logical
    coverage is then the storage's) and its base C's row ``row_base``.
    """
    base, _, strides, n_elems = view
    assert strides == c_strides, "the view does not walk C as C is laid out"
    assert strides in ((N, 1), (1, strides[1])), "C is neither row- nor column-major"
    assert base == row_base * strides[0], "the view does not start at the group's first row"
    r0, c0 = pid_m * cfg.block_m, pid_n * cfg.block_n
    kept_r = min(cfg.block_m, tiling.rows_left(rows, pid_m, cfg.block_m))
    kept_c = min(cfg.block_n, tiling.columns_left(N, pid_n, cfg.block_n))
    assert kept_r > 0 and kept_c > 0, "a tile with nothing to store"
    last = (r0 + kept_r - 1) * strides[0] + (c0 + kept_c - 1) * strides[1]
    assert last < n_elems, "a kept store past the descriptor: dropped, not written"
    first = row_base + r0
    return (first, first + kept_r), (c0, c0 + kept_c)


def _run_grid(plan, cfg, offs):
    """Map every program of ``plan``'s grid the way the kernel does; check each tile."""
    a = plan.named()
    C, G, N, ldc = a["C"], a["G"], a["N"], a["ldc"]
    ragged_m, ragged_k = plan.template == "2Dx3D", plan.template == "2Dx2D"
    col = plan.spec["c_col_major"]
    ends = list(offs) if offs is not None else []
    starts = [0] + ends[:-1]
    if col:  # 3Dx2D: the caller's output, transposed: rows ldc apart, no padding
        assert C.dim() == 2 and C.t().is_contiguous() and ldc == C.shape[0]
        assert C.stride(1) == ldc or C.numel() == 0
    else:
        assert C.is_contiguous() and C.shape[-1] == ldc == N  # no padded columns
    assert a["tiles_n"] == -(-N // cfg.block_n)
    cov = torch.zeros(C.numel() // max(N, 1) if N else 0, N, dtype=torch.int32)
    tiles = 0
    for bid in range(a["grid"]):
        valid, g, pid_m, pid_n, row0, rows, k0, kn = tiling.tile_of(
            plan.template, bid, a["M"], a["K"], G, _Offs(ends), a["tiles_m"], a["tiles_n"],
            cfg.block_m)
        if not valid:
            continue
        tiles += 1
        assert 0 <= g < G and 0 <= pid_n < a["tiles_n"]
        v = tiling.view_bounds(g, row0, rows, k0, kn, N, a["lda"], a["ldb"], ldc,
                               a["sag"], a["sbg"], a["scg"], a["sbiasg"],
                               plan.spec["a_k_major"], plan.spec["b_k_major"], col)
        row_base = row0 + (g * a["scg"] // N if N else 0)
        (first, end), (c0, c1) = _written(v["C"], pid_m, pid_n, cfg, N, rows, row_base,
                                          C.stride()[-2:])
        assert 0 <= first < end <= cov.shape[0], "a tile stores nothing or past C"
        assert 0 <= c0 < c1 <= N, "a tile stores past C's row"
        cov[first:end, c0:c1] += 1
        if ragged_m:  # rows of group g only, and the tile starts inside the group
            assert pid_m == 0 and starts[g] <= row0 < ends[g] and row0 + rows == ends[g]
            assert starts[g] <= first and end <= ends[g]
            a_off, _, _, a_n = v["A"]  # A (K-major) is bounded to the group's rows
            assert a_off == row0 * a["lda"] and a_off + a_n == ends[g] * a["lda"]
        else:
            assert g * a["M"] <= first and end <= (g + 1) * a["M"]
            assert 0 <= pid_m < a["tiles_m"] and (row0, rows) == (0, a["M"])
        if ragged_k:  # K range of group g only, both operands bounded to it
            assert (k0, kn) == (starts[g], ends[g] - starts[g])
            assert v["A"][0] == k0 * a["lda"] and v["A"][3] == kn * a["lda"]
            assert v["B"][0] == k0 * a["ldb"] and v["B"][3] == kn * a["ldb"]
        else:
            assert (k0, kn) == (0, a["K"])
        b_off, _, _, b_n = v["B"]
        assert b_off >= g * a["sbg"] and b_off + b_n <= _extent(a["B"])
        if G > 1 and not ragged_k:
            assert b_off + b_n <= (g + 1) * a["sbg"]  # B[g] only
        if plan.spec["has_bias"]:
            assert v["Bias"][0] == g * a["sbiasg"] and v["Bias"][3] == N
            assert v["Bias"][0] + N <= a["Bias"].numel()
    return cov, tiles


def _prove(plan, cfg, offs):
    a = plan.named()
    cov, tiles = _run_grid(plan, cfg, offs)
    if plan.template == "2Dx3D":
        end = offs[-1] if len(offs) else 0
        assert (cov[:end] == 1).all(), "an output element of a group is not written exactly once"
        assert (cov[end:] == 0).all(), "a row past offs[-1] is written"
        sizes = [e - s for s, e in zip([0] + list(offs[:-1]), offs)]
        assert tiles == a["tiles_n"] * sum(-(-s // cfg.block_m) for s in sizes)
    else:
        assert (cov == 1).all(), "an output element is not written exactly once"
        assert tiles == a["G"] * a["tiles_m"] * a["tiles_n"]


def _zeros(*shape, transposed=False, dtype=torch.bfloat16):
    """A tensor of ``shape``; ``transposed``: the transpose of a row-major one (last 2 dims)."""
    if not transposed:
        return torch.zeros(shape, dtype=dtype)
    return torch.zeros(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-2, -1)


def _plan(layout, cfg, sizes, extra, n, k, ta, tb, bias):
    """The launch the backend would run for one problem, and the offs it scans."""
    ends = torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32) if sizes else \
        torch.zeros(0, dtype=torch.int32)
    total = int(ends[-1]) if len(sizes) else 0
    G = len(sizes)
    if layout == "gemm":
        a, b = _zeros(total + extra, k, transposed=ta), _zeros(k, n, transposed=tb)
        return launch.plan_gemm(a, b, _zeros(n) if bias else None, None, cfg), None
    if layout == "2Dx3D":
        a, b = _zeros(total + extra, k, transposed=ta), _zeros(G, k, n, transposed=tb)
        bb = _zeros(G, n) if bias else None
    elif layout == "3Dx2D":  # ragged columns of b
        a, b = _zeros(G, n, k, transposed=ta), _zeros(k, total + extra, transposed=tb)
        bb = _zeros(total + extra) if bias else None
    elif layout == "2Dx2D":  # ragged K
        a, b = _zeros(n + 1, total + extra, transposed=ta), _zeros(total + extra, n, transposed=tb)
        bb = _zeros(G, n) if bias else None
    else:
        m = cfg.block_m + extra  # a partial M tile; groups are not ragged here
        a, b, ends = _zeros(G, m, k, transposed=ta), _zeros(G, k, n, transposed=tb), None
        bb = _zeros(G, n) if bias else None
    plan = launch.plan_grouped(a, b, ends, bb, None, cfg)
    return plan, (ends.tolist() if ends is not None else None)


LAYOUTS = ("gemm", "2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D")
EXPECTED = {"gemm": "gemm", "2Dx3D": "2Dx3D", "3Dx2D": "2Dx3D", "2Dx2D": "2Dx2D",
            "3Dx3D": "3Dx3D"}


def _hard_sizes(cfg):
    bm = cfg.block_m
    return [0, 1, bm - 1, 0, bm, bm + 1, 2 * bm + 3, 0]  # empty, one row, partial, exact


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_shipped_config_covers_its_output_once(layout):
    """Hard problem per config: empty and partial groups, rows past offs[-1], N % BN != 0."""
    for cfg in CONFIGS:
        plan, offs = _plan(layout, cfg, _hard_sizes(cfg), 5, cfg.block_n + 3, 40,
                           False, True, True)
        assert plan.template == EXPECTED[layout]
        _prove(plan, cfg, offs)


@hst.composite
def problems(draw):
    cfg = draw(hst.sampled_from(CONFIGS))
    bm = cfg.block_m
    size = hst.one_of(hst.sampled_from([0, 1, bm - 1, bm, bm + 1]), hst.integers(0, 3 * bm))
    sizes = draw(hst.lists(size, min_size=0, max_size=9))
    return (cfg, sizes, draw(hst.integers(0, bm + 1)), draw(hst.integers(0, 300)),
            draw(hst.integers(1, 72)), draw(hst.booleans()), draw(hst.booleans()),
            draw(hst.booleans()))


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
@example(problem=(configs.default("gfx950", "grouped_mm"), [1, 1, 1], 0, 64, 8, False, False,
                  False))  # three one-row groups: three row tiles in a one-tile M
@example(problem=(configs.default("gfx950", "grouped_mm"), [0, 0], 0, 0, 8, False, False,
                  False))  # N = 0 and M = 0: nothing to write, no division by zero
def test_random_problems_cover_their_output_once(layout, problem):
    cfg, sizes, extra, n, k, ta, tb, bias = problem
    if layout == "2Dx2D" and not sizes:
        sizes = [0]  # 2Dx2D needs one group (xvendor.ops rejects none)
    plan, offs = _plan(layout, cfg, sizes, extra, n, k, ta, tb, bias)
    _prove(plan, cfg, offs)
