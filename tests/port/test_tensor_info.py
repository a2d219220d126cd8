"""tests/port/cuda/tensor_info.cu: ATen's ``at::cuda::detail::TensorInfo<T, IndexType>``
(data, sizes[25], strides[25], dims) as a kernel argument by value, with
``IndexToOffset<T, IndexType, -1>::get`` mapping a linear index of the logical shape to the
strided element offset. Before, the compat header did not declare it ('no member named
'cuda' in namespace 'at'')."""

import ctypes

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


class TensorInfo(ctypes.Structure):  # ATen's layout for <float, int>
    _fields_ = [("data", ctypes.c_void_p), ("sizes", ctypes.c_int * 25),
                ("strides", ctypes.c_int * 25), ("dims", ctypes.c_int)]


def _info(t: torch.Tensor) -> TensorInfo:
    info = TensorInfo()
    info.data = None  # the kernel reads through its own pointer argument
    info.dims = t.dim()
    for d in range(t.dim()):
        info.sizes[d], info.strides[d] = t.size(d), t.stride(d)
    return info


@pytest.mark.l0
def test_translates():
    assert build.translate_file(CUDA / "tensor_info.cu").report("gather_strided").status == "ok"


@pytest.mark.l1
@pytest.mark.parametrize("shape,perm", [((5, 7, 3), (2, 0, 1)), ((11, 13), (1, 0)), ((40,), (0,))])
def test_strided_view_gathered(cuda_module, shape, perm):
    m = cuda_module("tensor_info")
    base = torch.randn(*shape)
    view = base.permute(*perm)
    n = view.numel()
    out = torch.full((n,), float("nan"))
    m.gather_strided[(n + 63) // 64, 64](base, _info(view), out, n)
    # the contiguity flag adds 1000 in float, as the kernel does
    ref = view.reshape(-1) + (1000.0 if view.dim() == 1 and view.stride(0) == 1 else 0.0)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
