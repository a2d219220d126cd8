"""The SYCL backend sits below the dispatch layer and the tuner.

``backend`` (and what it imports: ``runtime``, ``tensors``, ``environment``, ``shim``) must
not import ``xvendor.tuning``, ``xvendor.registry`` or ``xvendor.ops``: the registry loads
the backend, and the tuner loads its ``TUNABLE``; a tuned tile reaches a kernel as its
``config=`` argument, never by the backend looking it up. The import statements are
checked package-wide by tests/testing/test_layers.py; here the backend is imported and run
in a fresh interpreter, with every lazy path taken (probe, both tunable calls, a gemm with
a config).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(importlib.util.find_spec("xvendor").origin).parent / "xpu"  # the xvendor under test
ROOT = PKG.parents[1]
UPPER = ("xvendor.tuning", "xvendor.registry", "xvendor.ops")


# The package ``xvendor`` is stood up bare: its __init__ imports the dispatch layer itself,
# which would hide what the backend imports.
_CHILD = r"""
import importlib, json, sys, types
root = sys.argv[1]
pkg = types.ModuleType("xvendor")
pkg.__path__ = [root + "/xvendor"]
sys.modules["xvendor"] = pkg
backend = importlib.import_module("xvendor.xpu.backend")
tunable = importlib.import_module("xvendor.xpu.tunable")
assert backend.probe() is None, backend.probe()
import torch
cands = tunable.TUNABLE.candidates("gemm", None, None)
config = next(c.config for c in cands if c.name == "wg8x16_r4x4_k64")
a, b = torch.randn(20, 30), torch.randn(30, 10)
out = tunable.TUNABLE.run("gemm", config, (a, b, None, None))
torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
assert backend.last_gemm_tile["WM"] == 8
print(json.dumps(sorted(m for m in sys.modules if m.startswith("xvendor"))))
"""


@pytest.mark.l1
def test_importing_and_running_pulls_in_nothing_above(sycl_device):
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT)], env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.splitlines()[-1])
    assert "xvendor.xpu.backend" in loaded
    assert not [m for m in loaded if m.startswith(UPPER)], loaded
