"""The correctness gate of the dispatch layer (l0), with real in-memory CPU backends.

A gated backend whose kernel is deliberately wrong must: warn once and fall back on first
use, persist a failing verdict, and never run that specialization again (also in a "new
process": memory cleared, verdict read back from disk). A correct gated kernel is checked
once per specialization, then called plainly; a verdict on one specialization (no bias)
says nothing about another (bias). See NOTE [correctness gate] in xvendor/gate.py.
"""

import json
import sys
import types
import warnings

import pytest
import torch

import xvendor
from xvendor import reference, registry

pytestmark = pytest.mark.l0

IDENT = "gemm/test-config/v1"


def _identity(op, info, dtype, args, config):
    """Like a real backend's: one identity per compiled specialization (bias or not)."""
    return IDENT + ("/bias" if args[2] is not None else "")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_CACHE_DIR", str(tmp_path))
    return tmp_path


def _gated(name, fn, **record):
    mod = types.ModuleType(f"xvendor_gate_test_{name}")
    mod.CALLS = []

    def kernel(*args):
        mod.CALLS.append(args)
        return fn(*args)

    mod.KERNELS = {"gemm": kernel}
    mod.identity = _identity
    sys.modules[mod.__name__] = mod
    fields = dict(ops={"gemm"}, device_types={"cpu"}, defaults={"gemm": {"cpu"}},
                  evidence="test", priority=5, gate_identity=f"{mod.__name__}:identity")
    fields.update(record)
    xvendor.register(registry.Backend(name=name, module=mod.__name__, **fields))
    return mod


def _ab():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 8, generator=g), torch.randn(8, 12, generator=g)


def _forget_process_state():
    """What a new process would know: only the verdict files."""
    registry.reset()


def test_wrong_kernel_fails_the_gate_falls_back_once_and_is_never_chosen_again(cache_dir):
    mod = _gated("wrong", lambda a, b, bias, out_dtype: reference.gemm(a, b) + 1.0)
    a, b = _ab()
    with pytest.warns(UserWarning, match="'wrong' failed .* falling back to 'torch'.*"
                                         "disagrees with the reference"):
        out = xvendor.gemm(a, b)
    torch.testing.assert_close(out, a @ b)  # the user got the reference's answer
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    assert len(mod.CALLS) == 1
    files = list((cache_dir / "gate").glob("*.json"))
    assert len(files) == 1
    verdict = json.loads(files[0].read_text())
    assert verdict["ok"] is False and verdict["key"][:4] == ["wrong", "gemm", IDENT, "cpu"]
    assert "relative error" in verdict["detail"]

    _forget_process_state()
    with pytest.warns(UserWarning, match="failed its correctness check"):
        torch.testing.assert_close(xvendor.gemm(a, b), a @ b)  # refused from the verdict
    assert len(mod.CALLS) == 1  # ... without running the wrong kernel again
    with pytest.raises(registry.GateFailure, match="failed its correctness check"):
        xvendor.gemm(a, b, backend="wrong")
    assert len(mod.CALLS) == 1


def test_a_verdict_vouches_only_for_its_own_specialization(cache_dir):
    """Regression: a passing no-bias call must not vouch for the untested bias epilogue."""
    def right_without_bias(a, b, bias, out_dtype):
        out = reference.gemm(a, b)
        return out if bias is None else out - bias  # the bias epilogue is wrong
    mod = _gated("half", right_without_bias)
    a, b = _ab()
    bias = torch.randn(12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    with pytest.warns(UserWarning, match="keeps serving its other specializations"):
        torch.testing.assert_close(xvendor.gemm(a, b, bias), a @ b + bias)
    verdicts = {tuple(v["key"][2:3]): v["ok"] for v in
                (json.loads(p.read_text()) for p in (cache_dir / "gate").glob("*.json"))}
    assert verdicts == {(IDENT,): True, (IDENT + "/bias",): False}
    xvendor.gemm(a, b)  # the passing specialization is still served by the backend
    assert len(mod.CALLS) == 3
    assert registry.fallbacks()[-1].whole_backend is False


def test_correct_kernel_is_checked_once_then_called_plainly(cache_dir, monkeypatch):
    mod = _gated("right", reference.gemm)
    checks = []
    from xvendor import gate
    real = gate.compare
    monkeypatch.setattr(gate, "compare", lambda *a: checks.append(a) or real(*a))
    a, b = _ab()
    for _ in range(3):
        torch.testing.assert_close(xvendor.gemm(a, b), a @ b)
    assert len(mod.CALLS) == 3 and len(checks) == 1
    (verdict,) = [json.loads(p.read_text()) for p in (cache_dir / "gate").glob("*.json")]
    assert verdict["ok"] is True
    _forget_process_state()
    xvendor.gemm(a, b)
    assert len(checks) == 1  # the verdict came from disk: no second check


def test_explicit_request_of_a_wrong_kernel_raises_the_gate_failure():
    _gated("wrong", lambda a, b, bias, out_dtype: -reference.gemm(a, b), defaults={},
           evidence="")
    with pytest.raises(registry.GateFailure, match="disagrees with the reference"):
        xvendor.gemm(*_ab(), backend="wrong")


def test_empty_output_leaves_the_verdict_open(cache_dir):
    mod = _gated("wrong", lambda a, b, bias, out_dtype: reference.gemm(a, b) + 1.0)
    a, b = torch.randn(0, 8), torch.randn(8, 12)
    assert xvendor.gemm(a, b).shape == (0, 12)
    assert not (cache_dir / "gate").exists() or not list((cache_dir / "gate").glob("*"))
    assert len(mod.CALLS) == 1


def test_verdicts_are_per_arch_identity_and_dtype(cache_dir):
    _gated("wrong", lambda a, b, bias, out_dtype: reference.gemm(a, b) + 1.0,
           dtypes={torch.float32, torch.float64})
    a, b = _ab()
    with pytest.warns(UserWarning):
        xvendor.gemm(a, b)
    _forget_process_state()
    # float64 is another kernel specialization: no verdict yet, so it is tried (and fails)
    with pytest.warns(UserWarning, match="disagrees"):
        xvendor.gemm(a.double(), b.double())
    assert len(list((cache_dir / "gate").glob("*.json"))) == 2


def test_ungated_backends_are_not_checked(monkeypatch):
    from xvendor import gate
    monkeypatch.setattr(gate, "compare", lambda *a: pytest.fail("checked an ungated kernel"))
    a, b = _ab()
    xvendor.gemm(a, b)
    from xvendor.torch_backend import kernels as torch_kernels
    assert registry.decide("gemm", a.device, a.dtype).kernel is torch_kernels.gemm
