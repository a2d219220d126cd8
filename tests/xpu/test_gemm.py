"""xvendor.gemm(backend="sycl") on CPU tensors through the CPU SYCL device vs the fp64 oracle.

The tile is BM x BN = 64 x 64 with BK = 64 (sycl_kernels/gemm_tile.h); shapes are chosen
off that grid. Every test asserts the SYCL kernel ran (launch counter)."""

import pytest
import torch

import xvendor
from xvendor import numerics as oracle

pytestmark = pytest.mark.l1
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1),  # one element: every mask
                                   (67, 45, 33),  # M, N, K tails inside one tile
                                   (200, 130, 70),  # several tiles, tails in all three
                                   (64, 64, 128)])  # exactly one tile, two K steps
@pytest.mark.parametrize("bias", [False, True])
def test_matches_oracle(gen, launches, dtype, m, n, k, bias):
    a, b = rand(gen, m, k, dtype=dtype), rand(gen, k, n, dtype=dtype)
    c = rand(gen, n, dtype=dtype) if bias else None
    out = xvendor.gemm(a, b, c, backend="sycl")
    assert launches(f"gemm_{_tag(dtype)}_{_tag(dtype)}") == 1
    assert out.dtype == dtype and out.shape == (m, n)
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[dtype]


def _tag(dtype):
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", DTYPES)
def test_out_dtype_and_bias_dtype(gen, launches, dtype, out_dtype):
    a, b = rand(gen, 19, 70, dtype=dtype), rand(gen, 70, 23, dtype=dtype)
    c = rand(gen, 23, dtype=out_dtype)  # bias may come in out_dtype
    out = xvendor.gemm(a, b, c, out_dtype=out_dtype, backend="sycl")
    assert launches(f"gemm_{_tag(dtype)}_{_tag(out_dtype)}") == 1
    assert out.dtype == out_dtype
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[out_dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transposed_and_strided_operands(gen, launches, dtype):
    w = rand(gen, 48, 40, dtype=dtype)  # nn.Linear weight: x @ w.t() keeps w.t()'s strides
    x = rand(gen, 30, 80, dtype=dtype)[:, ::2]  # non-contiguous: made contiguous by the wrapper
    assert not x.is_contiguous() and not w.t().is_contiguous()
    out = xvendor.gemm(x, w.t(), backend="sycl")
    p, q = rand(gen, 40, 50, dtype=dtype), rand(gen, 30, 40, dtype=dtype)
    out2 = xvendor.gemm(p.t(), q.t(), backend="sycl")  # both operands column-major
    assert launches("gemm_") == 2
    assert oracle.rel_error(out, oracle.gemm(x, w.t())) <= oracle.TOLERANCE[dtype]
    assert oracle.rel_error(out2, oracle.gemm(p.t(), q.t())) <= oracle.TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_k(gen, launches, dtype):
    a, b, c = rand(gen, 9, 4099, dtype=dtype), rand(gen, 4099, 17, dtype=dtype), rand(gen, 17, dtype=dtype)
    out = xvendor.gemm(a, b, c, out_dtype=torch.float32, backend="sycl")  # keep the fp32 sum
    assert launches("gemm_") == 1
    # fp32 accumulation over 4099 terms: well inside the fp32 output tolerance
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[torch.float32]


def test_empty_reduction_and_empty_output(gen, launches):
    c = rand(gen, 5)
    out = xvendor.gemm(torch.empty(6, 0), torch.empty(0, 5), c, backend="sycl")  # K = 0: bias
    assert torch.equal(out, c.expand(6, 5))
    assert xvendor.gemm(torch.empty(0, 4), torch.empty(4, 3), backend="sycl").shape == (0, 3)
    assert launches("gemm_") == 1  # nothing to launch for an empty output


def test_autograd_runs_the_backward_on_sycl_too(gen, launches):
    a, b = rand(gen, 21, 13).requires_grad_(), rand(gen, 13, 9).requires_grad_()
    xvendor.gemm(a, b, backend="sycl").sum().backward()
    assert launches("gemm_f32_f32") == 3  # forward, grad_a, grad_b
    refs = [t.detach().double().requires_grad_() for t in (a, b)]
    oracle.gemm(*refs).sum().backward()
    for got, ref in zip((a, b), refs):
        assert oracle.rel_error(got.grad, ref.grad) <= oracle.TOLERANCE[torch.float32]


def test_env_request_selects_sycl_for_cpu_tensors(gen, launches, monkeypatch):
    from xvendor import registry
    monkeypatch.setenv("XVENDOR_BACKEND", "sycl")
    registry.reset()  # the environment is read at import and on reset()
    a, b = rand(gen, 5, 7), rand(gen, 7, 3)
    out = xvendor.gemm(a, b)
    assert launches("gemm_f32_f32") == 1
    assert oracle.rel_error(out, oracle.gemm(a, b)) <= oracle.TOLERANCE[torch.float32]


TILE_KEYS = ("WM", "WN", "RM", "RN", "BK")
# A tuned config as the dispatch layer hands it over: the tile plus keys the tuner adds.
CONFIG = {"WM": 8, "WN": 16, "RM": 4, "RN": 4, "BK": 64, "block_m": 32, "block_n": 64,
          "block_k": 64, "name": "wg8x16_r4x4_k64"}


def test_the_caller_hands_over_the_tile(gen, launches):
    from xvendor.xpu import backend, tunable
    a, b, c = rand(gen, 70, 50), rand(gen, 50, 40), rand(gen, 40)
    out = backend.gemm(a, b, c, config=CONFIG)
    assert backend.last_gemm_tile == {k: CONFIG[k] for k in TILE_KEYS}
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[torch.float32]
    backend.gemm(a, b)
    assert backend.last_gemm_tile == backend.DEFAULT_TILE  # config=None: the default tile
    out = tunable.TUNABLE.run("gemm", CONFIG, (a, b, c, None))  # the tuner's call
    assert backend.last_gemm_tile == {k: CONFIG[k] for k in TILE_KEYS}
    assert oracle.rel_error(out, oracle.gemm(a, b, c)) <= oracle.TOLERANCE[torch.float32]
    assert launches("gemm_f32_f32") == 3


def test_a_config_without_the_tile_keys_is_refused(gen):
    from xvendor.xpu import backend, tunable
    a, b = rand(gen, 4, 4), rand(gen, 4, 4)
    with pytest.raises(ValueError, match=r"lacks the tile keys \['BK'\]"):
        backend.gemm(a, b, config={k: CONFIG[k] for k in TILE_KEYS[:4]})
    with pytest.raises(TypeError):
        backend.gemm(a, b, tile=dict(CONFIG))  # the old keyword is gone
