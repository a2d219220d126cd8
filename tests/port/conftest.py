"""Fixtures of the port tests: the CPU SYCL device (or a failure naming why) and the test
CUDA sources, each translated and compiled once per session (load() caches by hash)."""

from pathlib import Path

import pytest

CUDA = Path(__file__).with_name("cuda")


@pytest.fixture(scope="session")
def sycl_device():
    """l1 tests need the runtime wheels (xvendor[xpu]) and a C++ compiler: fail, never skip."""
    from xvendor.xpu import backend, runtime
    reason = backend.probe()
    if reason:
        pytest.fail(f"the sycl backend is unusable here: {reason}", pytrace=False)
    return runtime.cpu_queue()


@pytest.fixture(scope="session")
def cuda_module(sycl_device):
    """``cuda_module("linalg")``: tests/port/cuda/linalg.cu loaded with xvendor.port.load."""
    import xvendor.port

    def get(stem: str, **kw):
        return xvendor.port.load(CUDA / f"{stem}.cu", **kw)
    return get
