"""``launch.specialization`` is exactly the (template, spec) the plans launch, and the plans
never copy for sizes off the tile (l0: no compiler).

The dispatch layer keys one correctness verdict per compiled specialization on
``specialization``, so it must name the kernel the plan builds for every call: checked here
against ``plan_gemm`` / ``plan_grouped`` on CPU tensors over the four grouped layouts and
gemm, row-major, transposed, misaligned (a storage offset of one element), padded rows whose
stride is or is not a multiple of 8, 3-D operands whose group stride is not, with and
without bias, every out_dtype, bf16 and fp16, and two block_k. And it must stay cheap: the
only torch ops it may run are views (no allocation, no copy, no read of the data).

No host padding: for M, N and K off every shipped tile, in each layout, the operands the
plan passes are the caller's tensors (same storage), K is the problem's, C has exactly the
output's columns, and the only tensors the plan creates or writes are C and placeholders
of at most 8 elements (recorded at the dispatcher: no copy can hide). The kernels' masks
that make this correct are proven in tests/rocm/test_layout_proofs.py (not run: no GPU).
"""

import itertools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xvendor.rocm import configs, launch

pytestmark = pytest.mark.l0

CFGS = [configs.default("gfx950", "gemm"), configs.Config(64, 64, 128)]
OUT = [None, torch.float32, torch.bfloat16, torch.float16]
VARIANTS = ("row", "col", "offset", "ld_odd", "ld_pad8", "group_odd")


def _t(shape, variant, dtype):
    """A (…, rows, cols) tensor laid out as ``variant`` says."""
    *lead, r, c = shape
    n = 1
    for s in shape:
        n *= s
    if variant == "col":
        return torch.zeros(*lead, c, r, dtype=dtype).transpose(-2, -1)
    if variant == "offset":  # data_ptr % 16 == 2: no 16-byte loads without a copy
        return torch.zeros(n + 1, dtype=dtype)[1:].view(shape)
    if variant in ("ld_odd", "ld_pad8"):  # rows padded to c + 3 or to the next multiple of 8
        ld = c + 3 if variant == "ld_odd" else (c // 8 + 1) * 8
        return torch.zeros(*lead, r, ld, dtype=dtype)[..., :c]
    if variant == "group_odd" and lead:  # rows aligned, groups 3 elements apart from that
        g = lead[0]
        return torch.zeros(g * (r * c + 3), dtype=dtype).as_strided(shape, (r * c + 3, c, 1))
    return torch.zeros(shape, dtype=dtype)


def _gemm_cases():
    M, K, N = 32, 40, 24
    for va, vb, bias, out, dt in itertools.product(VARIANTS[:5], VARIANTS[:5], (False, True),
                                                   OUT, (torch.bfloat16, torch.float16)):
        a, b = _t((M, K), va, dt), _t((K, N), vb, dt)
        yield "gemm", (a, b, torch.zeros(N, dtype=dt) if bias else None, out)


def _grouped_cases():
    G, M, K, N = 3, 32, 40, 24
    offs = torch.tensor([5, 5, 17], dtype=torch.int32)
    for layout, va, vb, bias, out, dt in itertools.product(
            ("2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D"), VARIANTS, VARIANTS, (False, True),
            OUT[:2], (torch.bfloat16, torch.float16)):
        if layout == "2Dx3D":
            a, b, o, bb = _t((M, K), va, dt), _t((G, K, N), vb, dt), offs, (G, N)
        elif layout == "3Dx2D":
            a, b, o, bb = _t((G, M, K), va, dt), _t((K, N), vb, dt), offs, (N,)
        elif layout == "2Dx2D":
            a, b, o, bb = _t((M, K), va, dt), _t((K, N), vb, dt), offs, (G, N)
        else:
            a, b, o, bb = _t((G, M, K), va, dt), _t((G, K, N), vb, dt), None, (G, N)
        yield "grouped_mm", (a, b, o, torch.zeros(bb, dtype=dt) if bias else None, out)


CASES = list(_gemm_cases()) + list(_grouped_cases())


def _plan(op, args, cfg):
    return launch.plan_gemm(*args, cfg) if op == "gemm" else launch.plan_grouped(*args, cfg)


@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: c.name)
def test_specialization_is_what_the_plan_launches(cfg):
    seen = {}
    for op, args in CASES:
        plan = _plan(op, args, cfg)
        assert launch.specialization(op, args, cfg) == (plan.template, plan.spec), (op, args)
        # the C store width is keyed on the N the kernel gets (C's row length); 3Dx2D's
        # column-major C (the caller's output, transposed) stores element by element
        a = plan.named()
        col = plan.spec["c_col_major"]
        assert col == (op == "grouped_mm" and args[0].dim() == 3 and args[1].dim() == 2)
        assert plan.spec["n_align"] == (1 if col else launch.n_align(a["N"]))
        assert (a["C"].stride(-2), a["C"].stride(-1)) == ((1, a["ldc"]) if col else (a["N"], 1))
        for k in ("a_k_major", "b_k_major", "has_bias"):
            seen.setdefault((plan.template, k), set()).add(plan.spec[k])
    # the cases reach both majors where the template allows both
    for t in ("gemm", "3Dx3D"):
        assert seen[(t, "a_k_major")] == seen[(t, "b_k_major")] == {True, False}
    assert seen[("2Dx3D", "a_k_major")] == {True} and seen[("2Dx3D", "b_k_major")] == {True, False}
    assert seen[("2Dx2D", "a_k_major")] == seen[("2Dx2D", "b_k_major")] == {False}
    assert seen[("2Dx3D", "has_bias")] == {True, False}


