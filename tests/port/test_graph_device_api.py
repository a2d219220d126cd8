"""tests/port/cuda/graph_conditional.cu: a kernel that drives a CUDA graph's conditional
node from device code (``cudaGraphSetConditional``) is refused with that reason (SYCL
graphs have no device-side control); the plain kernel beside it translates."""

import pytest

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_graph_device_api_is_a_named_refusal():
    t = build.translate_file(CUDA / "graph_conditional.cu")
    rep = t.report("set_loop_flag")
    assert rep.status == "unsupported", rep
    assert "CUDA-graph device API" in rep.reason
    assert t.report("count_down").status == "ok", t.report("count_down").reason
