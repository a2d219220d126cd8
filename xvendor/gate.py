"""The correctness gate: no kernel is trusted on a device until it has matched the reference.

NOTE [correctness gate] (DESIGN.md): a backend whose record names ``gate_identity``
("module:function" -> ``fn(op, device_info, dtype) -> str``, the kernel's template, config
and toolchain version) is not trusted on a device until it has matched the reference
there. The first call of a decision whose (backend, op, identity, arch, dtype) has no
verdict runs the kernel and ``reference.py`` on the same arguments and compares them
(normwise relative error within the output dtype's tolerance). A pass swaps the plain
kernel into the decision (later calls cost nothing extra); a failure raises
``GateFailure`` into the usual fallback (one warning, next candidate). Verdicts persist
as JSON under ``$XVENDOR_CACHE_DIR/gate`` (default ``~/.cache/xvendor/gate``), so a
failing kernel is never chosen again on that arch, in any process; verdicts are read
only when a decision is created, never per call. An empty output proves nothing and
leaves the verdict open.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Callable

from . import devices

__all__ = ["Gate", "GateFailure", "compare"]


class GateFailure(RuntimeError):
    """A gated kernel's first use on a device disagreed with the reference."""


class Gate:
    """Verdicts of gated kernels: in memory, and one JSON file per verdict on disk."""

    def __init__(self, backend_record: Callable):
        self.verdicts: dict[tuple, dict] = {}
        self._record_of = backend_record  # name -> Backend record (the registry's table)

    @staticmethod
    def directory() -> Path:
        root = os.environ.get("XVENDOR_CACHE_DIR") or Path.home() / ".cache" / "xvendor"
        return Path(root) / "gate"

    def key(self, b, op: str, dev: devices.DeviceInfo, dtype) -> tuple | None:
        if not b.gate_identity:
            return None
        mod, _, fn = b.gate_identity.partition(":")
        ident = getattr(importlib.import_module(mod), fn)(op, dev, dtype)
        return (b.name, op, str(ident), dev.arch, str(dtype).removeprefix("torch."))

    def _path(self, key: tuple) -> Path:
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
        return self.directory() / f"{digest}.json"

    def verdict(self, key: tuple) -> dict | None:
        hit = self.verdicts.get(key)
        if hit is None:
            try:
                hit = json.loads(self._path(key).read_text())
            except (OSError, ValueError):
                return None
            self.verdicts[key] = hit
        return hit

    def record(self, key: tuple, ok: bool, detail: str) -> None:
        rec = {"key": list(key), "ok": ok, "detail": detail,
               "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self.verdicts[key] = rec
        try:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(rec))
            tmp.replace(path)
        except OSError as e:  # a read-only cache keeps the verdict for this process only
            warnings.warn(f"xvendor: could not persist the correctness verdict {key}: {e}",
                          stacklevel=3)

    def failed_reason(self, b, op: str, dev: devices.DeviceInfo, dtype) -> str | None:
        if not b.gate_identity:
            return None
        key = self.key(b, op, dev, dtype)
        v = self.verdict(key)
        if v is None or v["ok"]:
            return None
        return (f"kernel {key[2]} failed its correctness check against the reference on "
                f"{dev.arch} ({v['when']}): {v['detail']}; it is not chosen again "
                f"(verdict in {self._path(key)})")

    def wrap(self, dec, kernel: Callable) -> Callable:
        """The decision's kernel: plain when verdict 'pass', else a first-use check."""
        b = self._record_of(dec.backend)
        key = self.key(b, dec.op, dec.device, dec.dtype) if b is not None else None
        if key is None or (self.verdict(key) or {}).get("ok"):
            return kernel

        def checked(*args):
            out = kernel(*args)
            ok, detail = compare(dec.op, out, args)
            if ok is None:  # nothing to compare (empty output): no verdict yet
                return out
            self.record(key, ok, detail)
            if ok:
                dec.kernel = kernel  # later calls skip the check
                return out
            raise GateFailure(f"xvendor.{dec.op}: backend {dec.backend!r} kernel {key[2]} "
                              f"disagrees with the reference on {dec.device.arch} "
                              f"({dec.dtype}): {detail}")
        return checked


def compare(op: str, out, args: tuple) -> tuple[bool | None, str]:
    """(ok, detail) of a kernel output against ``reference.py`` on the same arguments."""
    from . import reference
    from .numerics import TOLERANCE, rel_error
    ref = reference.KERNELS[op](*args)
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    if len(outs) != len(refs) or any(o.shape != r.shape for o, r in zip(outs, refs)):
        return False, (f"output shapes {[tuple(o.shape) for o in outs]} != reference "
                       f"{[tuple(r.shape) for r in refs]}")
    if all(r.numel() == 0 for r in refs):
        return None, "empty output"
    for o, r in zip(outs, refs):
        if not r.is_floating_point():
            continue  # indices (topk) may differ on ties; the values decide
        err, tol = rel_error(o, r), TOLERANCE.get(r.dtype, 1.6e-2)
        if not err <= tol:
            return False, f"normwise relative error {err:.3g} > tolerance {tol:.1g}"
    return True, "matches the reference"

