"""xvendor.grouped_mm: all four layouts vs the fp64 oracle, bad input, opcheck, autograd, fuzz."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from torch.library import opcheck

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l0
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
I32 = torch.int32


def rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


def make(layout, sizes, m, n, k, dtype, gen, bias=False, tail=0):
    """Inputs for one layout; ``sizes`` are the group extents, ``tail`` unused ragged rows."""
    g = len(sizes)
    offs = oracle.random_offs(sizes)
    ragged = int(sum(sizes)) + tail
    if layout == "2Dx3D":
        a, b, bshape = rand(gen, ragged, k, dtype=dtype), rand(gen, g, k, n, dtype=dtype), (g, n)
    elif layout == "3Dx2D":
        a, b, bshape = rand(gen, g, m, k, dtype=dtype), rand(gen, k, ragged, dtype=dtype), (ragged,)
    elif layout == "2Dx2D":
        a, b, bshape = rand(gen, m, ragged, dtype=dtype), rand(gen, ragged, n, dtype=dtype), (g, n)
    else:
        a, b, bshape, offs = rand(gen, g, m, k, dtype=dtype), rand(gen, g, k, n, dtype=dtype), (g, n), None
    return a, b, offs, (rand(gen, *bshape, dtype=dtype) if bias else None)


LAYOUTS = ["2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sizes,tail", [([5, 0, 17, 9], 3),  # empty group + unused tail rows
                                        ([64, 64], 0),  # tile-aligned
                                        ([0, 0, 0], 2),  # every group empty
                                        ([1], 0)])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_oracle(gen, dtype, layout, sizes, tail, bias):
    a, b, offs, c = make(layout, sizes, 13, 11, 24, dtype, gen, bias, tail)
    out = xvendor.grouped_mm(a, b, offs, c)
    assert out.dtype == dtype
    ref = oracle.grouped_mm(a, b, offs, c)
    assert out.shape == ref.shape
    assert oracle.rel_error(out, ref) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("layout", ["2Dx3D", "3Dx2D"])
def test_past_the_last_group_is_zero_not_garbage(gen, layout):
    a, b, offs, c = make(layout, [3, 4], 6, 5, 8, torch.float32, gen, bias=True, tail=7)
    # Poison the allocator's recent blocks so garbage would show up as non-zero.
    for _ in range(4):
        torch.full((64, 64), float("nan")).sum()
    out = xvendor.grouped_mm(a, b, offs, c)
    tail = out[7:] if layout == "2Dx3D" else out[:, 7:]
    assert tail.numel() > 0 and torch.equal(tail, torch.zeros_like(tail))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_out_dtype(gen, layout, out_dtype):
    a, b, offs, c = make(layout, [4, 0, 9], 5, 6, 40, torch.float16, gen, bias=True)
    out = xvendor.grouped_mm(a, b, offs, c, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    assert oracle.rel_error(out, oracle.grouped_mm(a, b, offs, c)) <= oracle.TOLERANCE[out_dtype]


def test_transposed_weights_2d3d(gen):
    w = rand(gen, 3, 10, 16)  # (G, N, K) stored like nn.Linear weights; used as (G, K, N)
    x, offs = rand(gen, 20, 16), oracle.random_offs([7, 6, 7])
    out = xvendor.grouped_mm(x, w.transpose(-2, -1), offs)
    assert oracle.rel_error(out, oracle.grouped_mm(x, w.transpose(-2, -1), offs)) <= 2e-5


def _o(*v):
    return torch.tensor(v, dtype=I32)


@pytest.mark.parametrize("args,match", [
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(2, 6).long()), r"offs must be int32"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(2, 6).view(2, 1)), r"offs must be 1-D"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(5, 3)), r"offs must be non-decreasing.*offs\[1\] = 3 < offs\[0\] = 5"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(-1, 3)), r"offs must be non-negative"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(2, 7)), r"offs last entry must be at most the rows of a \(6\)"),
    ((torch.randn(4, 3, 4), torch.randn(4, 9), _o(2, 10)), r"offs must have one entry per group of a"),
    ((torch.randn(6, 4), torch.randn(3, 4, 3), _o(2, 6)), r"offs must have one entry per group of b: b has 3"),
    ((torch.randn(6, 4), torch.randn(2, 5, 3), _o(2, 6)), r"b inner dimensions must match"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3).half(), _o(2, 6)), r"b dtype must equal a's"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3)), r"offs is required for 2-D x 3-D"),
    ((torch.randn(2, 6, 4), torch.randn(2, 4, 3), _o(1, 2)), r"offs must be None for 3-D x 3-D"),
    ((torch.randn(2, 6, 4), torch.randn(3, 4, 3)), r"b group count must equal a's"),
    ((torch.randn(6), torch.randn(2, 4, 3), _o(2, 6)), r"a must be 2-D or 3-D"),
    ((torch.randn(6, 4, dtype=torch.float64).to(torch.int64), torch.randn(2, 4, 3).long(), _o(2, 6)), r"a must be float32"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(2, 6), torch.randn(3)), r"bias must have shape \(G, N\) = \(2, 3\)"),
    ((torch.randn(2, 6, 4), torch.randn(4, 9), _o(2, 9), torch.randn(2, 9)), r"bias must have shape \(N,\) = \(9,\)"),
    ((torch.randn(6, 4), torch.randn(4, 3), torch.empty(0, dtype=I32)), r"at least one group"),
    ((torch.randn(6, 4), torch.randn(2, 4, 3), _o(2, 6).to("meta")), r"offs must be on the same device as a"),
])
@pytest.mark.parametrize("path", ["eager", "dispatcher"])
def test_bad_input_names_argument_and_rule(args, match, path):
    fn = xvendor.grouped_mm if path == "eager" else torch.ops.xvendor.grouped_mm
    with pytest.raises((xvendor.ArgumentError, RuntimeError), match=match):
        fn(*args)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_opcheck(gen, layout):
    a, b, offs, c = make(layout, [3, 0, 5], 4, 6, 8, torch.float32, gen, bias=True, tail=2)
    args = (a.requires_grad_(), b.requires_grad_(), offs, c.requires_grad_())
    opcheck(torch.ops.xvendor.grouped_mm.default, args)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradcheck_fp64(gen, layout):
    a, b, offs, c = make(layout, [2, 0, 3], 3, 4, 5, torch.float64, gen, bias=True, tail=1)
    ins = tuple(t.requires_grad_() for t in (a, b, c))
    assert torch.autograd.gradcheck(lambda a, b, c: xvendor.grouped_mm(a, b, offs, c), ins)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_grads_match_fp64_autograd(gen, layout):
    a, b, offs, c = make(layout, [9, 0, 14], 7, 12, 20, torch.bfloat16, gen, bias=True, tail=2)
    ins = [t.requires_grad_() for t in (a, b, c)]
    out = xvendor.grouped_mm(ins[0], ins[1], offs, ins[2])
    g = torch.randn(out.shape, generator=gen)
    out.float().backward(g)
    refs = [t.detach().double().requires_grad_() for t in ins]
    oracle.grouped_mm(refs[0], refs[1], offs, refs[2]).backward(g.double())
    for got, ref in zip(ins, refs):
        assert got.grad.dtype == got.dtype and got.grad.shape == got.shape
        assert oracle.rel_error(got.grad, ref.grad) <= 2 * oracle.TOLERANCE[torch.bfloat16]


@st.composite
def problems(draw):
    layout = draw(st.sampled_from(LAYOUTS))
    sizes = draw(st.lists(st.integers(0, 9), min_size=1, max_size=5))
    m, n, k = (draw(st.integers(1, 12)) for _ in range(3))
    dtype = draw(st.sampled_from(DTYPES))
    return layout, sizes, m, n, k, dtype, draw(st.booleans()), draw(st.integers(0, 3)), \
        draw(st.integers(0, 2**31 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fuzz_against_fp64_oracle(problem):
    layout, sizes, m, n, k, dtype, bias, tail, seed = problem
    gen = torch.Generator().manual_seed(seed)
    a, b, offs, c = make(layout, sizes, m, n, k, dtype, gen, bias, tail)
    out = xvendor.grouped_mm(a, b, offs, c)
    ref = oracle.grouped_mm(a, b, offs, c)
    assert out.shape == ref.shape and out.dtype == dtype
    assert oracle.rel_error(out, ref) <= oracle.TOLERANCE[dtype]
