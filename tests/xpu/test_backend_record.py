"""The ``sycl`` record in the registry: XPU tensors, CPU tensors only on explicit request,
no default anywhere (no evidence that it beats oneDNN on XPU)."""

import pytest
import torch

import xvendor
from xvendor import ops, registry  # importing xvendor.ops defines the ops in the registry

pytestmark = pytest.mark.l0


def test_record():
    rec = registry.backends()["sycl"]
    assert rec.module == "xvendor.xpu.backend" and rec.ops == {"gemm", "grouped_mm", "rms_norm", "topk"}
    assert rec.ops <= set(registry.ops()) == set(ops.SPECS)
    assert rec.device_types == {"xpu"} and rec.explicit_device_types == {"cpu"}
    assert rec.dtypes == {torch.float32, torch.float16, torch.bfloat16}
    assert not rec.defaults


def test_cpu_tensors_never_choose_sycl_automatically():
    dec = registry.select("gemm", registry.device_info(torch.device("cpu")), torch.float32)
    assert dec.backend == "torch"
    assert "only on explicit request" in dec.passed_over["sycl"]


def test_float64_is_refused_with_the_reason():
    with pytest.raises(xvendor.BackendUnavailable, match="sycl.*does not take torch.float64"):
        xvendor.gemm(torch.randn(2, 2).double(), torch.randn(2, 2).double(), backend="sycl")


def test_backend_module_has_the_reference_signatures():
    import inspect

    from xvendor import reference
    from xvendor.xpu import backend
    for op, fn in backend.KERNELS.items():
        ours = list(inspect.signature(fn).parameters.values())
        ref = list(inspect.signature(reference.KERNELS[op]).parameters)
        assert [p.name for p in ours[:len(ref)]] == ref, op  # the dispatch's call shape
        assert all(p.default is not inspect.Parameter.empty for p in ours[len(ref):]), op


def test_launch_geometry_matches_the_kernel_tile():
    """backend.TILE sizes the nd-range; it must equal gemm_tile.h's compiled-in defaults."""
    import re

    from xvendor.xpu import backend, runtime
    text = (runtime.kernels_dir() / "gemm_tile.h").read_text()
    defaults = dict(re.findall(r"#define XV_GEMM_(\w+) (\d+)", text))
    assert {k: int(defaults[k]) for k in backend.TILE} == backend.TILE
