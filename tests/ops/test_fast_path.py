"""NOTE [eager fast path]: the direct call and the dispatcher op must be the same op."""

import functools

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
    b = torch.randn(3, 2, generator=gen)
    # a kernel of ours: the op's own autograd (NOTE [eager training path]), not aten's
    out = xvendor.gemm(a, b, backend="reference")
    assert "xvendor_gemm" in out.grad_fn.name()
    out.sum().backward()
    assert a.grad is not None
    # the floor: torch's own autograd (NOTE [eager training on the floor])
    assert xvendor.gemm(a, b).grad_fn.name() == "MmBackward0"


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


def _grads_through_the_op(fn, args):
    """``_grads`` with the fast path off: the call goes through torch.ops.xvendor.<op>."""
    set_fast_path(False)
    try:
        return _grads(fn, args)
    finally:
        set_fast_path(True)


@pytest.mark.parametrize("op", sorted(CASES))
def test_eager_training_path_is_the_custom_ops_autograd_bit_for_bit(gen, op):
    # NOTE [eager training path]: for a kernel of ours (here the reference), the same
    # forward, saved tensors and backward as the custom op's registered autograd, without
    # torch.library's wrapper
    fn, args = CASES[op](gen)
    ours = functools.partial(fn, backend="reference")
    out, grads, first = _grads(ours, args)
    assert first.grad_fn.name() == f"xvendor_{op}Backward"
    ref_out, ref_grads, ref_first = _grads_through_the_op(ours, args)
    assert ref_first.grad_fn.name() == f"GeneratedBackwardFor_xvendor_{op}_defaultBackward"
    assert torch.equal(out, ref_out)
    assert len(grads) == len(ref_grads) and all(torch.equal(a, b) for a, b in zip(grads, ref_grads))


TORCH_OPS = {
    "gemm": torch.mm,
    "grouped_mm": lambda a, b, offs: torch.nn.functional.grouped_mm(a, b, offs=offs),
    "rms_norm": lambda x, w: torch.nn.functional.rms_norm(x, w.shape, w),
    "topk": torch.topk,
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_eager_training_on_the_floor_is_torchs_own_autograd(gen, op):
    # NOTE [eager training on the floor]: where the decision is torch's kernel, a training
    # call is torch's op under torch's autograd: the same values and gradients as calling
    # torch, bit for bit, and the custom op's within the op's tolerance
    fn, args = CASES[op](gen)
    if op == "grouped_mm":  # rows 16-byte aligned, as torch's own op needs them
        args = (torch.randn(9, 8, generator=gen), torch.randn(2, 8, 8, generator=gen), args[2])
    assert xvendor.registry.decide(op, torch.device("cpu"), torch.float32).backend == "torch"
    out, grads, first = _grads(fn, args)
    assert "xvendor" not in first.grad_fn.name()
    t_out, t_grads, _ = _grads(TORCH_OPS[op], args)
    assert torch.equal(out, t_out)
    assert len(grads) == len(t_grads) and all(torch.equal(a, b) for a, b in zip(grads, t_grads))
    _, op_grads, op_first = _grads_through_the_op(fn, args)
    assert len(grads) == len(op_grads)
    assert op_first.grad_fn.name() == f"GeneratedBackwardFor_xvendor_{op}_defaultBackward"
    for a, b in zip(grads, op_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_floor_training_leaves_a_misaligned_gradient_to_xvendors_autograd(gen):
    # N = 5 fp32: the output gradient's rows are 20 bytes apart, which torch's grouped_mm
    # backward refuses; the call keeps xvendor's autograd (any strides) and trains
    fn, args = CASES["grouped_mm"](gen)
    out, grads, first = _grads(fn, args)
    assert first.grad_fn.name() == "xvendor_grouped_mmBackward"
    assert all(torch.isfinite(g).all() for g in grads) and len(grads) == 2


def _poisoned_leaf(t):
    leaf = t.detach().clone().requires_grad_()
    leaf.grad = None
    return leaf


_FLOOR_SHAPES = {  # (a, b, bias): N a multiple of 16 bytes, K and M ragged
    "2Dx3D": ((33, 24), (4, 24, 16), (4, 16)),
    "3Dx2D": ((4, 16, 24), (24, 40), (40,)),
    "2Dx2D": ((16, 33), (33, 24), (4, 24)),
}


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", sorted(_FLOOR_SHAPES))
def test_floor_training_gives_zero_gradients_where_no_group_reaches(gen, layout, dtype, bias):
    # torch's grouped_mm backward leaves the input gradient of entries no group owns
    # unwritten; xvendor's output is zero there, so their gradient must be exactly zero
    # (ragged sizes, an empty group, 6 entries past offs[-1]); bias gradients as the oracle's
    offs = torch.tensor([5, 5, 19, 27], dtype=torch.int32)
    sa, sb, sc = _FLOOR_SHAPES[layout]
    leaves = [_poisoned_leaf(torch.randn(s, generator=gen).to(dtype))
              for s in ((sa, sb, sc) if bias else (sa, sb))]
    out = xvendor.grouped_mm(leaves[0], leaves[1], offs, *leaves[2:])
    assert "xvendor" not in out.grad_fn.name()  # the floor, under torch's autograd
    g = torch.randn(out.shape, generator=gen).to(dtype)
    out.backward(g)
    refs = [t.detach().double().requires_grad_() for t in leaves]
    from xvendor import numerics
    numerics.grouped_mm(refs[0], refs[1], offs, *refs[2:]).backward(g.double())
    tol = 1e-5 if dtype is torch.float32 else 3e-2
    for got, want in zip(leaves, refs):
        assert got.grad.dtype == got.dtype and torch.isfinite(got.grad).all()
        torch.testing.assert_close(got.grad.double(), want.grad, rtol=tol, atol=tol * 10)
    a, b = leaves[:2]
    if layout == "2Dx3D":
        assert (a.grad[27:] == 0).all()
    elif layout == "3Dx2D":
        assert (b.grad[:, 27:] == 0).all()
    else:
        assert (a.grad[:, 27:] == 0).all() and (b.grad[27:] == 0).all()

