"""Export tuned winners as FlyDSL offline-config artifacts, so users of FlyDSL's own
``@autotune(..., artifact_name=...)`` kernels get them through ``FLYDSL_AUTOTUNE_CONFIG_DIR``.

FlyDSL (0.3.4.1) looks a config up at ``<dir>/<artifact_name>-<sha256>.json``, where the
digest is over the canonical JSON of the identity
``{"name": artifact_name, "key": {arg: value}, "device": {"name", "arch", "compute_units"}}``
(shapes as lists), and reads ``{"version": 1, "identity": ..., "config": {...}}``, whose
config holds the kernel's constexpr kwargs plus ``num_warps`` / ``waves_per_eu`` /
``maxnreg``. The l1 test loads what this writes through FlyDSL's own loader.

What that loader accepts (``flydsl.autotune.Autotuner._load_artifact`` /
``_decode_artifact_config``, read for 0.3.4.1): any JSON object whose entries are keyword
arguments of the kernel (ints, floats, strings and bools, each checked against the
parameter's annotation), none of them a key axis, with integer compiler options. Every
FlyDSL op xvendor tunes fits it: the GEMM family's tiles, RMSNorm's and its backward's
``vec``/``rows``/``waves``, topk's ``form`` (a string)/``vec``/``waves``/``k_max``; nothing
is refused for its shape. The key axes are the problem key's: ``M``, ``N``, ``K``, ``G``,
``dtype``, ``layout``; for rms_norm and rms_norm_backward M is the rows and N the hidden
size (K = G = 0), for topk M the rows, N the row length and K the k (layout "rows",
``xvendor.rocm.tunable.problem_key``).
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


def write_artifact(config_dir: str | Path, artifact_name: str, ident: dict, config: dict,
                   provenance: dict | None = None) -> Path:
    """Write one artifact atomically; returns its path. ``provenance`` (who measured it, or
    that it is a prediction) rides beside ``config``: FlyDSL's loader reads only
    ``version``, ``identity`` and ``config`` (checked by the l1 test)."""
    digest = hashlib.sha256(_canonical(ident).encode()).hexdigest()
    directory = Path(config_dir)
    path = directory / f"{artifact_name}-{digest}.json"
    payload = {"version": ARTIFACT_VERSION, "identity": ident, "config": dict(config)}
    if provenance:
        payload["provenance"] = provenance
    _canonical(payload)  # refuses NaN/inf and non-JSON values before anything is written
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


class NothingToExport(ValueError):
    """The store holds no winner of the backend for this chip; nothing was written."""


def winners(store, backend: str = "flydsl", product: str | None = None) -> list[tuple]:
    """(key, winner, device product) of every ``backend`` winner for the store's chip:
    entries tuned on it, then the shipped predictions for its arch (``any_cu``) that no
    tuned entry replaces. A prediction needs the chip's CU count (``store.cus``) and
    ``product`` for its device identity; without them it is left out."""
    from .problem import ProblemKey
    found, seen = [], set()
    for text, w in sorted(store.entries.items()):
        key = ProblemKey.parse(text)
        if w.backend == backend and key.backend == backend:
            found.append((key, w, key.product))
            seen.add((key.op, key.layout, key.m, key.n, key.k, key.groups, key.dtype))
    if store.cus and product:
        for text, w in sorted(store.any_cu.items()):
            key = ProblemKey.parse(text)
            shape = (key.op, key.layout, key.m, key.n, key.k, key.groups, key.dtype)
            if w.backend == backend and key.backend == backend and shape not in seen:
                found.append((ProblemKey(**{**key.__dict__, "cus": store.cus,
                                            "product": product}), w, product))
    return found


def export_store(store, directory: str | Path, backend: str = "flydsl",
                 product: str | None = None) -> list[Path]:
    """Every ``backend`` winner of a tuning store (``winners``) as a FlyDSL artifact.

    Artifact names are ``xvendor-<op>``; the key names are the problem's axes (``M``, ``N``,
    ``K``, ``G``, ``dtype``, ``layout``), the device identity the store's exact chip. A
    FlyDSL kernel declared with ``@autotune(key=[...], artifact_name="xvendor-<op>")`` over
    the same axes picks them up through ``FLYDSL_AUTOTUNE_CONFIG_DIR``. Each artifact says
    whether its config was measured or predicted. Raises ``NothingToExport`` (and writes
    nothing) when there is no winner: an empty artifact directory would look like a
    successful export.
    """
    chosen = winners(store, backend, product)
    if not chosen:
        raise NothingToExport(
            f"no {backend} winner for {store.arch} with {store.cus} CUs: nothing tuned on "
            f"that chip (xvendor tune on it) and no shipped prediction usable for it"
            + ("" if store.cus and product else " (predictions need the chip's CU count "
               "and product name for FlyDSL's device identity)"))
    written = []
    for key, winner, device_name in chosen:
        name = f"xvendor-{key.op.replace('_', '-')}"
        axes = {"M": key.m, "N": key.n, "K": key.k, "G": key.groups, "dtype": key.dtype,
                "layout": key.layout}
        ident = identity(name, axes, device_name, key.arch, key.cus)
        config = {k: v for k, v in winner.config.items() if isinstance(v, (int, float, str, bool))}
        prov = {"kind": winner.provenance.get("kind", "measured" if winner.measured_us
                                              else "predicted"),
                "config_name": winner.config_name, "measured_us": winner.measured_us,
                "predicted_us": winner.predicted_us}
        written.append(write_artifact(directory, name, ident, config, prov))
    return written
