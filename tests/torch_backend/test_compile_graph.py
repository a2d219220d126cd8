"""Under torch.compile, a call whose decision is the ``torch`` backend traces into torch's
own op: the Dynamo graph holds ``torch._grouped_mm`` / ``rms_norm`` / ``topk`` /
``_scaled_mm`` and no ``xvendor::`` op, so Inductor sees what it would see had the user
called torch; the compiled result equals eager. A call torch's rules refuse (fp64
grouped_mm) keeps the xvendor op."""

import sys

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import ScalingType

import xvendor
from xvendor import numerics

pytestmark = pytest.mark.l0


def _graph(fn, *args):
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, fullgraph=True, backend=capture)(*args)
    assert len(graphs) == 1
    return out, graphs[0]


def _targets(gm) -> set[str]:
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def _offs():
    return numerics.random_offs([5, 0, 17, 9], "cpu")


CASES = {
    "gemm +bias": (lambda a, b, c: xvendor.gemm(a, b, c),
                   (torch.randn(9, 7), torch.randn(7, 5), torch.randn(5)), "addmm"),
    "grouped_mm 2Dx3D +bias": (lambda a, b, o, c: xvendor.grouped_mm(a, b, o, c),
                               (torch.randn(33, 40), torch.randn(4, 40, 24), _offs(),
                                torch.randn(4, 24)), "_grouped_mm"),
    "grouped_mm 2Dx2D": (lambda a, b, o: xvendor.grouped_mm(a, b, o),
                         (torch.randn(12, 33), torch.randn(33, 20), _offs()), "_grouped_mm"),
    "rms_norm": (lambda x, w: xvendor.rms_norm(x, w, 1e-6),
                 (torch.randn(6, 64), torch.randn(64)), "rms_norm"),
    "topk": (lambda x: xvendor.topk(x, 3)[0], (torch.randn(6, 64),), "topk"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_torch_decision_traces_into_torchs_op(case):
    fn, args, target = CASES[case]
    out, gm = _graph(fn, *args)
    names = _targets(gm)
    assert any(target in n for n in names), names
    assert not any("xvendor" in n for n in names), names
    torch.testing.assert_close(out, fn(*args))


def test_scaled_mm_traces_into_torchs_op():
    a = torch.randn(16, 64).to(torch.float8_e4m3fn)
    b = torch.randn(24, 64).to(torch.float8_e4m3fn).t()
    sa, sb = torch.rand(16, 1), torch.rand(1, 24)

    def fn(a, b, sa, sb):
        return xvendor.scaled_mm(a, b, sa, ScalingType.RowWise, sb, ScalingType.RowWise)

    out, gm = _graph(fn, a, b, sa, sb)
    assert not any("xvendor" in n for n in _targets(gm)), _targets(gm)
    torch.testing.assert_close(out, F.scaled_mm(a, b, sa, ScalingType.RowWise, sb,
                                                ScalingType.RowWise, output_dtype=torch.bfloat16))


def test_a_call_torch_refuses_keeps_the_xvendor_op():
    a, b = torch.randn(33, 40, dtype=torch.float64), torch.randn(4, 40, 24, dtype=torch.float64)
    out, gm = _graph(lambda a, b, o: xvendor.grouped_mm(a, b, o), a, b, _offs())
    assert any("xvendor.grouped_mm" in n for n in _targets(gm)), _targets(gm)
    torch.testing.assert_close(out, xvendor.grouped_mm(a, b, _offs()))


def test_an_explicit_request_keeps_the_xvendor_op():
    a, b = torch.randn(9, 7), torch.randn(7, 5)
    out, gm = _graph(lambda a, b: xvendor.gemm(a, b, backend="reference"), a, b)
    assert any("xvendor.gemm" in n for n in _targets(gm)), _targets(gm)


def test_training_step_through_torchs_op_matches_eager():
    x = torch.randn(36, 40, requires_grad=True)
    w = torch.randn(4, 40, 24, requires_grad=True)
    offs = _offs()  # 31 of 36 rows owned

    def step(x, w):
        return xvendor.grouped_mm(x, w, offs).square().sum()

    _, gm = _graph(step, x, w)
    assert any("_grouped_mm" in n for n in _targets(gm)), _targets(gm)
    torch._dynamo.reset()
    loss = torch.compile(step, fullgraph=True, backend="aot_eager")(x, w)
    gx, gw = torch.autograd.grad(loss, (x, w))
    ex, ew = torch.autograd.grad(step(x, w), (x, w))
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gw, ew)


@pytest.mark.parametrize("layout", ["2Dx3D", "3Dx2D", "2Dx2D"])
def test_compiled_gradients_are_zero_where_no_group_owns_the_input(layout):
    offs = _offs()  # 31 of 33 rows / columns / K owned
    a, b = {"2Dx3D": (torch.randn(33, 40), torch.randn(4, 40, 24)),
            "3Dx2D": (torch.randn(4, 12, 40), torch.randn(40, 33)),
            "2Dx2D": (torch.randn(12, 33), torch.randn(33, 20))}[layout]
    a.requires_grad_(), b.requires_grad_()

    def step(a, b):
        return xvendor.grouped_mm(a, b, offs).square().sum()

    torch._dynamo.reset()
    # (odd sizes: torch's own backward cannot take them, so the xvendor op stays here)
    got = torch.autograd.grad(torch.compile(step, fullgraph=True, backend="aot_eager")(a, b),
                              (a, b))
    want = torch.autograd.grad(step(a, b), (a, b))  # eager: xvendor's own autograd
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


# NOTE [offs in a traced graph]: the compiled floor keeps eager's data rules on offs as a
# device assert in the graph; each bad offs breaks one rule (order, sign, last end).
_BAD_OFFS = {"decreasing": [5, 3, 20, 30], "negative": [-1, 3, 20, 30],
             "past the end": [5, 5, 20, 34]}
_LAYOUTS = {"2Dx3D": (torch.randn(33, 40), torch.randn(4, 40, 24)),
            "3Dx2D": (torch.randn(4, 12, 40), torch.randn(40, 33)),
            "2Dx2D": (torch.randn(12, 33), torch.randn(33, 20))}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("bad", sorted(_BAD_OFFS))
def test_compiled_floor_refuses_bad_offs_at_run_time(layout, bad):
    a, b = _LAYOUTS[layout]

    def fn(a, b, o):
        return xvendor.grouped_mm(a, b, o)

    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True,
                             backend=lambda gm, _: graphs.append(gm) or gm.forward)
    out = compiled(a, b, _offs())  # traced with good offs: 31 of 33 used
    names = _targets(graphs[0])
    assert any("_assert_async" in n for n in names), names
    assert any("_grouped_mm" in n for n in names) and not any("xvendor" in n for n in names)
    torch.testing.assert_close(out, fn(a, b, _offs()))
    with pytest.raises(xvendor.ArgumentError, match="offs"):  # eager, for comparison
        fn(a, b, torch.tensor(_BAD_OFFS[bad], dtype=torch.int32))
    with pytest.raises(RuntimeError, match="offs must be non-negative, non-decreasing"):
        compiled(a, b, torch.tensor(_BAD_OFFS[bad], dtype=torch.int32))
    assert len(graphs) == 1  # the same graph ran (no retrace on the values of offs)


