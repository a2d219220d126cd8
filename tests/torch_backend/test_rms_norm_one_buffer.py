"""The torch backend's rms_norm on the CPU: in eager inference from
``rules.RMS_NORM_ONE_BUFFER["cpu"][dtype]`` elements, torch's arithmetic on one buffer
(NOTE [rms_norm in one buffer]): equal to torch's op to the bit, and to the fp64 oracle
within the dtype's tolerance; below the size, under autograd and when traced, torch's own
op. Fresh random inputs, every float dtype, weights over one and two dims, no weight,
non-contiguous x, eps None, overflowing and all-zero rows."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xvendor import numerics
from xvendor.torch_backend import kernels, rules

pytestmark = pytest.mark.l0

THRESHOLD = rules.RMS_NORM_ONE_BUFFER["cpu"]
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
def test_equals_torchs_op_to_the_bit(gen, dtype, shape, wshape, eps):
    x, w = _case(gen, dtype, shape, wshape)
    out = kernels._rms_norm_one_buffer(x, w, eps)
    nd = len(wshape) if wshape else 1
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.equal(out, torch.rms_norm(x, x.shape[-nd:], w, eps))
    assert numerics.rel_error(out, numerics.rms_norm(x, w, eps)) <= numerics.TOLERANCE[dtype]


def test_non_contiguous_x_and_extreme_rows(gen):
    x, w = _case(gen, torch.float32, (300, 512), (512,))
    x[3, :] = 1e30  # the sum of squares overflows to inf: rsqrt gives 0, the row 0 (as torch)
    x[4, :] = 0.0   # an all-zero row: rsqrt(eps) * 0
    xt = x.t().contiguous().t()  # the same values, column-major
    for inp in (x, xt):  # (the sum's order follows the layout: each against torch's own)
        out = kernels._rms_norm_one_buffer(inp, w, 1e-6)
        torch.testing.assert_close(out, torch.rms_norm(inp, (512,), w, 1e-6), equal_nan=True,
                                   rtol=0, atol=0)
        assert (out[3] == 0).all() and (out[4] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_which_path_runs(gen, dtype):
    """Eager inference at the threshold takes one buffer; fewer elements, a call that needs
    gradients, and a traced call take torch's op."""
    rows = THRESHOLD[dtype] // 512
    big, w = _case(gen, dtype, (rows, 512), (512,))
    small = big[:-1, 1:]  # fewer elements than the threshold
    for x, one in ((big, True), (small, False)):
        with Ops() as seen:
            out = kernels.rms_norm(x, w if x is big else w[1:], 1e-6)
        # torch's composite, as a dispatch mode sees it (decomposed above the mode), writes
        # the mean square with mean; the one-buffer form with sum and div_ (what mean does)
        assert ("mean" in seen.names) is (not one), seen.names
        assert torch.equal(out, torch.rms_norm(x, x.shape[-1:], w if x is big else w[1:],
                                               1e-6))
    leaf = big.clone().requires_grad_()
    with Ops() as seen:
        out = kernels.rms_norm(leaf, w, 1e-6)
    assert "mean" in seen.names
    out.sum().backward()
    assert leaf.grad is not None
    with torch.no_grad(), Ops() as seen:  # no_grad: inference even for a leaf
        kernels.rms_norm(leaf, w, 1e-6)
    assert "mean" not in seen.names

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    traced = torch.compile(lambda a, b: kernels.rms_norm(a, b, 1e-6), fullgraph=True,
                           backend=capture)(big, w)
    names = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert any("rms_norm" in n for n in names) and not any("square" in n for n in names)
    torch.testing.assert_close(traced, torch.rms_norm(big, (512,), w, 1e-6))
