"""FlyDSL numerics on a gfx950/gfx1250 device vs the fp64 oracle (l2: skipped elsewhere).

Every layout (gemm NT/NN with bias and out_dtype; grouped 2Dx3D, 3Dx2D, 2Dx2D, 3Dx3D with
empty groups and M not a multiple of the tile) and both dtypes. Run on the hardware, these
are what turns "compiles" into "correct"; the correctness gate repeats the check per
kernel on first use in production.
"""

import pytest
import torch

from xvendor.rocm import backend
from xvendor import numerics as oracle

pytestmark = [pytest.mark.l2,
              pytest.mark.skipif(backend.probe() is not None,
                                 reason=f"needs a gfx950/gfx1250 ROCm device: {backend.probe()}")]

DTYPES = [torch.bfloat16, torch.float16]


def _close(out, ref, dtype):
    assert oracle.rel_error(out, ref) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n, k, nn", [(256, 384, 512, False), (513, 200, 100, True),
                                         (1, 64, 64, False)])  # tails, NN, one row
@pytest.mark.parametrize("bias, out32", [(False, False), (True, True)])
def test_gemm(dtype, m, n, k, nn, bias, out32):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype) if nn else \
        torch.randn(n, k, device="cuda", dtype=dtype).t()
    bb = torch.randn(n, device="cuda", dtype=dtype) if bias else None
    out = backend.gemm(a, b, bb, torch.float32 if out32 else None)
    _close(out, oracle.gemm(a, b, bb), torch.float32 if out32 else dtype)


def _offs(sizes):
    return torch.tensor(sizes, dtype=torch.int32, device="cuda").cumsum(0).to(torch.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D"])
def test_grouped(dtype, layout):
    sizes, G, K, N, M = [0, 130, 1, 255, 0, 64], 6, 192, 160, 600
    offs = _offs(sizes)
    r = lambda *s: torch.randn(*s, device="cuda", dtype=dtype)  # noqa: E731
    if layout == "2Dx3D":
        a, b, bias = r(M, K), r(G, K, N), r(G, N)
    elif layout == "3Dx2D":
        a, b, bias = r(G, 96, K), r(N * 4, K).t(), r(N * 4)
        offs = _offs([0, 100, 1, 255, 0, 64])
    elif layout == "2Dx2D":
        a, b, bias = r(M, 96).t(), r(M, N), r(G, 96, N)[:, 0]
    else:
        a, b, bias, offs = r(G, 96, K), r(G, K, N), r(G, N), None
    out = backend.grouped_mm(a, b, offs, bias)
    _close(out, oracle.grouped_mm(a, b, offs, bias), dtype)
