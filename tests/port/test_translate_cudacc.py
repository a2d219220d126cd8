"""tests/port/cuda/cudacc_branches.cu: the SYCL compile takes the ``#ifdef __CUDACC__``
branches (NOTE [CUDA compilation] in translate.py); before, it took the host compiler's
(here a serial loop each thread ran whole: a kernel that compiled and computed wrong)."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_cudacc_defined_after_the_headers():
    src = build.translate_file(CUDA / "cudacc_branches.cu").source
    assert src.index("#define __CUDACC__") > src.index('#include "xvendor_cuda_compat_more.h"')


@pytest.mark.l1
def test_the_nvcc_branch_runs(cuda_module):
    m = cuda_module("cudacc_branches")
    n = 1000
    y = torch.full((n,), float("nan"))
    m.index_times[(n + 127) // 128, 128](y, 0.5, n)
    torch.testing.assert_close(y, 0.5 * torch.arange(n, dtype=torch.float32), rtol=0, atol=0)
