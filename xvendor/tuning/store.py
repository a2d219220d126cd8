"""Persistent tuned winners: one JSON file per (exact arch, CU count), in the user's tuning
dir (``$XVENDOR_TUNING_DIR``, else ``~/.cache/xvendor/tuning``), over tables shipped in
the package (``xvendor/tuning/tables/``, analytical predictions until measured).

Rules:
- writes are atomic (temp file + ``os.replace``) and serialized across processes with an
  ``fcntl`` lock on a side file, so several ranks tuning at once neither tear a file nor
  lose each other's entries (read-merge-write under the lock);
- a corrupted, truncated or other-version file is ignored with one warning, never a crash;
- a file whose recorded arch or CU count differs from its name's is refused: a config
  is never served for another chip;
- each entry records who measured it (device, date, versions) or that it is a prediction.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .problem import KEY_VERSION, ProblemKey

FILE_VERSION = 1
SHIPPED = Path(__file__).with_name("tables")


@dataclass
class Winner:
    backend: str
    config: dict
    config_name: str
    measured_us: float | None = None  # None: an analytical prediction only
    predicted_us: float | None = None
    provenance: dict = field(default_factory=dict)  # kind, device, date, versions

    @property
    def measured(self) -> bool:
        return self.provenance.get("kind") == "measured"


def tuning_dir() -> Path:
    return Path(os.environ.get("XVENDOR_TUNING_DIR")
                or Path.home() / ".cache" / "xvendor" / "tuning")


def _file_name(arch: str, cus: int) -> str:
    return f"{arch}-{cus}cu.json"


_warned: set[str] = set()


def _warn_once(path: Path, why: str) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        warnings.warn(f"xvendor tuning: ignoring {path}: {why}", stacklevel=3)


def read_table(path: Path, arch: str, cus: int) -> dict[str, Winner]:
    """The entries of one table file; {} (with one warning) when it cannot be trusted."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        _warn_once(path, f"unreadable or corrupted ({type(e).__name__}: {e})")
        return {}
    if not isinstance(data, dict) or data.get("version") != FILE_VERSION \
            or data.get("key_version") != KEY_VERSION:
        _warn_once(path, f"written by another version (file {data.get('version') if isinstance(data, dict) else '?'}, "
                         f"key {data.get('key_version') if isinstance(data, dict) else '?'}; "
                         f"this is file {FILE_VERSION}, key {KEY_VERSION})")
        return {}
    if data.get("arch") != arch or data.get("cus") != cus:
        _warn_once(path, f"it holds configs for {data.get('arch')} with {data.get('cus')} CUs, "
                         f"not {arch} with {cus}: refused (never a config for another chip)")
        return {}
    out = {}
    for key, raw in data.get("entries", {}).items():
        try:
            pk = ProblemKey.parse(key)
            if pk.arch != arch or pk.cus != cus:
                continue
            out[key] = Winner(**raw)
        except (TypeError, ValueError):
            _warn_once(path, f"malformed entry {key!r}")
    return out


class TuningStore:
    """Winners for one exact chip: user entries over shipped predictions."""

    def __init__(self, arch: str, cus: int, directory: Path | None = None):
        self.arch, self.cus = arch, cus
        self.path = Path(directory or tuning_dir()) / _file_name(arch, cus)
        self.entries = {**read_table(SHIPPED / _file_name(arch, cus), arch, cus),
                        **read_table(self.path, arch, cus)}
        # Predictions shipped for every CU count of this exact arch (keys with cus 0, "*").
        self.any_cu = read_table(SHIPPED / f"{arch}-anycu.json", arch, 0)

    def get(self, key: ProblemKey) -> Winner | None:
        hit = self.entries.get(str(key))
        if hit is None and self.any_cu:
            generic = ProblemKey(**{**key.__dict__, "cus": 0, "product": "*"})
            hit = self.any_cu.get(str(generic))
        return hit

    def put(self, key: ProblemKey, winner: Winner) -> None:
        """Record ``winner`` for ``key``, merging with what other processes wrote meanwhile."""
        if key.arch != self.arch or key.cus != self.cus:
            raise ValueError(f"xvendor tuning: key for {key.arch}/{key.cus} CUs does not belong "
                             f"in the table of {self.arch}/{self.cus} CUs")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_suffix(".lock")
        with open(lock, "a") as lf:
            fcntl.flock(lf, fcntl.LOCK_EX)
            try:
                current = read_table(self.path, self.arch, self.cus)
                current[str(key)] = winner
                payload = {"version": FILE_VERSION, "key_version": KEY_VERSION,
                           "arch": self.arch, "cus": self.cus,
                           "entries": {k: asdict(w) for k, w in sorted(current.items())}}
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name,
                                           suffix=".tmp")
                with os.fdopen(fd, "w") as f:
                    json.dump(payload, f, indent=1)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            finally:
                fcntl.flock(lf, fcntl.LOCK_UN)
        self.entries[str(key)] = winner
