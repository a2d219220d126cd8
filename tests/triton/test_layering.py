"""The Triton modules sit below the dispatch layer and the tuner (l0 for the static check).

``backend``, ``launch``, ``crosscompile``, ``configs`` and ``kernels`` must not import
``xvendor.tuning``, ``xvendor.registry`` or ``xvendor.ops``: the tuner's sweep imports
the cross-compiler, and the registry loads the backend, so an import the other way makes a
cycle. ``tunable`` is the tuner's view of the backend and may import ``xvendor.tuning``,
but not the dispatch layer. The import statements are checked package-wide by
tests/testing/test_layers.py; here the modules are imported and run in a fresh interpreter,
which also catches an import made through ``importlib`` or a helper.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(importlib.util.find_spec("xvendor").origin).parent / "triton"  # the xvendor under test
ROOT = PKG.parents[1]
UPPER = ("xvendor.tuning", "xvendor.registry", "xvendor.ops")
BELOW = ("backend", "record", "launch", "crosscompile", "configs", "kernels", "scaled_kernels",
         "scaled_configs", "scaled_launch")
ALLOWED = {"tunable": ("xvendor.tuning",)}


def _forbidden(module: str) -> tuple[str, ...]:
    allowed = ALLOWED.get(module, ())
    return tuple(u for u in UPPER if u not in allowed)


def _hits(names, forbidden):
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden))


@pytest.mark.l0
def test_every_module_is_covered():
    assert {p.stem for p in PKG.glob("*.py")} - {"__init__"} == set(BELOW) | set(ALLOWED)


# Run in a fresh interpreter. The package ``xvendor`` is stood up bare (its __init__ imports
# the dispatch layer itself, which would hide what the module under test imports); then
# the module is imported and its lazy paths run: the templates, the probe, the launch
# builders on meta tensors, the tunable's object.
_CHILD = r"""
import importlib, json, sys, types
root, name = sys.argv[1], sys.argv[2]
pkg = types.ModuleType("xvendor")
pkg.__path__ = [root + "/xvendor"]
sys.modules["xvendor"] = pkg
mod = importlib.import_module("xvendor.triton." + name)
if name in ("backend", "launch", "crosscompile"):
    import torch
    from xvendor.triton import configs, crosscompile, launch
    launch.interpreting()
    for template in crosscompile.PROBLEMS:
        crosscompile.launch_for(template, configs.DEFAULTS["gfx950"]["gemm"], "hip")
    crosscompile.source_hash("gemm")
if name == "backend":
    mod.probe()
if name == "tunable":
    mod.TUNABLE.candidates, mod.TUNABLE.run
print(json.dumps(sorted(m for m in sys.modules if m.startswith("xvendor"))))
"""


@pytest.mark.l1
@pytest.mark.parametrize("module", BELOW + tuple(ALLOWED))
def test_importing_pulls_in_nothing_above(module):
    pytest.importorskip("triton")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), module], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert f"xvendor.triton.{module}" in loaded
    assert not _hits(loaded, _forbidden(module)), f"importing {module} loaded them"
    if module == "tunable":  # the check would pass vacuously if tunable stopped using them
        assert "xvendor.tuning.sweep" in loaded and "xvendor.tuning.tuner" in loaded
