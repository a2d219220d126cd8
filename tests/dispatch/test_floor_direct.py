"""NOTE [straight to the floor]: a plain eager call whose decision is torch's kernel skips
the dispatcher's closure, and nothing that changes a decision is missed by it."""

import dataclasses
import sys
import types
import warnings

import pytest
import torch

import xvendor
from xvendor import reference, registry
from xvendor.ops import _common

pytestmark = pytest.mark.l0

CPU, F32 = torch.device("cpu"), torch.float32
REFERENCE_KERNELS = registry.backends()["reference"].module


def _calls(g):
    """op -> (call, torch's own call on the same inputs)."""
    a, b = torch.randn(9, 7, generator=g), torch.randn(7, 8, generator=g)
    x, w = torch.randn(9, 8, generator=g), torch.randn(3, 8, 4, generator=g)
    offs = torch.tensor([2, 2, 7], dtype=torch.int32)  # an empty group, 2 rows past the end
    n, nw = torch.randn(5, 16, generator=g), torch.randn(16, generator=g)

    def torch_grouped():
        out = torch.nn.functional.grouped_mm(x, w, offs=offs)
        out[7:] = 0  # xvendor's rows past offs[-1] are zeros
        return out

    return {
        "gemm": (lambda: xvendor.gemm(a, b), lambda: torch.mm(a, b)),
        "grouped_mm": (lambda: xvendor.grouped_mm(x, w, offs), torch_grouped),
        "rms_norm": (lambda: xvendor.rms_norm(n, nw, 1e-6),
                     lambda: torch.rms_norm(n, (16,), nw, 1e-6)),
        "topk": (lambda: xvendor.topk(n, 3)[0], lambda: torch.topk(n, 3)[0]),
    }


def _op_module(op):
    return sys.modules[f"xvendor.ops.{op}"]


def _table(op):
    return _op_module(op).direct


def _refuse_dispatchers(monkeypatch, op):
    """Make every dispatcher closure of ``op``'s module raise: a call that still works
    went straight to the floor."""
    def refuse(*args, **kwargs):
        raise AssertionError("the dispatcher ran")
    mod = _op_module(op)
    for name in ("dispatch", "dispatch_plain"):
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, refuse)


@pytest.mark.parametrize("op", ["gemm", "grouped_mm", "rms_norm", "topk"])
def test_a_warm_plain_call_is_torchs_op_without_the_dispatcher(gen, monkeypatch, op):
    call, torch_call = _calls(gen)[op]
    first = call()  # the dispatcher's miss makes the entry
    assert (CPU, F32) in _table(op)
    _refuse_dispatchers(monkeypatch, op)
    again = call()
    assert torch.equal(again, first) and torch.equal(again, torch_call())


def _install(name, ops):
    """A real CPU backend (no default anywhere) whose kernels count their calls."""
    mod = types.ModuleType(f"xvendor_test_direct_{name}")
    mod.CALLS = []

    def counting(fn):
        def run(*args):
            mod.CALLS.append(fn.__name__)
            return fn(*args)
        return run
    mod.KERNELS = {op: counting(getattr(reference, op)) for op in ops}
    sys.modules[mod.__name__] = mod
    xvendor.register(registry.Backend(name=name, module=mod.__name__, ops=set(ops),
                                      device_types={"cpu"}))
    return mod


@pytest.mark.parametrize("op", ["gemm", "grouped_mm", "rms_norm", "topk"])
def test_requests_after_warm_calls_reach_the_requested_backend(gen, monkeypatch, op):
    mod = _install("spy", [op])
    call, _ = _calls(gen)[op]
    call()
    assert (CPU, F32) in _table(op) and mod.CALLS == []
    with xvendor.use_backend("spy"):  # a context request
        call()
    assert mod.CALLS == [op]
    monkeypatch.setenv("XVENDOR_BACKEND", "spy")  # an environment request
    registry.reset()
    assert _table(op) == {}
    call()
    call()
    assert mod.CALLS == [op] * 3 and _table(op) == {}


def test_every_change_of_decision_empties_the_table(gen):
    call, _ = _calls(gen)["gemm"]
    call()
    table = _table("gemm")
    assert table
    registry.set_tuned_lookup(lambda *args: None)  # a tuned-winner lookup installed
    assert table == {}
    call()
    assert table == {}  # tuned lookups key on shapes: no shape-blind entry while installed
    registry.set_tuned_lookup(None)
    call()
    assert table
    _install("another", ["gemm"])
    assert table == {}
    call()
    assert table
    registry.reset()
    assert table == {}


def test_bad_input_after_a_warm_call_is_named_by_the_op(gen):
    call, _ = _calls(gen)["gemm"]
    call()
    assert _table("gemm")
    a = torch.randn(3, 4, generator=gen)
    with pytest.raises(_common.ArgumentError, match="inner dimensions must match"):
        xvendor.gemm(a, torch.randn(5, 6, generator=gen))
    with pytest.raises(_common.ArgumentError, match="dtype must equal a's"):
        xvendor.gemm(a, torch.randn(4, 6, generator=gen, dtype=torch.float64))
    with pytest.raises(_common.ArgumentError, match="must be 2-D"):
        xvendor.gemm(a, torch.randn(4, generator=gen))


def test_an_error_of_torchs_kernel_still_falls_back(gen):
    # the floor's record with a gemm kernel that serves one call, then raises on valid ones
    mod = types.ModuleType("xvendor_test_direct_floor")
    mod.FAIL = []

    def flaky(*args):
        if mod.FAIL:
            raise RuntimeError("a kernel failure on a valid call")
        return torch.mm(*args[:2])
    mod.KERNELS = {"gemm": flaky}
    sys.modules[mod.__name__] = mod
    floor = registry.backends()["torch"]
    xvendor.register(dataclasses.replace(floor, module=mod.__name__, accepts=None),
                     replace=True)
    call, torch_call = _calls(gen)["gemm"]
    call()
    assert (CPU, F32) in _table("gemm")  # torch's kernel, straight from the table
    mod.FAIL.append(True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = call()
    torch.testing.assert_close(out, torch_call())  # the reference served it
    assert any("falling back" in str(w.message) for w in seen)
    assert registry.fallbacks()[-1].to == "reference"


def test_a_call_the_floors_rule_refuses_is_passed_on(gen, monkeypatch):
    # torch's rms_norm does not fuse an fp32 weight with bf16 x (rules.py): after a warm
    # bf16 call with a bf16 weight, the same x with an fp32 weight goes to the reference
    ran = []

    def counting(*args):
        ran.append(args)
        return reference.rms_norm(*args)
    monkeypatch.setitem(sys.modules[REFERENCE_KERNELS].KERNELS, "rms_norm", counting)
    registry.reset()  # kernels are loaded anew
    x = torch.randn(4, 32, generator=gen).bfloat16()
    w32 = torch.randn(32, generator=gen)
    xvendor.rms_norm(x, w32.bfloat16(), 1e-6)
    assert (CPU, torch.bfloat16) in _table("rms_norm") and ran == []
    out = xvendor.rms_norm(x, w32, 1e-6)
    assert len(ran) == 1 and torch.equal(out, reference.rms_norm(x, w32, 1e-6))
