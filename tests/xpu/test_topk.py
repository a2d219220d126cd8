"""xvendor.topk(backend="sycl") on CPU tensors through the CPU SYCL device: values against a
sort-based fp64 oracle, indices pointing at them, k = 1 and k = row length."""

import pytest
import torch

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape,k,dim", [((9, 50), 8, -1), ((9, 50), 1, -1),  # k = 1
                                         ((9, 50), 50, -1),  # k = row length
                                         ((64, 129), 6, -1),  # router-like: off the work-group
                                         ((12, 5, 7), 3, 0),  # dim moved last by the wrapper
                                         ((33,), 33, 0)])
@pytest.mark.parametrize("largest", [True, False])
def test_matches_oracle(gen, launches, dtype, shape, k, dim, largest):
    x = torch.randn(*shape, generator=gen).to(dtype)
    values, indices = xvendor.topk(x, k, dim=dim, largest=largest, backend="sycl")
    assert launches("topk_") == 1
    assert indices.dtype == torch.int64 and values.dtype == dtype
    assert values.shape == indices.shape and values.shape[dim] == k
    assert torch.equal(values.double(), oracle.topk_values(x, k, dim, largest))  # sorted
    assert torch.equal(x.gather(dim, indices), values)  # indices point at the values


def test_ties_give_distinct_indices(launches):
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, 1.0]])
    values, indices = xvendor.topk(x, 4, backend="sycl")
    assert values.tolist() == [[3.0, 3.0, 3.0, 2.0]]
    assert sorted(indices[0, :3].tolist()) == [1, 2, 4] and indices[0, 3].item() == 3


def test_nan_counts_as_largest_like_torch(launches):
    x = torch.tensor([[0.5, float("nan"), -2.0, 7.0]])
    for largest in (True, False):
        got = xvendor.topk(x, 4, largest=largest, backend="sycl")
        want = torch.topk(x, 4, largest=largest)
        assert torch.equal(got[1], want[1]) and torch.allclose(got[0], want[0], equal_nan=True)


def test_k_zero_launches_nothing(launches):
    values, indices = xvendor.topk(torch.randn(3, 5), 0, backend="sycl")
    assert values.shape == indices.shape == (3, 0) and launches("topk_") == 0
