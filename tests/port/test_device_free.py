"""tests/port/cuda/device_free.cu: ``cudaFree`` in device code (the device runtime's heap)
is the named refusal for device-side malloc/free, like ``free``; it was a compile error
('use of undeclared identifier cudaFree'). Host ``cudaFree`` refuses nothing."""

import pytest

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_device_cuda_free_is_a_named_refusal():
    t = build.translate_file(CUDA / "device_free.cu")
    rep = t.report("free_lines")
    assert rep.status == "unsupported" and "malloc/free" in rep.reason
    assert t.report("scale").status == "ok"
