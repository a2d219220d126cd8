"""l2: the compiled scaled Triton templates on a real CUDA/ROCm device.

Skipped with a reason where no device is present (CI runners, this machine). The same
cases and the same per-element bound as the interpreter suite (test_scaled_interpreter.py),
on the device, with the arch's default config; outputs NaN-poisoned before the kernel
writes them. Compiled kernels round their narrowing stores to nearest, so the bound's one
ulp is twice what they need. On sm_90 the MX cases run the emulated path (bf16 wgmma).
The triton record is called directly (``backend.KERNELS``) so the test does not depend on
which ops the registry lists.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.l2

_spec = importlib.util.spec_from_file_location(
    "xvendor_scaled_interpreter_cases",
    Path(__file__).resolve().parent / "test_scaled_interpreter.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason=f"no CUDA/ROCm device (torch {torch.__version__}, cuda={torch.version.cuda}, "
           f"hip={torch.version.hip}) or TRITON_INTERPRET is set")
_GEN_SEED = int.from_bytes(os.urandom(4), "little")


def _dev(t):
    return None if t is None else t.to("cuda")


@pytest.fixture
def poisoned(monkeypatch):
    from xvendor.triton import backend
    monkeypatch.setattr(backend, "POISON_OUTPUTS", True)
    return backend


@needs_gpu
@pytest.mark.parametrize("index", range(len(cases.MM)), ids=cases.MM)
def test_scaled_mm_on_device(index, poisoned):
    from xvendor import numerics
    name, a, b, sa, r, sb, bias, odt, _ = cases.mm_cases(
        torch.Generator().manual_seed(_GEN_SEED))[index]
    out = poisoned.KERNELS["scaled_mm"](_dev(a), _dev(b), _dev(sa), r, _dev(sb), r, 0, 0,
                                        _dev(bias), odt).cpu()
    exact = numerics.scaled_mm(a, b, sa, r, sb, r, bias)
    bound = numerics.scaled_mm(cases._abs_codes(a), cases._abs_codes(b), sa, r, sb, r)
    if bias is not None:
        bound = bound + bias.double().abs()
    k = a.shape[1] * (2 if a.dtype == cases.FP4 else 1)
    assert not out.isnan().any(), f"{name}: NaN poison left"
    assert cases._judge(out, exact, bound, k, odt) <= 1.0, f"{name}, seed {_GEN_SEED}"


@needs_gpu
@pytest.mark.parametrize("index", range(len(cases.GROUPED)), ids=cases.GROUPED)
def test_scaled_grouped_mm_on_device(index, poisoned):
    from xvendor import numerics
    name, a, b, sa, r, sb, offs, odt = cases.grouped_cases(
        torch.Generator().manual_seed(_GEN_SEED))[index]
    out = poisoned.KERNELS["scaled_grouped_mm"](_dev(a), _dev(b), _dev(sa), r, _dev(sb), r,
                                                _dev(offs), 0, 0, odt).cpu()
    exact = numerics.scaled_grouped_mm(a, b, sa, r, sb, offs)
    bound = numerics.scaled_grouped_mm(cases._abs_codes(a), cases._abs_codes(b), sa, r, sb, offs)
    k = a.shape[1] * (2 if a.dtype == cases.FP4 else 1)
    assert not out.isnan().any(), f"{name}: NaN poison left"
    assert cases._judge(out, exact, bound, k, odt) <= 1.0, f"{name}, seed {_GEN_SEED}"
    if b.dim() == 3 and int(offs[-1]) < out.shape[0]:
        assert out[int(offs[-1]):].abs().max() == 0, "rows past offs[-1] must be zeros"
