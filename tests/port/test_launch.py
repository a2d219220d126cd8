"""xvendor.port.load: the module cache, errors that name the argument, and the XPU path
(l2: needs an Intel GPU and a torch XPU build; skipped here with the reason)."""

import pytest
import torch

import xvendor.port
from xvendor.ops._common import ArgumentError

from .conftest import CUDA

pytestmark = pytest.mark.l1


@pytest.fixture(scope="module")
def linalg(cuda_module):
    return cuda_module("linalg")


def test_load_is_cached_by_source_hash(linalg, sycl_device):
    from xvendor.xpu import runtime
    before = runtime.stats()["builds"]
    assert xvendor.port.load(CUDA / "linalg.cu") is linalg
    assert runtime.stats()["builds"] == before


@pytest.mark.parametrize("cfg, args, arg, words", [
    (lambda m: m.matmul_tiled[1, (16, 16)], "short", "arguments", "take 6 values (A, B, C, M, N, K), got 5"),
    (lambda m: m.matmul_tiled[1, (128, 128)], "ok", "block", "more than the"),
    (lambda m: m.matmul_tiled[1, (16, 16)], "f64", "A", "needs a torch.float32 tensor, got torch.float64"),
    (lambda m: m.matmul_tiled[1, (16, 16)], "float_n", "N", "pass a Python int, got float"),
    (lambda m: m.matmul_tiled[1, (16, 16)], "big_n", "N", "outside int's range"),
    (lambda m: m.matmul_tiled[1, (16, 16)], "list_ptr", "A", "pass a torch tensor, got list"),
    (lambda m: m.matmul_tiled[0, 16], "ok", "grid", "positive int"),
    (lambda m: m.matmul_tiled[1, (16, 16), 1 << 40], "ok", "shared_bytes", "work-group local memory"),
])
def test_bad_launches_name_the_argument(linalg, cfg, args, arg, words):
    A, B, C = torch.randn(4, 4), torch.randn(4, 4), torch.empty(4, 4)
    cases = {"ok": (A, B, C, 4, 4, 4), "short": (A, B, C, 4, 4), "f64": (A.double(), B, C, 4, 4, 4),
             "float_n": (A, B, C, 4, 4.0, 4), "big_n": (A, B, C, 4, 2**31, 4),
             "list_ptr": ([1.0], B, C, 4, 4, 4)}
    with pytest.raises(ArgumentError) as err:
        cfg(linalg)(*cases[args])
    assert err.value.arg == arg and words in str(err.value), str(err.value)


def test_template_without_arguments_and_unknown_kernel_explain_themselves(linalg):
    with pytest.raises(KeyError, match=r"template: use mod\['scale_bias<...>'\]"):
        linalg.scale_bias
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        linalg["nope"]


def test_unsupported_kernel_is_not_launchable(cuda_module):
    m = cuda_module("unsupported")
    with pytest.raises(KeyError, match="unsupported: .*inline PTX"):
        m.uses_ptx
    y = torch.full((100,), float("nan"))
    m.fine[4, 32](y, 100)
    assert torch.equal(y, 2.0 * torch.arange(100.0))


@pytest.mark.l2
def test_xpu_tensors_launch_on_torchs_queue(cuda_module):
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("needs an Intel GPU with a torch XPU build: XPU tensors are passed in place "
                    "on torch's current SYCL queue (not available on this machine)")
    m = cuda_module("linalg")
    x, y = torch.randn(1003, device="xpu"), torch.randn(1003, device="xpu")
    want = y + 2 * x
    m.axpy_float4[4, 256](2.0, x, y, 1003)
    torch.testing.assert_close(y, want)
