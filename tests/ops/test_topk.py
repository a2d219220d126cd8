"""xvendor.topk: values and indices vs a sort-based fp64 oracle, bad input, opcheck, autograd."""

import pytest
import torch
from torch.library import opcheck

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,k,dim", [((9, 50), 8, -1), ((9, 50), 1, -1), ((9, 50), 50, -1),
                                         ((9, 50), 0, -1), ((12, 5, 7), 3, 0), ((33,), 4, 0)])
@pytest.mark.parametrize("largest", [True, False])
def test_matches_oracle(gen, dtype, shape, k, dim, largest):
    x = torch.randn(*shape, generator=gen).to(dtype)
    values, indices = xvendor.topk(x, k, dim=dim, largest=largest)
    assert indices.dtype == torch.int64 and values.dtype == dtype
    assert torch.equal(values.double(), oracle.topk_values(x, k, dim, largest))
    assert torch.equal(x.gather(dim, indices), values)  # indices point at the values


def test_unsorted_gives_the_same_set(gen):
    x = torch.randn(6, 40, generator=gen)
    values, _ = xvendor.topk(x, 5, sorted=False)
    assert torch.equal(values.sort(-1, descending=True).values, oracle.topk_values(x, 5).float())


@pytest.mark.parametrize("args,match", [
    ((torch.randn(4, 8), 9), r"k must be an int in \[0, 8\]"),
    ((torch.randn(4, 8), -1), r"k must be an int in \[0, 8\]"),
    ((torch.randn(4, 8), 2, 2), r"dim must be an int in \[-2, 1\]"),
    ((torch.randint(0, 9, (4, 8)), 2), r"x must be float32"),
    ((torch.tensor(3.0), 1), r"x must have at least 1 dimension"),
    ((torch.randn(4, 8), 4, True), r"dim must be an int in \[-2, 1\].*got True"),  # not dim 1
    ((torch.randn(4, 8), True), r"k must be an int"),
    ((torch.randn(4, 8), 2, -1, 1), r"largest must be a bool, got 1"),
])
def test_bad_input_names_argument_and_rule(args, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.topk(*args)


@pytest.mark.parametrize("backend", ["reference", "torch", "sycl", None])
def test_bool_dim_is_refused_before_any_backend(backend):
    """Regression: topk(x, 4, True) was taken as dim 1, and the SYCL path raised a raw
    TypeError from movedim. The op's check refuses it before a backend is chosen, on the
    fast path and on the dispatcher path. (A direct ``torch.ops.xvendor.topk(x, 4, True)``
    is parsed by torch's schema binding, which turns the bool into 1 before the op runs:
    that call form cannot be checked by us.)"""
    x = torch.randn(4, 8)
    with pytest.raises(xvendor.ArgumentError, match="dim must be an int"):
        xvendor.topk(x, 4, True, backend=backend)
    with pytest.raises(xvendor.ArgumentError, match="dim must be an int"):
        xvendor.topk(x.requires_grad_(), 4, True, backend=backend)  # the dispatcher path


def test_opcheck():
    opcheck(torch.ops.xvendor.topk.default, (torch.randn(4, 6, requires_grad=True), 3))
    opcheck(torch.ops.xvendor.topk.default, (torch.randn(5, 3, requires_grad=True), 2, 0, False))


def test_gradient_flows_to_the_chosen_entries(gen):
    x = torch.randn(3, 10, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: xvendor.topk(x, 4)[0], (x,))
