"""The drills (``drills/`` at the repository root, outside the package) importable here, in
the agent's forkserver (it inherits this ``sys.path``) and in the worker processes the tests
start (``PYTHONPATH``)."""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
_paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
if ROOT not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in _paths if p])
