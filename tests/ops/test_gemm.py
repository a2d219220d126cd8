"""xvendor.gemm: numerics vs the fp64 oracle, bad input, opcheck, autograd."""

import pytest
import torch
from torch.library import opcheck

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l0
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (67, 45, 33), (128, 64, 96), (5, 300, 17),
                                   (0, 8, 4),  # empty output
                                   (6, 5, 0)])  # empty reduction: zeros (+ bias)
@pytest.mark.parametrize("bias", [False, True])
def test_matches_oracle(gen, dtype, m, n, k, bias):
    a, b = rand(gen, m, k, dtype=dtype), rand(gen, k, n, dtype=dtype)
    c = rand(gen, n, dtype=dtype) if bias else None
    out = xvendor.gemm(a, b, c)
    assert out.dtype == dtype and out.shape == (m, n)
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_out_dtype(gen, dtype, out_dtype):
    a, b, c = rand(gen, 19, 70, dtype=dtype), rand(gen, 70, 23, dtype=dtype), rand(gen, 23, dtype=dtype)
    out = xvendor.gemm(a, b, c, out_dtype=out_dtype)
    assert out.dtype == out_dtype
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[out_dtype]


def test_transposed_and_strided_operands(gen):
    w = rand(gen, 48, 40)  # an nn.Linear weight (out, in): x @ w.t()
    x = rand(gen, 30, 80)[:, ::2]  # non-contiguous rows
    assert not x.is_contiguous() and not w.t().is_contiguous()
    out = xvendor.gemm(x, w.t())
    assert oracle.rel_error(out, oracle.gemm(x, w.t())) <= oracle.TOLERANCE[torch.float32]


@pytest.mark.parametrize("args,match", [
    ((torch.randn(3, 4), torch.randn(5, 6)), r"b inner dimensions must match.*\(3, 4\).*\(5, 6\)"),
    ((torch.randn(3), torch.randn(3, 2)), r"a must be 2-D \(M, K\)"),
    ((torch.randn(3, 4), torch.randn(2, 4, 2)), r"b must be 2-D \(K, N\)"),
    ((torch.randn(3, 4), torch.randn(4, 2).half()), r"b dtype must equal a's dtype"),
    ((torch.randint(0, 3, (3, 4)), torch.randint(0, 3, (4, 2))), r"a must be float32, float16"),
    ((torch.randn(3, 4), torch.randn(4, 2), torch.randn(3)), r"bias must have shape \(N,\) = \(2,\)"),
    ((torch.randn(3, 4), torch.randn(4, 2), torch.randn(2).double()), r"bias dtype must be"),
    ((torch.randn(3, 4), torch.randn(4, 2), None, torch.int8), r"out_dtype must be None or float"),
    ((torch.randn(3, 4), torch.randn(4, 2), None, torch.float64), r"out_dtype may be float64 only"),
    ((torch.randn(3, 4), torch.randn(4, 2, device="meta")), r"b must be on the same device as a"),
])
@pytest.mark.parametrize("path", ["eager", "dispatcher"])
def test_bad_input_names_argument_and_rule(args, match, path):
    fn = xvendor.gemm if path == "eager" else torch.ops.xvendor.gemm
    with pytest.raises((xvendor.ArgumentError, RuntimeError), match=match):
        fn(*args)


@pytest.mark.parametrize("a,b,match", [
    (torch.randn(3, 4), torch.randn(5, 6), r"b inner dimensions must match"),
    (torch.randn(3), torch.randn(3, 2), r"a must be 2-D"),
    (torch.randn(3, 4), torch.randn(2, 4, 2), r"b must be 2-D"),
    (torch.randn(3, 4), torch.randn(4, 2).half(), r"b dtype must equal a's dtype"),
    (torch.randn(3, 4), torch.randn(4, 2).double(), r"b dtype must equal a's dtype"),
    (torch.randn(3, 4), torch.randn(4, 2, device="meta"), r"b must be on the same device"),
    (torch.randn(3, 4, device="meta"), torch.randn(4, 2), r"b must be on the same device"),
])
def test_bad_plain_call_after_a_cached_decision_is_an_argument_error(a, b, match):
    """The aten decision trusts torch.mm's own checks on plain calls (Backend.checks_inputs):
    with the decision cached, bad input must still be our ArgumentError, not torch's."""
    xvendor.gemm(torch.randn(2, 4), torch.randn(4, 2))  # the (cpu, float32) decision exists
    with pytest.raises(xvendor.ArgumentError, match=match) as info:
        xvendor.gemm(a, b)
    assert info.value.__cause__ is None  # and no "during handling of" chain shown:
    assert info.value.__suppress_context__ or info.value.__context__ is None


def test_non_tensor_argument():
    with pytest.raises(xvendor.ArgumentError, match="b must be a torch.Tensor, got list"):
        xvendor.gemm(torch.randn(3, 4), [[1.0]])
    with pytest.raises(RuntimeError, match="for argument 'b'"):  # the schema's own check
        torch.ops.xvendor.gemm(torch.randn(3, 4), [[1.0]])


@pytest.mark.parametrize("case", [
    (torch.randn(5, 7), torch.randn(7, 3)),
    (torch.randn(5, 7), torch.randn(9, 7).t(), torch.randn(9)),
    (torch.randn(4, 8).bfloat16(), torch.randn(8, 6).bfloat16(), None, torch.float32),
])
def test_opcheck(case):
    args = tuple(t.requires_grad_() if isinstance(t, torch.Tensor) else t for t in case)
    opcheck(torch.ops.xvendor.gemm.default, args)


def test_gradcheck_fp64(gen):
    a = rand(gen, 6, 5).double().requires_grad_()
    b = rand(gen, 5, 4).double().requires_grad_()
    c = rand(gen, 4).double().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, c: xvendor.gemm(a, b, c), (a, b, c))


def test_bf16_grads_match_fp64_autograd(gen):
    a, b, c = (rand(gen, *s, dtype=torch.bfloat16).requires_grad_() for s in [(33, 20), (20, 17), (17,)])
    g = rand(gen, 33, 17)
    xvendor.gemm(a, b, c, out_dtype=torch.float32).backward(g)
    refs = [t.detach().double().requires_grad_() for t in (a, b, c)]
    oracle.gemm(*refs).backward(g.double())
    for got, ref in zip((a, b, c), refs):
        assert got.grad.dtype == torch.bfloat16
        assert oracle.rel_error(got.grad, ref.grad) <= oracle.TOLERANCE[torch.bfloat16]
