"""Fixtures of the SYCL tests: a usable CPU SYCL device (or a failure naming why), NaN
poisoning of every output, and a launch counter that proves which kernel ran."""

import pytest

from xvendor.xpu import backend, runtime, tensors


@pytest.fixture(scope="session")
def sycl_device():
    """l1 tests need the runtime wheels (xvendor[xpu]) and a C++ compiler: fail, never skip."""
    reason = backend.probe()
    if reason:
        pytest.fail(f"the sycl backend is unusable here: {reason}", pytrace=False)
    return runtime.cpu_queue()


@pytest.fixture
def poisoned(sycl_device):
    """Outputs are NaN (indices -1) on the device before each kernel writes them."""
    tensors.POISON[0] = True
    yield
    tensors.POISON[0] = False


@pytest.fixture
def launches(poisoned):
    """``launches(prefix)``: kernels launched since the test began whose name starts so."""
    before = runtime.stats()["launches"]

    def count(prefix: str) -> int:
        now = runtime.stats()["launches"]
        return sum(n - before.get(k, 0) for k, n in now.items() if k.startswith(prefix))
    return count
