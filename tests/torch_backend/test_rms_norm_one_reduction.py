"""The torch backend's rms_norm on the CPU: in eager inference from
``rules.RMS_NORM_ONE_REDUCTION["cpu"]`` elements, torch's arithmetic with one fused
reduction (NOTE [rms_norm in one reduction]); below it, under autograd and when traced,
torch's own op. Numerics against the fp64 oracle and against torch's op, on fresh random
inputs with poisoned-free fresh outputs (the kernel allocates its own), every float dtype,
weights over one and two dims, no weight, non-contiguous x, eps None."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xvendor import numerics
from xvendor.torch_backend import kernels, rules

pytestmark = pytest.mark.l0

THRESHOLD = rules.RMS_NORM_ONE_REDUCTION["cpu"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


class Ops(TorchDispatchMode):
    """The aten ops a call runs (observed, not replaced)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def _case(gen, dtype, shape, wshape, scale=3.0):
    x = (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)
    w = None if wshape is None else torch.randn(*wshape, generator=gen,
                                                 dtype=torch.float64).to(dtype)
    return x, w


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,wshape", [((67, 1031), (1031,)),       # odd widths
                                          ((3, 40, 24, 23), (24, 23)),  # weight over 2 dims
                                          ((129, 515), None),
                                          ((0, 64), (64,))])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_matches_the_oracle_and_torchs_op(gen, dtype, shape, wshape, eps):
    x, w = _case(gen, dtype, shape, wshape)
    out = kernels._rms_norm_one_reduction(x, w, eps)
    nd = len(wshape) if wshape else 1
    torchs = torch.rms_norm(x, x.shape[-nd:], w, eps)
    assert out.dtype == dtype and out.shape == x.shape
    ref = numerics.rms_norm(x, w, eps)
    assert numerics.rel_error(out, ref) <= numerics.TOLERANCE[dtype]
    # no less accurate than torch's own op, within one rounding of the output format
    assert numerics.rel_error(out, ref) <= 2 * numerics.rel_error(torchs, ref) + \
        torch.finfo(dtype).eps
    if dtype in (torch.bfloat16, torch.float16) and x.numel():
        # the same fp32 arithmetic as torch's, one rounding: equal but for rare ties
        assert (out != torchs).double().mean().item() < 0.01


def test_non_contiguous_x_and_extreme_values(gen):
    x, w = _case(gen, torch.float32, (300, 512), (512,))
    xt = x.t().contiguous().t()  # same values, column-major
    x[3, :] = 1e30  # sum of squares overflows: torch's op gives x * 0 -> nan/0 as well
    x[4, :] = 0.0   # all-zero row: rsqrt(eps)
    xt[3, :], xt[4, :] = x[3, :], x[4, :]
    torchs = torch.rms_norm(x, (512,), w, 1e-6)
    for inp in (x, xt):
        out = kernels._rms_norm_one_reduction(inp, w, 1e-6)
        torch.testing.assert_close(out, torchs, equal_nan=True, rtol=2e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_which_path_runs(gen, dtype):
    """Eager inference at the threshold takes the one reduction; one element fewer, a call
    that needs gradients, and a traced call take torch's op."""
    rows = THRESHOLD // 512
    big, w = _case(gen, dtype, (rows, 512), (512,))
    small = big[:-1, 1:]  # fewer elements than the threshold
    for x, one in ((big, True), (small, False)):
        with Ops() as seen:
            kernels.rms_norm(x, w if x is big else w[1:], 1e-6)
        assert ("linalg_vector_norm" in seen.names) is one, seen.names
        # torch's composite, as a dispatch mode sees it (decomposed above the mode)
        assert ({"pow", "mean"} <= seen.names) is (not one), seen.names
    leaf = big.clone().requires_grad_()
    with Ops() as seen:
        out = kernels.rms_norm(leaf, w, 1e-6)
    assert "linalg_vector_norm" not in seen.names
    out.sum().backward()
    assert leaf.grad is not None
    with torch.no_grad(), Ops() as seen:  # no_grad: inference even for a leaf
        kernels.rms_norm(leaf, w, 1e-6)
    assert "linalg_vector_norm" in seen.names

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    traced = torch.compile(lambda a, b: kernels.rms_norm(a, b, 1e-6), fullgraph=True,
                           backend=capture)(big, w)
    names = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert any("rms_norm" in n for n in names) and not any("vector_norm" in n for n in names)
    torch.testing.assert_close(traced, torch.rms_norm(big, (512,), w, 1e-6))
