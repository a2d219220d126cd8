"""Serve tuned winners to the dispatch layer, and capture the problems seen at run time.

``install()`` puts ``lookup`` into the registry's tuned-winner hook. The registry calls it
once per new (op, device, dtype, shape class) and caches the decision, so serving costs a
dictionary lookup on a miss and nothing afterwards. Winners are keyed with backend "*"
(the best backend for the problem); a backend that has per-config winners asks
``config_for`` with its own name when it builds its launch.

``XVENDOR_TUNE=capture`` records every problem key seen (one per distinct shape class)
and writes them at exit to ``$XVENDOR_TUNE_CAPTURE`` (default:
``<tuning dir>/captured-<pid>.json``), the input of ``xvendor tune --from``.

The hook is installed by ``install_if_useful()`` (at ``import xvendor``) only when a table
exists for a present chip or capture is on: otherwise shape classes are never computed
and the eager hot path pays nothing.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from .. import devices, registry
from .problem import ProblemKey, from_shape_class
from .store import SHIPPED, TuningStore, Winner, tuning_dir

ANY_BACKEND = "*"
_stores: dict[tuple[str, int], TuningStore] = {}
_captured: dict[str, dict] = {}


def store_for(info: devices.DeviceInfo) -> TuningStore:
    key = (info.arch, info.cu_count)
    st = _stores.get(key)
    if st is None:
        st = _stores[key] = TuningStore(info.arch, info.cu_count)
    return st


def _key(op, info, dtype, shape_class, backend=ANY_BACKEND) -> ProblemKey:
    return from_shape_class(op, backend, info.arch, info.cu_count, info.product, dtype,
                            shape_class)


def lookup(op: str, info: devices.DeviceInfo, dtype, shape_class) -> str | None:
    """The registry hook: the tuned backend for this problem, or None."""
    if shape_class is None or op not in ("gemm", "grouped_mm"):
        return None
    key = _key(op, info, dtype, shape_class)
    if _capturing():
        _captured[str(key)] = {"op": op, "device": str(info.device), "arch": info.arch}
    winner = store_for(info).get(key)
    return winner.backend if winner is not None else None


def config_for(backend: str, op: str, info: devices.DeviceInfo, dtype,
               shape_class) -> Winner | None:
    """A backend's tuned config for this problem (None: use its default)."""
    return store_for(info).get(_key(op, info, dtype, shape_class, backend))


def _capturing() -> bool:
    return os.environ.get("XVENDOR_TUNE") == "capture"


def capture_file() -> Path:
    return Path(os.environ.get("XVENDOR_TUNE_CAPTURE")
                or tuning_dir() / f"captured-{os.getpid()}.json")


def write_capture() -> Path | None:
    if not _captured:
        return None
    path = capture_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"keys": sorted(_captured)}, indent=1))
    os.replace(tmp, path)
    return path


def install() -> None:
    registry.set_tuned_lookup(lookup)
    if _capturing():
        atexit.register(write_capture)


def install_if_useful() -> bool:
    """Install the hook when a table exists for a present chip, or capture is on."""
    if _capturing():
        install()
        return True
    for d in devices.present_devices():
        info = devices.detect(d)
        name = f"{info.arch}-{info.cu_count}cu.json"
        if (tuning_dir() / name).is_file() or (SHIPPED / name).is_file():
            install()
            return True
    return False


def captured_keys(path: str | Path) -> list[ProblemKey]:
    return [ProblemKey.parse(k) for k in json.loads(Path(path).read_text())["keys"]]
