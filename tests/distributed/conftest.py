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


import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402


def _wait_for(cond, timeout_s: float = 10.0, what: str = "") -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.fixture
def wait_for():
    """``wait_for(cond, timeout_s=10.0, what="")``: until ``cond()`` is true, or fail."""
    return _wait_for


@pytest.fixture
def coord(request):
    """Coordinators on 127.0.0.1 (any port) with the requesting module's ``TOKEN``, each
    served on a thread and closed after the test: ``coord(**kw)`` makes one (keywords as
    ``Coordinator``'s; no straggler eviction unless ``straggler`` is given). After the
    test, checks that no coordinator logged the token."""
    from xvendor.distributed.coordinator import Coordinator
    from xvendor.distributed.coordinator import StragglerPolicy

    token, made, logged = request.module.TOKEN, [], []

    def make(**kw):
        kw.setdefault("straggler", StragglerPolicy(0, 0))
        kw.setdefault("log", logged.append)
        c = Coordinator(token, "127.0.0.1", 0, **kw)
        threading.Thread(target=c.serve, daemon=True).start()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
    assert not any(token in line for line in logged), "the token was logged"