def test_inductor_keeps_the_offs_assert():
    a, b = _LAYOUTS["2Dx3D"]
    torch._dynamo.reset()
    fn = torch.compile(lambda a, b, o: xvendor.grouped_mm(a, b, o), fullgraph=True)
    torch.testing.assert_close(fn(a, b, _offs()), xvendor.grouped_mm(a, b, _offs()))
    with pytest.raises(RuntimeError, match="offs must be"):
        fn(a, b, torch.tensor(_BAD_OFFS["decreasing"], dtype=torch.int32))


def test_traced_scaled_grouped_mm_offs_rules_are_one_device_assert():
    # torch has no scaled_grouped_mm on the CPU, so its compiled floor cannot be traced
    # here: the traced check is called as the public function calls it
    from torch.utils._python_dispatch import TorchDispatchMode

    sgm = sys.modules["xvendor.ops.scaled_grouped_mm"]
    a, b = torch.empty(10, 96), torch.empty(24, 96)  # 2Dx2D: ragged K of 96

    class NoHostRead(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            assert func is not torch.ops.aten._local_scalar_dense.default, func
            return func(*args, **(kwargs or {}))

    with NoHostRead():
        sgm.check_offs_values(a, b.t(), torch.tensor([32, 64, 96], dtype=torch.int32),
                              traced=True)
    with pytest.raises(RuntimeError, match="group starts multiples of 32"):
        sgm.check_offs_values(a, b.t(), torch.tensor([32, 48, 96], dtype=torch.int32),
                              traced=True)
