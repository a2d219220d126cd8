"""Every kernel of tests/port/cuda, translated, compiled with SYCL RTC and run on the
OpenCL CPU device, against a torch reference in float64, on fresh random inputs whose
sizes are not multiples of the tile or block, with outputs poisoned (NaN / -1) first, over
several block sizes. The 32-wide sub-group is what makes the warp code right: the
``warp='native'`` case shows the same kernel break without it."""

import pytest
import torch

pytestmark = pytest.mark.l1

BLOCKS = [32, 64, 128, 256]


@pytest.fixture(scope="module")
def linalg(cuda_module):
    return cuda_module("linalg")


@pytest.fixture(scope="module")
def red(cuda_module):
    return cuda_module("reductions")


def _nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


@pytest.mark.parametrize("M, N, K", [(37, 45, 29), (16, 16, 16), (1, 70, 33)])  # tails; one exact tile
def test_tiled_matmul(linalg, M, N, K):
    g = torch.Generator().manual_seed(M * N + K)
    A, B = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
    C = _nan(M, N)
    linalg.matmul_tiled[((N + 15) // 16, (M + 15) // 16), (16, 16)](A, B, C, M, N, K)
    torch.testing.assert_close(C.double(), A.double() @ B.double(), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("n", [1003, 4096])  # scalar tail after the float4 groups; none
def test_axpy_float4_packed_loads(linalg, block, n):
    x, y = torch.randn(n), torch.randn(n)
    want = y.double() + 1.75 * x.double()
    linalg.axpy_float4[(n // 4 + block - 1) // block + 1, block](1.75, x, y, n)
    torch.testing.assert_close(y.double(), want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("block", BLOCKS)
def test_template_instantiations(linalg, block):
    n = 3001
    x, out = torch.randn(n), _nan(n)
    linalg["scale_bias<float, 4>"][(n + 4 * block - 1) // (4 * block), block](out, x, 2.5, -0.5, n)
    torch.testing.assert_close(out.double(), x.double() * 2.5 - 0.5)
    xd, od = x.double(), _nan(n, dtype=torch.float64)
    linalg["scale_bias<double, 2>"][(n + 2 * block - 1) // (2 * block), block](od, xd, 1 / 3, 0.1, n)
    torch.testing.assert_close(od, xd * (1 / 3) + 0.1, atol=1e-15, rtol=1e-14)  # double math (fp32 would be ~1e-7)
    out = _nan(n)
    linalg["fill_iota<float>"][(n + block - 1) // block, block](out, 7.0, n)
    torch.testing.assert_close(out, 7.0 + torch.arange(n, dtype=torch.float32))


def test_instantiation_requested_after_load(linalg):
    n = 777
    x, out = torch.randn(n), _nan(n)
    linalg["scale_bias<float, 3>"][(n + 3 * 64 - 1) // (3 * 64), 64](out, x, -1.0, 2.0, n)
    torch.testing.assert_close(out, 2.0 - x)


@pytest.mark.parametrize("block", BLOCKS + [1024])
def test_warp_shuffle_row_sum(red, block):
    rows, cols = 19, 1531
    x, out = torch.randn(rows, cols), _nan(rows)
    red.row_sum_shfl[rows, block](x, out, cols)
    torch.testing.assert_close(out.double(), x.double().sum(1), atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("block", BLOCKS)
def test_cooperative_groups_row_max(red, block):
    rows, cols = 53, 301
    x, out = torch.randn(rows, cols), _nan(rows)
    warps = block // 32
    red.row_max_cg[(rows + warps - 1) // warps, block](x, out, rows, cols)
    torch.testing.assert_close(out, x.max(1).values)


@pytest.mark.parametrize("block", BLOCKS)
def test_dynamic_shared_softmax(red, block):
    rows, cols = 7, 1000
    x, y = torch.randn(rows, cols) * 3, _nan(rows, cols)
    red.softmax_dyn_smem[rows, block, cols * 4](x, y, cols)
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), 1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("block", [64, 256])
def test_atomics_histogram_max_inc(red, block):
    n, n_bins, threshold, limit = 5000, 37, 900, 1000
    keys = torch.randint(0, 1000, (n,), dtype=torch.int32)
    bins = torch.zeros(n_bins, dtype=torch.int32)
    mx = torch.full((1,), -1, dtype=torch.int32)
    above = torch.zeros(1, dtype=torch.int32)
    red.histogram_atomic[13, block, n_bins * 4](keys, n, bins, n_bins, mx, above, threshold, limit)
    assert torch.equal(bins, torch.bincount(keys % n_bins, minlength=n_bins).int())
    assert mx.item() == keys.max().item()
    assert above.item() == int((keys > threshold).sum()) % (limit + 1)  # atomicInc wraps


def test_atomic_float_add_and_cas_min(red):
    n = 2049
    x = torch.randn(n)
    s, mn = torch.zeros(1), torch.full((1,), float("inf"))
    red.sum_min_atomic[(n + 127) // 128, 128](x, n, s, mn)
    torch.testing.assert_close(s.double(), x.double().sum().reshape(1), atol=1e-3, rtol=1e-4)
    assert mn.item() == x.min().item()


@pytest.mark.parametrize("block", [32, 128])
def test_bf16_gelu_and_scalar(cuda_module, block):
    m = cuda_module("bf16")
    n = 999
    x = torch.randn(n).bfloat16()
    y = torch.full((n,), float("nan"), dtype=torch.bfloat16)
    m.gelu_bf16[(n + block - 1) // block, block](x, y, n)
    want = torch.nn.functional.gelu(x.double(), approximate="tanh").bfloat16()
    assert torch.equal(y, want) or (y.double() - want.double()).abs().max() <= 2 ** -7
    out = _nan(n)
    m.scale_bf16[(n + block - 1) // block, block](x, out, 1.5, n)  # 1.5: exact in bf16
    assert torch.equal(out, (x * 1.5).float())  # bf16 x bf16 -> bf16 (RNE), as CUDA


def test_native_warp_width_keeps_warpsize_code_and_breaks_hard_coded_32(cuda_module):
    """With the device's own sub-group width (8 or 16 on the CPU device), code written
    against ``warpSize`` stays right (it reads the real width), while code that hard-codes
    32 lanes combines the wrong lanes: why ``warp=32`` is the default."""
    m = cuda_module("reductions", warp="native")
    rows, cols = 4, 512
    x, out = torch.rand(rows, cols) + 1, _nan(rows)
    # 64 threads: the kernel's second stage (one warp sums the per-warp partials) needs
    # blockDim / warpSize <= warpSize, as CUDA code assumes; 256 threads break it at width 8
    # (AVX2 CPUs' native sub-group), which is the kernel's limit, not the port's
    m.row_sum_shfl[rows, 64](x, out, cols)
    torch.testing.assert_close(out.double(), x.double().sum(1), atol=1e-3, rtol=1e-5)
    y = _nan(rows, cols)
    m.softmax_dyn_smem[rows, 256, cols * 4](x, y, cols)  # lane = tid % 32, xor from 16
    assert not torch.allclose(y.double(), torch.softmax(x.double(), 1), rtol=1e-3)


@pytest.mark.parametrize("block", [64, 256])
def test_block_size_template_compiles_per_block_on_launch(linalg, block):
    rep = linalg.reports["block_sum"]
    # the launch's template argument is its block size, a lambda tag's value: both tags
    # instantiated up front (NOTE [lambda tags]), and mod.block_sum[grid, block] picks one
    assert rep.block_bound and sorted(i.args for i in rep.instantiations) == [["256"], ["64"]]
    rows, n = 5, 1001
    x, out = torch.randn(rows, n), _nan(rows)
    linalg.block_sum[rows, block](x, out, n)
    torch.testing.assert_close(out.double(), x.double().sum(1), atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("block", [32, 128])
def test_16bit_atomics(cuda_module, block):
    """atomicAdd on bf16 and on half2 pairs (CAS on the 32-bit word). Small integers keep
    every partial sum exact in 16 bits, so any order of the atomics gives the same bits."""
    m = cuda_module("bf16")
    rows, cols = 13, 301
    x = torch.randint(0, 4, (rows, cols)).float()
    sums = torch.zeros(cols, dtype=torch.bfloat16)
    pairs = torch.zeros(cols, 2, dtype=torch.float16)
    m.colsum_atomic16[((cols + block - 1) // block, rows), block](x, sums, pairs, rows, cols)
    assert torch.equal(sums.float(), x.sum(0))
    assert torch.equal(pairs.float(), torch.stack([x.sum(0), 2 * x.sum(0)], 1))


@pytest.mark.parametrize("block", [32, 128])
def test_cg_reduce_with_a_device_function_on_a_struct(red, block):
    rows, cols = 21, 203
    x = torch.randn(rows, cols)
    sums, maxes = _nan(rows), _nan(rows)
    warps = block // 32
    red.row_sum_max_cg[(rows + warps - 1) // warps, block](x, sums, maxes, rows, cols)
    torch.testing.assert_close(sums.double(), x.double().sum(1), atol=1e-4, rtol=1e-5)
    assert torch.equal(maxes, x.max(1).values)
