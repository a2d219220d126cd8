"""Selection order, explicit requests, fallback, evidence rule, entry-point plugins."""

import sys
import types
import warnings
from importlib.metadata import EntryPoint

import pytest
import torch

import xvendor
from xvendor import devices, reference, registry

pytestmark = pytest.mark.l0


def _install_backend(name, kernels, **record):
    """Register a real CPU backend whose kernels live in a real (in-memory) module."""
    mod = types.ModuleType(f"xvendor_test_{name}")
    mod.KERNELS = kernels
    mod.CALLS = []
    sys.modules[mod.__name__] = mod
    fields = dict(ops={"gemm"}, device_types={"cpu"})
    fields.update(record)
    xvendor.register(registry.Backend(name=name, module=mod.__name__, **fields))
    return mod


def _counting(mod, fn):
    def wrapped(*args):
        mod.CALLS.append(args)
        return fn(*args)
    return wrapped


def _ab():
    return torch.randn(8, 4), torch.randn(4, 6)


def test_torch_is_the_floor_on_cpu_and_the_reference_the_last_resort():
    a, b = _ab()
    dec = xvendor.explain("gemm", a, b)
    assert dec.backend == "torch" and dec.fallbacks == ("reference",)


def test_available_but_not_default_is_passed_over_with_reason():
    _install_backend("alt", {"gemm": reference.gemm})
    dec = xvendor.explain("gemm", *_ab())
    assert dec.backend == "torch"
    assert "not the default for cpu" in dec.passed_over["alt"]


def test_default_needs_evidence():
    with pytest.raises(ValueError, match="gives no evidence"):
        registry.Backend(name="x", module="m", ops={"gemm"}, device_types={"cpu"},
                         defaults={"gemm": {"cpu"}})
    with pytest.raises(ValueError, match="unknown ops"):  # a typo is caught when registered
        registry.register(registry.Backend(name="x", module="m", ops={"conv"},
                                           device_types={"cpu"}))
    with pytest.raises(ValueError, match="must be 'module:attribute'"):
        registry.Backend(name="x", module="m", ops={"gemm"}, device_types={"cpu"},
                         probe="not a spec")
    with pytest.raises(ValueError, match="must match"):
        registry.Backend(name="Bad Name", module="m", ops={"gemm"}, device_types={"cpu"})


def test_default_with_evidence_is_chosen_and_falls_back_to_reference():
    mod = _install_backend("fast", {}, defaults={"gemm": {"cpu"}}, evidence="measured", priority=5)
    mod.KERNELS["gemm"] = _counting(mod, reference.gemm)
    a, b = _ab()
    dec = xvendor.explain("gemm", a, b)
    assert (dec.backend, dec.fallbacks) == ("fast", ("torch", "reference"))
    torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    assert len(mod.CALLS) == 1  # the chosen kernel really ran


@pytest.mark.parametrize("how", ["argument", "context", "env"])
def test_explicit_request_paths(how, monkeypatch):
    mod = _install_backend("alt", {})
    mod.KERNELS["gemm"] = _counting(mod, reference.gemm)
    a, b = _ab()
    if how == "argument":
        xvendor.gemm(a, b, backend="alt")
    elif how == "context":
        with xvendor.use_backend("alt"):
            xvendor.gemm(a, b)
    else:
        monkeypatch.setenv("XVENDOR_BACKEND", "alt")
        registry.reset()  # NOTE [env read once]
        xvendor.gemm(a, b)
    assert len(mod.CALLS) == 1


def test_argument_beats_context():
    mod = _install_backend("alt", {})
    mod.KERNELS["gemm"] = _counting(mod, reference.gemm)
    with xvendor.use_backend("alt"):
        xvendor.gemm(*_ab(), backend="reference")
    assert mod.CALLS == []


def test_unknown_explicit_backend_lists_the_registered_ones():
    with pytest.raises(xvendor.BackendUnavailable, match=r"no backend named 'nope'.*'reference'"):
        xvendor.gemm(*_ab(), backend="nope")


