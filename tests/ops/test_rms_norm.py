"""xvendor.rms_norm and its backward op: numerics vs the fp64 oracle, bad input, opcheck,
autograd (and which backend the backward runs on)."""

import importlib

import pytest
import torch
from torch.library import opcheck

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l0
rms_norm_backward = importlib.import_module("xvendor.ops.rms_norm").rms_norm_backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,wshape", [((7, 96), (96,)), ((2, 3, 33), (33,)),
                                          ((4, 5, 6), (5, 6)),  # normalise over two dims
                                          ((3, 17), None), ((0, 8), (8,))])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_matches_oracle(gen, dtype, shape, wshape, eps):
    x = (torch.randn(*shape, generator=gen) * 3).to(dtype)
    w = None if wshape is None else torch.randn(*wshape, generator=gen).to(dtype)
    out = xvendor.rms_norm(x, w, eps)
    assert out.dtype == dtype and out.shape == x.shape
    assert oracle.rel_error(out, oracle.rms_norm(x, w, eps)) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("backend", ["torch", "reference"])
def test_default_eps_is_torchs(gen, dtype, backend):
    """eps=None is the epsilon of the dtype torch computes in (float32's for half types),
    as torch's own rms_norm: on an input whose mean square is near bf16's epsilon, taking
    x's dtype's epsilon instead changes the result several-fold (NOTE [rms_norm's default
    eps])."""
    x = (torch.randn(5, 64, generator=gen, dtype=torch.float64) * 1e-2).to(dtype)
    w = torch.randn(64, generator=gen, dtype=torch.float64).to(dtype)
    torchs = torch.nn.functional.rms_norm(x, (64,), w)
    out = xvendor.rms_norm(x, w, backend=backend)
    assert oracle.rel_error(out, torchs) <= 2 * oracle.TOLERANCE[dtype]
    assert oracle.rel_error(out, oracle.rms_norm(x, w)) <= oracle.TOLERANCE[dtype]
    # the backward op (the reference's: torch's floor has none) takes the same default
    eps = torch.finfo(torch.float64 if dtype is torch.float64 else torch.float32).eps
    g = torch.randn(5, 64, generator=gen, dtype=torch.float64).to(dtype)
    assert torch.equal(rms_norm_backward(g, x, w, backend="reference")[0],
                       rms_norm_backward(g, x, w, eps, backend="reference")[0])


