"""The correctness gate: no kernel is trusted on a device until it has matched the reference.

NOTE [correctness gate]: a backend whose record names ``gate_identity``
("module:function" -> ``fn(op, device_info, dtype, args, config) -> str``) is not trusted
on a device until it has matched the reference there. The identity names the compiled
specialization a call runs: template, config, operand layout/majors, bias, output dtype,
input dtype and toolchain version (whatever selects a different code object), so a
passing forward 2Dx3D call vouches for nothing but itself. The first call of each
(backend, op, identity, arch, dtype) with no verdict runs the kernel and the reference
(the ``reference`` backend's kernel) on the same arguments and compares them (normwise relative
error within the output dtype's tolerance). A pass is remembered and later calls of that
specialization cost one identity computation and one dictionary lookup; a failure raises
``GateFailure`` for this and every later call of that specialization, which the registry
turns into a fallback for that call (the backend keeps serving its other
specializations). Verdicts persist as JSON under ``$XVENDOR_CACHE_DIR/gate`` (default
``~/.cache/xvendor/gate``), so a failing specialization is never used again on that arch,
in any process. An empty output proves nothing and leaves the verdict open.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Callable

__all__ = ["Gate", "GateFailure", "compare"]


class GateFailure(RuntimeError):
    """A gated kernel specialization disagreed with the reference on this device."""

    def __init__(self, message: str, identity: str = ""):
        super().__init__(message)
        self.identity = identity  # the refused specialization


class Gate:
    """Verdicts of gated kernels: in memory, and one JSON file per verdict on disk."""

    def __init__(self, backend_record: Callable, reference_kernel: Callable, load: Callable):
        self.verdicts: dict[tuple, dict] = {}
        self._record_of = backend_record  # name -> Backend record (the registry's table)
        self._reference = reference_kernel  # op -> the aten kernel
        self._load = load  # "module:function" -> the function

    def clear(self) -> None:
        self.verdicts.clear()

    @staticmethod
    def directory() -> Path:
        root = os.environ.get("XVENDOR_CACHE_DIR") or Path.home() / ".cache" / "xvendor"
        return Path(root) / "gate"

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

    def wrap(self, dec, kernel: Callable) -> Callable:
        """The decision's kernel, behind the gate when its backend is gated."""
        b = self._record_of(dec.backend)
        if b is None or not b.gate_identity:
            return kernel
        identity = self._load(b.gate_identity)
        op, info, dtype, config = dec.op, dec.device, dec.dtype, dec.config
        prefix = (dec.backend, op)
        suffix = (info.arch, str(dtype).removeprefix("torch."))
        passed: set = set()  # identities that passed: the common case, one set lookup

        def gated(*args):
            ident = str(identity(op, info, dtype, args, config))
            if ident in passed:
                return kernel(*args)
            key = prefix + (ident,) + suffix
            v = self.verdict(key)
            if v is not None and v["ok"]:
                passed.add(ident)
                return kernel(*args)
            if v is not None:
                raise GateFailure(f"xvendor.{op}: backend {dec.backend!r} kernel {ident} "
                                  f"failed its correctness check against the reference on "
                                  f"{info.arch} ({v['when']}): {v['detail']}; it is not used "
                                  f"again (verdict in {self._path(key)})", ident)
            out = kernel(*args)
            ok, detail = compare(op, out, self._reference(op)(*args))
            if ok is None:  # nothing to compare (empty output): no verdict yet
                return out
            self.record(key, ok, detail)
            if ok:
                passed.add(ident)
                return out
            raise GateFailure(f"xvendor.{op}: backend {dec.backend!r} kernel {ident} "
                              f"disagrees with the reference on {info.arch} ({dtype}): "
                              f"{detail}", ident)
        return gated


def compare(op: str, out, ref) -> tuple[bool | None, str]:
    """(ok, detail) of a kernel output against the reference output for the same call."""
    from .numerics import TOLERANCE, rel_error
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    if len(outs) != len(refs) or any(o.shape != r.shape for o, r in zip(outs, refs)):
        return False, (f"output shapes {[tuple(o.shape) for o in outs]} != reference "
                       f"{[tuple(r.shape) for r in refs]}")
    if any(o.dtype != r.dtype for o, r in zip(outs, refs)):
        return False, (f"output dtypes {[o.dtype for o in outs]} != reference "
                       f"{[r.dtype for r in refs]}")
    if all(r.numel() == 0 for r in refs):
        return None, "empty output"
    for o, r in zip(outs, refs):
        if not r.is_floating_point():
            continue  # indices (topk) may differ on ties; the values decide
        err, tol = rel_error(o, r), TOLERANCE.get(r.dtype, 1.6e-2)
        if not err <= tol:
            return False, f"normwise relative error {err:.3g} > tolerance {tol:.1g}"
    return True, "matches the reference"
