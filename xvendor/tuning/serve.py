"""Serve tuned winners to the dispatch layer, and capture the problems seen at run time.

``hook`` is the registry's tuned-winner hook factory (the registry names it as the string
``"xvendor.tuning.serve:hook"``; NOTE [tuned-winner hook] in ``xvendor.registry``). The
registry calls it on its first decision miss after import or ``reset()``; it returns
``lookup`` only when a table exists for a present chip or capture is on, so otherwise
shape classes are never computed and the eager hot path pays nothing. The registry calls
``lookup`` once per new (op, device, dtype, shape class) and caches the decision, config
included: serving costs a table lookup on a miss and nothing afterwards. Backend ``"*"``
asks for the best backend of the problem; a backend's own name asks for its tuned config,
which the registry hands to the kernel as ``config=``.

``XVENDOR_TUNE=capture`` records every problem key seen (one per distinct shape class)
and writes them at exit to ``$XVENDOR_TUNE_CAPTURE`` (default:
``<tuning dir>/captured-<pid>.json``), the input of ``xvendor tune --from``.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from .. import devices
from .problem import SHAPE_CLASS, ProblemKey, from_shape_class
from .store import SHIPPED, TuningStore, Winner, tuning_dir

ANY_BACKEND = "*"
_stores: dict[tuple, TuningStore] = {}
_captured: dict[str, dict] = {}


def store_for(info: devices.DeviceInfo) -> TuningStore:
    """The chip's table; per tuning directory, so a changed ``XVENDOR_TUNING_DIR`` is seen."""
    key = (info.arch, info.cu_count, tuning_dir())
    st = _stores.get(key)
    if st is None:
        st = _stores[key] = TuningStore(info.arch, info.cu_count)
    return st


def clear_stores() -> None:
    """Forget the tables read so far: the next lookup reads them from disk again."""
    _stores.clear()


def _key(op, info, dtype, shape_class, backend=ANY_BACKEND) -> ProblemKey:
    return from_shape_class(op, backend, info.arch, info.cu_count, info.product, dtype,
                            shape_class)


def lookup(op: str, info: devices.DeviceInfo, dtype, shape_class,
           backend: str = ANY_BACKEND) -> tuple[str, dict] | None:
    """The registry's lookup: (backend, config) tuned for this problem, or None."""
    if shape_class is None or op not in SHAPE_CLASS:
        return None
    key = _key(op, info, dtype, shape_class, backend)
    if _capturing() and backend == ANY_BACKEND:
        _captured[str(key)] = {"op": op, "device": str(info.device), "arch": info.arch}
    winner = store_for(info).get(key)
    return (winner.backend, winner.config) if winner is not None else None


def config_for(backend: str, op: str, info: devices.DeviceInfo, dtype,
               shape_class) -> Winner | None:
    """A backend's tuned config for this problem (None: it runs its default)."""
    return store_for(info).get(_key(op, info, dtype, shape_class, backend))


def _capturing() -> bool:
    return os.environ.get("XVENDOR_TUNE") == "capture"


def clear_capture() -> None:
    """Forget the problem keys captured so far (a new capture starts empty)."""
    _captured.clear()


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


def hook():
    """The registry's hook factory: ``lookup`` when there is something to serve or capture,
    else None. Runs again after every ``registry.reset()``: the stores are re-read."""
    clear_stores()
    if _capturing():
        if not _atexit_registered:
            atexit.register(write_capture)
            _atexit_registered.append(True)
        return lookup
    for d in devices.present_devices():
        info = devices.detect(d)
        name = f"{info.arch}-{info.cu_count}cu.json"
        if (tuning_dir() / name).is_file() or (SHIPPED / name).is_file() \
                or (SHIPPED / f"{info.arch}-anycu.json").is_file():
            return lookup
    return None


_atexit_registered: list = []


def captured_keys(path: str | Path) -> list[ProblemKey]:
    return [ProblemKey.parse(k) for k in json.loads(Path(path).read_text())["keys"]]