def test_specialization_of_known_layouts():
    bf = torch.bfloat16
    x, w = torch.zeros(32, 64, dtype=bf), torch.zeros(48, 64, dtype=bf)
    cfg = CFGS[0]
    assert launch.specialization("gemm", (x, w.t(), None, None), cfg) == (
        "gemm", {"dtype": "bf16", "out_dtype": "bf16", "has_bias": False,
                 "a_k_major": True, "b_k_major": True, "n_align": 8,
                 "c_col_major": False})  # NT: nn.Linear, no copy
    assert launch.specialization("gemm", (x, w.t().contiguous(), None, torch.float32),
                                 cfg)[1]["b_k_major"] is False  # NN
    a3, b2 = torch.zeros(4, 16, 64, dtype=bf), torch.zeros(64, 40, dtype=bf)
    offs = torch.tensor([8, 8, 30, 40], dtype=torch.int32)
    template, spec = launch.specialization("grouped_mm", (a3, b2, offs, torch.zeros(40, dtype=bf),
                                                          None), cfg)
    assert template == "2Dx3D" and spec["has_bias"] is False  # 3Dx2D's bias is added on the host
    assert launch.specialization("grouped_mm", (a3, b2, offs), cfg) == (template, spec)


@pytest.mark.parametrize("n, align", [(0, 8), (1, 1), (2, 2), (6, 2), (12, 4), (24, 8),
                                      (383, 1), (386, 2), (388, 4), (200, 8)])
def test_n_align_is_the_widest_vector_dividing_n(n, align):
    """C stores are ``n_align`` elements wide at most (``gemm_gfx950.store_width``): a
    divisor of N, so no vector straddles C's last column or starts misaligned."""
    assert launch.n_align(n) == align and n % align == 0
    x, w = torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(n, 16, dtype=torch.bfloat16)
    assert launch.specialization("gemm", (x, w.t(), None, None), CFGS[0])[1]["n_align"] == align


def test_group_stride_not_a_multiple_of_8_is_copied():
    a = _t((3, 20, 40), "group_odd", torch.bfloat16)
    assert a.stride(-2) % 8 == 0 and a.stride(0) % 8 != 0
    b = torch.zeros(3, 40, 24, dtype=torch.bfloat16)
    plan = launch.plan_grouped(a, b, None, None, None, CFGS[0])
    assert plan.spec["a_k_major"] and plan.named()["sag"] % 8 == 0  # a K-major copy


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_specialization_allocates_and_copies_nothing():
    for op, args in CASES[::7]:
        with _Ops() as seen:
            launch.specialization(op, args, CFGS[0])
        assert all(f.is_view for f in seen.ops), [str(f) for f in seen.ops if not f.is_view]