def test_fp32_weight_with_bf16_activations(gen):
    x, w = torch.randn(6, 40, generator=gen).bfloat16(), torch.randn(40, generator=gen)
    out = xvendor.rms_norm(x, w)
    assert out.dtype == torch.bfloat16
    assert oracle.rel_error(out, oracle.rms_norm(x, w)) <= oracle.TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize("args,match", [
    ((torch.randn(4, 8), torch.randn(7)), r"weight shape must equal the last dimensions of x"),
    ((torch.randn(4, 8), torch.randn(4, 8, 1)), r"weight shape must equal"),
    ((torch.randn(4, 8), torch.randn(8).half()), r"weight dtype must be x's"),
    ((torch.randn(4, 8), torch.randn(8), -1.0), r"eps must be None or a finite number >= 0"),
    ((torch.randn(4, 8), torch.randn(8), float("nan")), r"eps must be None or a finite"),
    ((torch.randint(0, 4, (4, 8)), None), r"x must be float32"),
    ((torch.tensor(1.0), None), r"x must have at least 1 dimension"),
    ((torch.randn(4, 8), torch.randn(8, device="meta")), r"weight must be on the same device"),
])
def test_bad_input_names_argument_and_rule(args, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.rms_norm(*args)


@pytest.mark.parametrize("weight", [True, False])
def test_opcheck(weight):
    args = (torch.randn(4, 6, requires_grad=True), torch.randn(6, requires_grad=True) if weight else None, 1e-6)
    opcheck(torch.ops.xvendor.rms_norm.default, args)


@pytest.mark.parametrize("wshape", [(6,), (3, 6)])
def test_gradcheck_fp64(gen, wshape):
    x = torch.randn(2, 3, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(*wshape, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: xvendor.rms_norm(x, w, 1e-6), (x, w))


def test_bf16_grads_match_fp64_autograd(gen):
    x = torch.randn(8, 64, generator=gen).bfloat16().requires_grad_()
    w = torch.randn(64, generator=gen).requires_grad_()  # fp32 master weight
    g = torch.randn(8, 64, generator=gen)
    xvendor.rms_norm(x, w, 1e-6).float().backward(g)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.rms_norm(xr, wr, 1e-6).backward(g.double())
    assert oracle.rel_error(x.grad, xr.grad) <= 2 * oracle.TOLERANCE[torch.bfloat16]
    assert w.grad.dtype == torch.float32
    assert oracle.rel_error(w.grad, wr.grad) <= 2 * oracle.TOLERANCE[torch.bfloat16]


# -- the backward op: xvendor::rms_norm_backward(grad, x, weight, eps) -> (dx, dweight) ----

def _bwd_oracle(g, x, w, eps):
    """fp64 autograd of the fp64 forward oracle (independent of the op's own oracle)."""
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_() if w is not None else None
    out = oracle.rms_norm(xd, wd, eps)
    grads = torch.autograd.grad(out, [t for t in (xd, wd) if t is not None], g.double())
    return grads[0], (grads[1] if w is not None else None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,wshape,wdtype", [
    ((7, 96), (96,), None),
    ((3, 5, 33), None, None),  # no weight, odd width
    ((2, 4, 5, 6), (5, 6), None),  # weight over two dims
    ((6, 40), (40,), torch.float32),  # fp32 master weight
    ((0, 8), (8,), None),  # no rows
])
def test_backward_matches_fp64_autograd(gen, dtype, shape, wshape, wdtype):
    x = (torch.randn(*shape, generator=gen) * 3).to(dtype)
    g = torch.randn(*shape, generator=gen).to(dtype)
    w = None if wshape is None else torch.randn(*wshape, generator=gen).to(wdtype or dtype)
    dx, dw = rms_norm_backward(g, x, w, 1e-6)
    ref_dx, ref_dw = _bwd_oracle(g, x, w, 1e-6)
    assert dx.dtype == dtype and dx.shape == x.shape
    assert oracle.rel_error(dx, ref_dx) <= oracle.TOLERANCE[dtype]
    if w is None:
        assert dw.shape == (0,) and dw.dtype == dtype  # ops cannot return None
    else:
        assert dw.dtype == w.dtype and dw.shape == w.shape
        assert oracle.rel_error(dw, ref_dw) <= oracle.TOLERANCE[w.dtype]


@pytest.mark.parametrize("args,match", [
    ((torch.randn(4, 7), torch.randn(4, 8), torch.randn(8)), r"grad must have x's shape"),
    ((torch.randn(4, 8).half(), torch.randn(4, 8), None), r"grad must have x's shape and dtype"),
    ((torch.randn(4, 8), torch.randn(4, 8), torch.randn(7)), r"rms_norm_backward: weight shape"),
    ((torch.randn(4, 8), torch.randn(4, 8), None, -1.0), r"rms_norm_backward: eps must be"),
    ((torch.randn(4, 8, device="meta"), torch.randn(4, 8), None), r"grad must be on the same"),
    (([1.0], torch.randn(4, 8), None), r"grad must be a torch.Tensor"),
])
def test_backward_bad_input_names_argument_and_rule(args, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        rms_norm_backward(*args)


@pytest.mark.parametrize("weight", [True, False])
def test_backward_opcheck(weight):
    args = (torch.randn(4, 6), torch.randn(4, 6), torch.randn(6) if weight else None, 1e-6)
    opcheck(torch.ops.xvendor.rms_norm_backward.default, args)


def test_backward_traces_with_torch_compile(gen):
    x = torch.randn(5, 24, generator=gen, requires_grad=True)
    w = torch.randn(24, generator=gen, requires_grad=True)
    f = torch.compile(lambda x, w: xvendor.rms_norm(x, w, 1e-6).sum(), fullgraph=True,
                      backend="aot_eager")
    f(x, w).backward()
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.rms_norm(xr, wr, 1e-6).sum().backward()
    assert oracle.rel_error(x.grad, xr.grad) <= oracle.TOLERANCE[torch.float32]
    assert oracle.rel_error(w.grad, wr.grad) <= oracle.TOLERANCE[torch.float32]


def _register_counting(monkeypatch, name, ops):
    """A real CPU backend: the reference kernels of ``ops``, each call counted (it serves
    only on request, so the count proves which backend the dispatch chose)."""
    import sys
    import types

    from xvendor import reference, registry
    calls = []
    mod = types.ModuleType(f"xvendor_test_{name}_backend")
    mod.KERNELS = {op: (lambda *a, _op=op, **kw: (calls.append(_op),
                                                   getattr(reference, _op)(*a))[1])
                   for op in ops}
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    registry.register(registry.Backend(name=name, module=mod.__name__, ops=set(ops),
                                       device_types={"cpu"}))
    return calls


@pytest.fixture
def counting_backend(monkeypatch):
    return _register_counting(monkeypatch, "counting", ("rms_norm", "rms_norm_backward"))


@pytest.mark.parametrize("how", ["argument", "context"])
def test_autograd_runs_the_backward_on_the_forwards_backend(gen, counting_backend, how):
    from xvendor import registry
    x = torch.randn(3, 16, generator=gen, requires_grad=True)
    w = torch.randn(16, generator=gen, requires_grad=True)
    if how == "argument":
        y = xvendor.rms_norm(x, w, 1e-6, backend="counting")
    else:
        with registry.use_backend("counting"):
            y = xvendor.rms_norm(x, w, 1e-6)
    y.backward(torch.ones_like(y))  # outside the context: the forward's request still holds
    assert counting_backend == ["rms_norm", "rms_norm_backward"]
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.rms_norm(xr, wr, 1e-6).sum().backward()
    assert oracle.rel_error(x.grad, xr.grad) <= oracle.TOLERANCE[torch.float32]


def test_autograd_without_a_request_runs_the_default(gen, counting_backend):
    x = torch.randn(3, 16, generator=gen, requires_grad=True)
    xvendor.rms_norm(x, None, 1e-6).sum().backward()
    assert counting_backend == []  # "counting" serves on request only: aten ran both


def test_a_forward_only_backend_gets_the_reference_backward(gen, monkeypatch):
    """A backend without a backward kernel (as sycl) served the forward: the backward runs
    on aten, also when the environment asks for that backend, instead of raising."""
    from xvendor import registry
    calls = _register_counting(monkeypatch, "fwdonly", ("rms_norm",))
    monkeypatch.setenv("XVENDOR_BACKEND", "fwdonly")
    registry.reset()  # the environment is read on reset
    x = torch.randn(3, 16, generator=gen, requires_grad=True)
    w = torch.randn(16, generator=gen, requires_grad=True)
    xvendor.rms_norm(x, w, 1e-6).sum().backward()
    assert calls == ["rms_norm"]
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.rms_norm(xr, wr, 1e-6).sum().backward()
    assert oracle.rel_error(x.grad, xr.grad) <= oracle.TOLERANCE[torch.float32]
    assert oracle.rel_error(w.grad, wr.grad) <= oracle.TOLERANCE[torch.float32]
