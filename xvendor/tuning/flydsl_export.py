"""Export tuned winners as FlyDSL offline-config artifacts, so users of FlyDSL's own
``@autotune(..., artifact_name=...)`` kernels get them through ``FLYDSL_AUTOTUNE_CONFIG_DIR``.

FlyDSL (0.3.4.1) looks a config up at ``<dir>/<artifact_name>-<sha256>.json``, where the
digest is over the canonical JSON of the identity
``{"name": artifact_name, "key": {arg: value}, "device": {"name", "arch", "compute_units"}}``
(shapes as lists), and reads ``{"version": 1, "identity": ..., "config": {...}}``, whose
config holds the kernel's constexpr kwargs plus ``num_warps`` / ``waves_per_eu`` /
``maxnreg``. The l1 test loads what this writes through FlyDSL's own loader.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

ARTIFACT_VERSION = 1


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _jsonable(value):
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return value


def identity(artifact_name: str, key: dict, device_name: str, arch: str, compute_units: int) -> dict:
    return {"name": artifact_name, "key": {k: _jsonable(v) for k, v in key.items()},
            "device": {"name": device_name, "arch": arch, "compute_units": int(compute_units)}}


def write_artifact(config_dir: str | Path, artifact_name: str, ident: dict, config: dict) -> Path:
    """Write one artifact atomically; returns its path."""
    digest = hashlib.sha256(_canonical(ident).encode()).hexdigest()
    directory = Path(config_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{artifact_name}-{digest}.json"
    payload = {"version": ARTIFACT_VERSION, "identity": ident, "config": dict(config)}
    _canonical(payload)  # refuses NaN/inf and non-JSON values before anything is written
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def export_store(store, directory: str | Path, backend: str = "flydsl") -> list[Path]:
    """Every ``backend`` winner of a tuning store as a FlyDSL artifact in ``directory``.

    Artifact names are ``xvendor-<op>``; the key names are the problem's axes (``M``, ``N``,
    ``K``, ``G``, ``dtype``, ``layout``), the device identity the store's exact chip. A
    FlyDSL kernel declared with ``@autotune(key=[...], artifact_name="xvendor-<op>")`` over
    the same axes picks them up through ``FLYDSL_AUTOTUNE_CONFIG_DIR``.
    """
    from .problem import ProblemKey
    written = []
    for text, winner in sorted(store.entries.items()):
        key = ProblemKey.parse(text)
        if winner.backend != backend or key.backend != backend:
            continue
        name = f"xvendor-{key.op.replace('_', '-')}"
        axes = {"M": key.m, "N": key.n, "K": key.k, "G": key.groups, "dtype": key.dtype,
                "layout": key.layout}
        ident = identity(name, axes, key.product, key.arch, key.cus)
        config = {k: v for k, v in winner.config.items() if isinstance(v, (int, float, str, bool))}
        written.append(write_artifact(directory, name, ident, config))
    return written
