"""NOTE [a torch-free control plane] (xvendor/distributed/__init__): the protocol's modules
import without torch, so that a process that only speaks the protocol (the simulator's
shards, bench/sim_members.py) does not load it; the package's public names still resolve."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.l1

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r"""
import sys, types
pkg = types.ModuleType("xvendor")  # a bare package: xvendor/__init__ itself imports torch
pkg.__path__ = [sys.argv[1] + "/xvendor"]
pkg.__version__ = "0"
sys.modules["xvendor"] = pkg
from xvendor.distributed import control, membership, storekv, storeserver, storewire, wire
rec = control.decode_record(control.encode_record({"members": list(range(10)), "epoch": 0}))
assert rec["members"] == list(range(10))
assert membership.decode_plan(membership.encode_plan(0, [1, 2], 3), 3) == (0, [1, 2])
h = wire.hello("t", "n", lane=0, replica="r", restart=0, fingerprint=None, versions=("0", "x"))
assert h["torch"] == "x"
print("torch" in sys.modules)
"""


def test_the_control_plane_imports_without_torch():
    out = subprocess.run([sys.executable, "-c", PROBE, ROOT], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stdout


def test_the_package_names_still_resolve():
    import xvendor.distributed as xd
    from xvendor.distributed import Coordinator, ResilientGroup, Timing  # noqa: F401
    assert set(xd.__all__) <= set(dir(xd))
    for name in xd.__all__:
        assert getattr(xd, name) is not None
    with pytest.raises(AttributeError):
        xd.no_such_name
