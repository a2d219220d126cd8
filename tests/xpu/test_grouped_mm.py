"""xvendor.grouped_mm(backend="sycl"), all four layouts, on CPU tensors through the CPU SYCL
device vs the fp64 oracle: empty groups, rows/columns past offs[-1], bias, out_dtype."""

import pytest
import torch

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l1
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LAYOUTS = ["2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D"]
KERNEL = {"2Dx3D": "gmm_rows", "3Dx2D": "gmm_rows", "2Dx2D": "gmm_batch", "3Dx3D": "gmm_batch"}


def rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


def make(layout, sizes, m, n, k, dtype, gen, bias=False, tail=0, bias_dtype=None):
    """Inputs for one layout; ``sizes`` are the group extents, ``tail`` unused ragged rows."""
    g, offs, ragged = len(sizes), oracle.random_offs(sizes), int(sum(sizes)) + tail
    if layout == "2Dx3D":
        a, b, bshape = rand(gen, ragged, k, dtype=dtype), rand(gen, g, k, n, dtype=dtype), (g, n)
    elif layout == "3Dx2D":
        a, b, bshape = rand(gen, g, m, k, dtype=dtype), rand(gen, k, ragged, dtype=dtype), (ragged,)
    elif layout == "2Dx2D":
        a, b, bshape = rand(gen, m, ragged, dtype=dtype), rand(gen, ragged, n, dtype=dtype), (g, n)
    else:
        a, b, bshape, offs = rand(gen, g, m, k, dtype=dtype), rand(gen, g, k, n, dtype=dtype), (g, n), None
    return a, b, offs, (rand(gen, *bshape, dtype=bias_dtype or dtype) if bias else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sizes,tail", [([5, 0, 17, 9], 3),  # empty group + unused tail rows
                                        ([130, 0, 97], 0),  # groups spanning tiles, off-grid
                                        ([0, 0, 0], 2),  # every group empty
                                        ([1], 0)])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_oracle(gen, launches, dtype, layout, sizes, tail, bias):
    a, b, offs, c = make(layout, sizes, 13, 70, 40, dtype, gen, bias, tail)
    out = xvendor.grouped_mm(a, b, offs, c, backend="sycl")
    assert launches(KERNEL[layout]) == (1 if out.numel() else 0)
    ref = oracle.grouped_mm(a, b, offs, c)
    assert out.dtype == dtype and out.shape == ref.shape
    assert oracle.rel_error(out, ref) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("layout", ["2Dx3D", "3Dx2D"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_past_the_last_group_is_zero_not_garbage(gen, launches, layout, dtype):
    # Outputs are NaN-poisoned on the device, so a tail the kernel skipped would stay NaN.
    a, b, offs, c = make(layout, [3, 4], 6, 5, 8, dtype, gen, bias=True, tail=200)
    out = xvendor.grouped_mm(a, b, offs, c, backend="sycl")
    assert launches("gmm_rows") == 1
    tail = out[7:] if layout == "2Dx3D" else out[:, 7:]
    assert tail.numel() > 0 and torch.equal(tail, torch.zeros_like(tail))
    assert oracle.rel_error(out, oracle.grouped_mm(a, b, offs, c)) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,out_dtype", [(torch.float16, torch.float32),
                                             (torch.bfloat16, torch.float16),
                                             (torch.float32, torch.bfloat16)])
def test_out_dtype(gen, launches, layout, dtype, out_dtype):
    a, b, offs, c = make(layout, [4, 0, 9], 5, 6, 40, dtype, gen, bias=True, bias_dtype=out_dtype)
    out = xvendor.grouped_mm(a, b, offs, c, out_dtype=out_dtype, backend="sycl")
    assert launches(KERNEL[layout]) == 1 and out.dtype == out_dtype
    assert oracle.rel_error(out, oracle.grouped_mm(a, b, offs, c)) <= oracle.TOLERANCE[out_dtype]


def test_transposed_weights_and_strided_activations(gen, launches):
    w = rand(gen, 3, 10, 16)  # (G, N, K) stored like nn.Linear weights; used as (G, K, N)
    x, offs = rand(gen, 20, 32)[:, ::2], oracle.random_offs([7, 6, 7])
    out = xvendor.grouped_mm(x, w.transpose(-2, -1), offs, backend="sycl")
    assert launches("gmm_rows") == 1
    assert oracle.rel_error(out, oracle.grouped_mm(x, w.transpose(-2, -1), offs)) <= 2e-5


@pytest.mark.parametrize("layout", ["2Dx3D", "2Dx2D"])
def test_large_k(gen, launches, layout):
    sizes = [5, 3] if layout == "2Dx3D" else [3000, 0, 2100]  # 2Dx2D: K is the ragged dim
    a, b, offs, c = make(layout, sizes, 6, 11, 4100, torch.bfloat16, gen, bias=True)
    out = xvendor.grouped_mm(a, b, offs, c, out_dtype=torch.float32, backend="sycl")
    assert launches(KERNEL[layout]) == 1
    assert oracle.rel_error(out, oracle.grouped_mm(a, b, offs, c)) <= oracle.TOLERANCE[torch.float32]


def test_moe_training_step_runs_every_layout_on_sycl(gen, launches):
    """2Dx3D forward; its backward is 2Dx3D (grad x) and 2Dx2D (grad w) on the same backend."""
    x = rand(gen, 50, 24).requires_grad_()
    w = rand(gen, 4, 24, 16).requires_grad_()
    offs = oracle.random_offs([20, 0, 17, 10])
    xvendor.grouped_mm(x, w, offs, backend="sycl").sum().backward()
    assert launches("gmm_rows") == 2 and launches("gmm_batch") == 1
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    oracle.grouped_mm(xr, wr, offs).sum().backward()
    assert oracle.rel_error(x.grad, xr.grad) <= oracle.TOLERANCE[torch.float32]
    assert oracle.rel_error(w.grad, wr.grad) <= oracle.TOLERANCE[torch.float32]


@pytest.mark.parametrize("layout", ["2Dx3D", "3Dx2D"])
def test_no_groups_at_all_gives_zeros(gen, launches, layout):
    a, b, offs, _ = make(layout, [], 4, 6, 8, torch.float32, gen, tail=9)  # G = 0
    out = xvendor.grouped_mm(a, b, offs, backend="sycl")
    assert launches("gmm_rows") == 1 and out.numel() > 0
    assert torch.equal(out, torch.zeros_like(out))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_caller_hands_over_the_tile(gen, launches, layout):
    from xvendor.xpu import backend
    config = {"WM": 8, "WN": 16, "RM": 4, "RN": 4, "BK": 64, "block_m": 32, "block_n": 64,
              "block_k": 64}  # what the tuner stores: the tile and its block sizes
    a, b, offs, c = make(layout, [40, 0, 75], 37, 70, 50, torch.float32, gen, bias=True, tail=2)
    out = backend.grouped_mm(a, b, offs, c, config=config)
    assert backend.last_gemm_tile == {k: config[k] for k in ("WM", "WN", "RM", "RN", "BK")}
    assert launches(KERNEL[layout]) == 1
    ref = oracle.grouped_mm(a, b, offs, c)
    assert oracle.rel_error(out, ref) <= oracle.TOLERANCE[torch.float32]
    backend.grouped_mm(a, b, offs, c)
    assert backend.last_gemm_tile == backend.DEFAULT_TILE
