"""l2: the compiled triton kernels on a real CUDA/ROCm device, same cases as the interpreter.

Skipped with a reason where no device is present (CI runners, this machine). Uses the
interpreter suite's shapes and tolerances (``interpreter_cases.py``), on the device, with
the arch's default config (and once with a given non-default one, as a tuned config is
served); outputs NaN-poisoned before the kernels write them.
"""

import importlib.util
import os
from pathlib import Path

import pytest
import torch

import xvendor

pytestmark = pytest.mark.l2

_spec = importlib.util.spec_from_file_location(
    "xvendor_interpreter_cases_gpu", Path(__file__).resolve().parent / "interpreter_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
    reason=f"no CUDA/ROCm device (torch {torch.__version__}, cuda={torch.version.cuda}, "
           f"hip={torch.version.hip}) or TRITON_INTERPRET is set")


def _dev(t):
    return None if t is None else t.to("cuda")


@pytest.fixture
def poisoned(monkeypatch):
    from xvendor.triton import backend
    monkeypatch.setattr(backend, "POISON_OUTPUTS", True)


def _check(out, ref, out_dtype, k):
    rec = cases._compare(out.cpu(), ref.cpu(), out_dtype, k)
    assert rec["nans"] == 0 and rec["worst_err_over_tol"] <= 1.0, rec


@needs_gpu
@pytest.mark.parametrize("case", cases.gemm_cases(), ids=lambda c: c[0])
def test_gemm_on_device(case, poisoned):
    _, a, b, bias, out_dtype = case
    a, b, bias = _dev(a), _dev(b), _dev(bias)
    out = xvendor.gemm(a, b, bias, out_dtype, backend="triton")
    ref = xvendor.gemm(a.double(), b.double(), None if bias is None else bias.double(),
                       backend="reference")
    _check(out, ref, out_dtype or a.dtype, a.shape[1])


@needs_gpu
@pytest.mark.parametrize("case", cases.grouped_cases(), ids=lambda c: c[0])
def test_grouped_mm_on_device(case, poisoned):
    _, a, b, offs, bias, out_dtype = case
    a, b, offs, bias = _dev(a), _dev(b), _dev(offs), _dev(bias)
    out = xvendor.grouped_mm(a, b, offs, bias, out_dtype, backend="triton")
    ref = xvendor.grouped_mm(a.double(), b.double(), offs,
                             None if bias is None else bias.double(), backend="reference")
    _check(out, ref, out_dtype or a.dtype, a.shape[-1])


@needs_gpu
def test_moe_sized_grouped_mm_on_device(poisoned):
    # a realistic MoE forward: 8 experts, ragged, with an empty expert and a tail
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4000, 512, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(8, 512, 768, device="cuda", dtype=torch.bfloat16, generator=g)
    offs = torch.tensor([300, 300, 1100, 1900, 2500, 3100, 3500, 3900], dtype=torch.int32,
                        device="cuda")
    out = xvendor.grouped_mm(a, w, offs, backend="triton")
    ref = xvendor.grouped_mm(a.double(), w.double(), offs, backend="reference")
    _check(out, ref, torch.bfloat16, 512)


@needs_gpu
def test_gemm_serves_the_given_config_on_device(poisoned, monkeypatch):
    # A tuned config (Config.to_dict(), as the dispatch layer passes it) is what launches.
    from xvendor import devices, numerics
    from xvendor.triton import backend, configs, launch
    info = devices.detect(torch.device("cuda"))
    arch = info.arch if info.arch in configs.SPACES else ("sm_90" if info.vendor == "nvidia"
                                                          else "gfx942")
    default = configs.default(info.arch, "gemm", info.vendor)
    cfg = next(c for c in configs.SPACES[arch]["gemm"] if c != default)
    seen = []
    orig = launch.gemm_launch

    def spy(*args, **kwargs):
        built = orig(*args, **kwargs)
        seen.append((args[4], built[1]))
        return built
    monkeypatch.setattr(launch, "gemm_launch", spy)
    a = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 700, device="cuda", dtype=torch.bfloat16)
    out = backend.gemm(a, b, config=cfg.to_dict())
    assert seen == [(cfg, (-(-1000 // cfg.block_m) * -(-700 // cfg.block_n),))]
    err = numerics.rel_error(out, numerics.gemm(a, b))
    assert err <= numerics.TOLERANCE[torch.bfloat16], err