def _no_tail_copy_cases():
    """(name, op, args, the caller's operands): sizes off every shipped tile (M, N, K not
    multiples of 16, 64 or 128), operands in a layout the kernels take as they are."""
    bf = torch.bfloat16
    M, K, N, G = 77, 72, 200, 3
    x, w = torch.zeros(M, K, dtype=bf), torch.zeros(N + 1, K, dtype=bf)[:N]
    yield "gemm NT", "gemm", (x, w.t(), None, None), (x, w)
    b = torch.zeros(K, N, dtype=bf)
    yield "gemm NN", "gemm", (x, b, None, None), (x, b)
    xk = torch.zeros(M, 40, dtype=bf)[:, :37]  # K = 37 inside 40-element rows
    wk = torch.zeros(N + 3, 40, dtype=bf)[:N + 3, :37]
    yield "gemm K=37", "gemm", (xk, wk.t(), None, torch.float32), (xk, wk)
    offs = torch.tensor([5, 5, 60, M - 3], dtype=torch.int32)
    b3 = torch.zeros(4, K, N, dtype=bf)
    yield "2Dx3D", "grouped_mm", (x, b3, offs, None, None), (x, b3)
    a3, b3g = torch.zeros(G, M, K, dtype=bf), torch.zeros(G, K, N, dtype=bf)
    yield "3Dx3D", "grouped_mm", (a3, b3g, None, None, None), (a3, b3g)
    xt, dy = torch.zeros(M, K, dtype=bf), torch.zeros(M, N, dtype=bf)  # (tokens, features)
    yield "2Dx2D", "grouped_mm", (xt.t(), dy, offs, None, None), (xt, dy)
    a3x, bx = torch.zeros(4, N, K, dtype=bf), torch.zeros(M, K, dtype=bf)
    yield "3Dx2D", "grouped_mm", (a3x, bx.t(), offs, None, None), (a3x, bx)


class _Allocations(TorchDispatchMode):
    """The storage of every tensor a non-view op returns or writes into."""

    def __init__(self):
        super().__init__()
        self.touched = []  # (op name, shape, storage pointer)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            outs = out if isinstance(out, (tuple, list)) else [out]
            self.touched += [(str(func), tuple(o.shape), o.untyped_storage().data_ptr())
                             for o in outs if isinstance(o, torch.Tensor)]
        return out


@pytest.mark.parametrize("cfg", [configs.default("gfx950", "gemm"), configs.Config(64, 64, 128),
                                 configs.default("gfx1250", "grouped_mm")], ids=lambda c: c.name)
@pytest.mark.parametrize("case", list(_no_tail_copy_cases()), ids=lambda c: c[0])
def test_sizes_off_the_tile_are_not_copied(case, cfg):
    """No host-side padding: the kernel gets the caller's operands (views of the same
    storage, their own K) and C at exactly the output's size; the plan creates or writes
    nothing else but placeholders of at most 8 elements (no copy, no padded buffer)."""
    name, op, args, callers = case
    with _Allocations() as seen:
        plan = _plan(op, args, cfg)
    a = plan.named()
    ptr = {n: a[n].untyped_storage().data_ptr() for n in ("A", "B", "C")}
    assert {t.untyped_storage().data_ptr() for t in callers} == {ptr["A"], ptr["B"]}
    if plan.spec["c_col_major"]:  # 3Dx2D: C is the output transposed, whose rows are ldc
        assert a["C"].shape == (a["M"], a["N"]) and a["ldc"] == a["M"], "C is padded"
    else:
        assert a["C"].shape[-1] == a["N"] == a["ldc"], "C's rows are padded"
    assert a["C"].numel() == plan.result().numel()
    k = args[0].shape[-1]  # the problem's K (3Dx2D: the rows of the transposed problem)
    assert a["K"] == (args[1].shape[0] if name == "3Dx2D" else k)
    for op_name, shape, storage in seen.touched:
        numel = 1
        for d in shape:
            numel *= d
        assert storage == ptr["C"] or numel <= 8, f"{op_name} made {shape} besides C"


@pytest.mark.parametrize("bias", [False, True])
def test_3dx2d_writes_the_callers_output_without_a_copy(bias):
    """3Dx2D runs as the transposed 2Dx3D; the kernel's C is a column-major view of the
    output the op returns, so the plan allocates only that (M, N) output and ``result()``
    returns it as it is: no transposed copy (a bias, not per group, is added on the host)."""
    bf = torch.bfloat16
    G, M, K, T = 3, 37, 40, 50
    a, b = torch.zeros(G, M, K, dtype=bf), torch.zeros(K, T, dtype=bf)
    offs = torch.tensor([10, 10, 45], dtype=torch.int32)
    bb = torch.zeros(T, dtype=bf) if bias else None
    with _Allocations() as seen:
        plan = launch.plan_grouped(a, b, offs, bb, None, CFGS[0])
    C = plan.named()["C"]
    big = [t for t in seen.touched if t[2] == C.untyped_storage().data_ptr()]
    assert [shape for _, shape, _ in big] == [(T, M)[::-1]]  # one allocation: the output
    assert plan.spec["c_col_major"] and C.shape == (T, M) and C.stride() == (1, T)
    with _Allocations() as seen:
        out = plan.result()
    assert out.shape == (M, T) and out.is_contiguous()
    if bias:  # the host bias add makes the returned tensor
        assert out.untyped_storage().data_ptr() != C.untyped_storage().data_ptr()
    else:
        assert seen.touched == [] and out.untyped_storage().data_ptr() == \
            C.untyped_storage().data_ptr()
