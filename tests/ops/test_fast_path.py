"""NOTE [eager fast path]: the direct call and the dispatcher op must be the same op."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import xvendor
from xvendor.ops import set_fast_path

pytestmark = pytest.mark.l0


class SeenOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


CASES = {
    "gemm": lambda g: (xvendor.gemm, (torch.randn(9, 7, generator=g), torch.randn(7, 5, generator=g))),
    "grouped_mm": lambda g: (xvendor.grouped_mm, (torch.randn(9, 7, generator=g),
                                                  torch.randn(2, 7, 5, generator=g),
                                                  torch.tensor([4, 9], dtype=torch.int32))),
    "rms_norm": lambda g: (xvendor.rms_norm, (torch.randn(9, 7, generator=g), torch.randn(7, generator=g))),
    "topk": lambda g: (xvendor.topk, (torch.randn(9, 7, generator=g), 3)),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_fast_and_dispatcher_paths_agree(gen, op):
    fn, args = CASES[op](gen)
    fast = fn(*args)
    set_fast_path(False)
    try:
        slow = fn(*args)
    finally:
        set_fast_path(True)
    for f, s in zip(fast if isinstance(fast, tuple) else (fast,), slow if isinstance(slow, tuple) else (slow,)):
        assert torch.equal(f, s)


@pytest.mark.parametrize("op", sorted(CASES))
def test_dispatch_modes_see_the_xvendor_op(gen, op):
    fn, args = CASES[op](gen)
    with SeenOps() as mode:
        fn(*args)
    assert f"xvendor.{op}" in mode.ops


def test_autograd_goes_through_the_op(gen):
    a = torch.randn(4, 3, generator=gen, requires_grad=True)
    out = xvendor.gemm(a, torch.randn(3, 2, generator=gen))
    # the op's own autograd (NOTE [eager training path]), not aten's
    assert "xvendor_gemm" in out.grad_fn.name()
    out.sum().backward()
    assert a.grad is not None


def test_vmap_goes_through_the_op(gen):
    a, b = torch.randn(3, 4, 5, generator=gen), torch.randn(5, 2, generator=gen)
    with pytest.warns(UserWarning, match="batching rule for xvendor::gemm"):  # torch's loop
        out = torch.vmap(lambda x: xvendor.gemm(x, b))(a)
    torch.testing.assert_close(out, a @ b)


def _grads(fn, args):
    leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) if torch.is_tensor(a) else a
              for a in args]
    out = fn(*leaves)
    first = out[0] if isinstance(out, tuple) else out
    g = torch.randn(first.shape, generator=torch.Generator().manual_seed(1))
    first.backward(g)
    return first.detach(), [a.grad for a in leaves if torch.is_tensor(a) and a.requires_grad], first


@pytest.mark.parametrize("op", sorted(CASES))
def test_eager_training_path_is_the_custom_ops_autograd_bit_for_bit(gen, op):
    # NOTE [eager training path]: the same forward, saved tensors and backward as the
    # custom op's registered autograd, without torch.library's wrapper
    fn, args = CASES[op](gen)
    out, grads, first = _grads(fn, args)
    assert first.grad_fn.name() == f"xvendor_{op}Backward"
    set_fast_path(False)
    try:
        ref_out, ref_grads, ref_first = _grads(fn, args)
    finally:
        set_fast_path(True)
    assert ref_first.grad_fn.name() == f"GeneratedBackwardFor_xvendor_{op}_defaultBackward"
    assert torch.equal(out, ref_out)
    assert len(grads) == len(ref_grads) and all(torch.equal(a, b) for a, b in zip(grads, ref_grads))


def test_eager_training_path_gives_second_derivatives(gen):
    a = torch.randn(5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x, y: xvendor.gemm(x, y, backend="reference"), (a, b))