def test_explicit_backend_that_cannot_serve_raises_with_reason():
    _install_backend("gpuonly", {"gemm": reference.gemm}, device_types={"cuda"})
    with pytest.raises(xvendor.BackendUnavailable, match="does not run on cpu devices"):
        xvendor.gemm(*_ab(), backend="gpuonly")
    _install_backend("noprobe", {"gemm": reference.gemm},
                     probe="xvendor_no_such_module:probe")
    with pytest.raises(xvendor.BackendUnavailable, match="probe .* raised ModuleNotFoundError"):
        xvendor.gemm(*_ab(), backend="noprobe")
    _install_backend("f32only", {"gemm": reference.gemm}, dtypes={torch.float32})
    with pytest.raises(xvendor.BackendUnavailable, match="does not take torch.float16"):
        xvendor.gemm(*(t.half() for t in _ab()), backend="f32only")


def test_explicit_only_device_types():
    _install_backend("sycl_like", {"gemm": reference.gemm}, device_types={"xpu"},
                     explicit_device_types={"cpu"}, defaults={"gemm": {"*"}}, evidence="test")
    a, b = _ab()
    assert xvendor.explain("gemm", a, b).backend == "torch"  # never automatic on cpu
    assert xvendor.explain("gemm", a, b, backend="sycl_like").backend == "sycl_like"


