"""tests/port/cuda/half2_helpers.cu: cuda_fp16.h's half2 helpers (``__hneg2``, ``__habs2``,
``__hmax2``/``__hmin2``, the ``__h*2``/``__hb*2`` comparisons, ``h2sqrt``/``h2exp``, ...)
and the raw storage struct ``__half_raw`` (bits in ``.x``; CAS-on-bits half atomics use it).
Before, each kernel using one was a compile error ("use of undeclared identifier
'__habs2'", "unknown type name '__half_raw'")."""

import pytest
import torch


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 64, 256])
def test_half2_helpers_match_fp64(cuda_module, block):
    m = cuda_module("half2_helpers")
    n = 300
    g = torch.Generator().manual_seed(block)
    a = (torch.randn(n, 2, generator=g) * 3).half()
    b = (torch.randn(n, 2, generator=g) * 3).half()
    b[::7] = a[::7]  # equal lanes: the comparisons' boundary
    out = torch.full((n, 8, 2), float("nan"), dtype=torch.half)
    m.h2_ops[(n + block - 1) // block, block](a, b, out, n)
    x, y = a.double(), b.double()
    ref = torch.stack([-x, x.abs(), torch.maximum(x, y), torch.minimum(x, y), (x > y).double(),
                       (x >= y).all(dim=1, keepdim=True).double().expand(n, 2),
                       x.abs().sqrt(), torch.minimum(x, torch.tensor(2.0)).exp()], dim=1)
    torch.testing.assert_close(out[:, :6].double(), ref[:, :6], rtol=0, atol=0)
    # one rounding to half of the float result
    torch.testing.assert_close(out[:, 6:].double(), ref[:, 6:].half().double(), rtol=1e-3, atol=1e-3)


@pytest.mark.l1
def test_half_raw_cas_bucket_sum(cuda_module):
    m = cuda_module("half2_helpers")
    n, buckets = 512, 5  # odd count: both 16-bit halves of a word are targets
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-4, 5, (n,), generator=g).half()  # small integers: every order is exact
    bucket = torch.randint(0, buckets, (n,), generator=g, dtype=torch.int32)
    out = torch.zeros(buckets + 1, dtype=torch.half)  # even length: whole 32-bit words
    m.bucket_sum[(n + 127) // 128, 128](x, bucket, out, n)
    ref = torch.zeros(buckets + 1, dtype=torch.float64).index_add_(0, bucket.long(), x.double())
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=0)