def test_failing_automatic_choice_warns_once_falls_back_and_is_not_chosen_again():
    def broken(*args):
        mod.CALLS.append(args)
        raise RuntimeError("kernel exploded")

    mod = _install_backend("flaky", {"gemm": broken}, defaults={"gemm": {"cpu"}},
                           evidence="test", priority=5)
    a, b = _ab()
    with pytest.warns(UserWarning, match="'flaky' failed .* falling back to 'torch'.*exploded"):
        out = xvendor.gemm(a, b)
    torch.testing.assert_close(out, a @ b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(xvendor.gemm(a, b), a @ b)  # no second warning
    assert len(mod.CALLS) == 1
    dec = xvendor.explain("gemm", a, b)
    assert dec.backend == "torch" and "failed earlier" in dec.passed_over["flaky"]


def test_failing_explicit_choice_raises_the_kernel_error():
    _install_backend("flaky", {"gemm": lambda *a: (_ for _ in ()).throw(RuntimeError("boom"))})
    with pytest.raises(RuntimeError, match="boom"):
        xvendor.gemm(*_ab(), backend="flaky")


def test_tuned_winner_beats_the_default_and_gets_its_config():
    mod = _install_backend("tuned", {})

    def kernel(a, b, bias=None, out_dtype=None, *, config=None):
        mod.CALLS.append(config)
        return reference.gemm(a, b, bias, out_dtype)
    mod.KERNELS["gemm"] = kernel
    seen = []

    def lookup(op, dev, dtype, shape_class, backend):
        seen.append((shape_class, backend))
        return ("tuned", {"tile": 64}) if op == "gemm" else None

    registry.set_tuned_lookup(lookup)
    a, b = _ab()
    xvendor.gemm(a, b)
    assert mod.CALLS == [{"tile": 64}]  # the decision carried the config into the kernel
    assert seen[0] == (("NN", 8, 6, 4, 0, "float32"), "*")  # the tuner's shape class
    dec = xvendor.explain("gemm", a, b)
    assert dec.backend == "tuned" and dec.config == {"tile": 64}


def test_untuned_backend_gets_no_config_keyword():
    _install_backend("plain", {"gemm": reference.gemm}, defaults={"gemm": {"cpu"}},
                     evidence="measured")
    registry.set_tuned_lookup(lambda *args: None)  # a table exists, but not for this problem
    a, b = _ab()
    torch.testing.assert_close(xvendor.gemm(a, b), a @ b)  # reference.gemm takes no config=


def test_a_backend_that_does_not_check_its_inputs_never_sees_bad_ones():
    """Only kernels whose record says they check their inputs (the reference's and torch's gemm) are trusted to;
    any other decided backend gets the op's argument filter on every plain call."""
    mod = _install_backend("unchecked", {}, defaults={"gemm": {"cpu"}}, evidence="test",
                           priority=5)
    mod.KERNELS["gemm"] = _counting(mod, reference.gemm)
    a, b = _ab()
    xvendor.gemm(a, b)  # the decision is cached now
    assert len(mod.CALLS) == 1
    with pytest.raises(xvendor.ArgumentError, match="inner dimensions must match"):
        xvendor.gemm(a, torch.randn(5, 6))
    assert len(mod.CALLS) == 1  # refused before the kernel
    assert not registry.decide("gemm", a.device, a.dtype, (a, b, None, None)).checks_inputs
    registry.reset(configuration=True)
    assert registry.decide("gemm", a.device, a.dtype, (a, b, None, None)).checks_inputs


def test_decisions_are_cached():
    a, b = _ab()
    args = (a, b, None, None)
    first = registry.decide("gemm", a.device, a.dtype, args)
    xvendor.gemm(a, b)
    assert registry.decide("gemm", a.device, a.dtype, args) is first
    registry.reset()
    assert registry.decide("gemm", a.device, a.dtype, args) is not first


def test_broken_entry_point_is_reported_not_fatal(monkeypatch):
    good = EntryPoint("goodone", "tests_plugin_target:make", "xvendor.backends")
    bad = EntryPoint("broken", "xvendor_missing_plugin_module:backend", "xvendor.backends")
    target = types.ModuleType("tests_plugin_target")
    target.make = lambda: registry.Backend(name="goodone", module="xvendor.reference",
                                           ops={"topk"}, device_types={"cpu"})
    monkeypatch.setitem(sys.modules, "tests_plugin_target", target)
    import importlib.metadata as md
    monkeypatch.setattr(md, "entry_points", lambda group=None: [good, bad])
    registry.reset()  # entry points are read again on the next selection
    with pytest.warns(UserWarning, match="'broken'.*failed to load"):
        names = registry.backends()
    assert "goodone" in names
    assert "ModuleNotFoundError" in registry.plugin_problems()["broken"]
    x = torch.randn(3, 7)
    assert xvendor.explain("topk", x, 2, backend="goodone").backend == "goodone"


def test_explain_on_hypothetical_arch():
    dec = xvendor.explain("grouped_mm", torch.randn(4, 8).bfloat16(), torch.randn(2, 8, 3).bfloat16(),
                          torch.tensor([1, 4], dtype=torch.int32), arch="gfx950")
    assert dec.device.arch == "gfx950" and dec.device.device.type == "cuda"
    # A dry run assumes the hardware's toolchains work (this machine's probes say nothing
    # about a gfx950): evidence-backed defaults first, then torch's own op, the reference last.
    assert (dec.backend, dec.fallbacks) == ("flydsl", ("triton", "torch", "reference"))
    dense = xvendor.explain("gemm", torch.randn(4, 8), torch.randn(8, 3), arch="sm_90")
    assert dense.backend == "torch"  # cuBLAS stays the default on NVIDIA


def test_per_op_dtypes():
    """flydsl takes fp32 for topk (router logits) and not for gemm: the dtype rule is per op."""
    logits = torch.randn(64, 128)
    assert xvendor.explain("topk", logits, 8, arch="gfx950", backend="flydsl").backend == "flydsl"
    with pytest.raises(xvendor.BackendUnavailable, match="does not take torch.float32 for gemm"):
        xvendor.explain("gemm", logits, logits.t(), arch="gfx950", backend="flydsl")


def test_reset_configuration_restores_the_import_time_registry():
    _install_backend("extra", {"gemm": reference.gemm})
    registry.set_tuned_lookup(None)
    assert "extra" in registry.backends()
    registry.reset(configuration=True)
    assert "extra" not in registry.backends()
    assert set(registry.backends()) >= {"reference", "torch", "triton", "flydsl", "sycl"}


def test_every_op_has_a_reference_kernel_and_a_spec():
    from xvendor import ops
    assert set(registry.ops()) == set(ops.SPECS)
    for op in registry.ops():
        assert op in reference.KERNELS, f"{op} has no reference kernel"


def test_no_eligible_backend_raises_with_every_reason():
    info = devices.DeviceInfo(torch.device("cpu"), "cpu", "cpu", "host", 1, devices.ARCHS["cpu"])
    with pytest.raises(xvendor.BackendUnavailable, match=r"no backend can run.*reference: does not take torch.int32"):
        registry.select("gemm", info, torch.int32)
