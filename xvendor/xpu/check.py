"""The SYCL section of ``xvendor check``: the self-check cases (``xvendor.selfcheck``) of every
op the ``sycl`` backend implements, run through the dispatch layer with ``backend="sycl"``
on CPU tensors, i.e. the real run-time-compiled kernels on the OpenCL CPU device, against
the fp64 oracle.

Wire-up (cli.py's ``CHECK_SECTIONS``):
    ("SYCL kernels on the OpenCL CPU device (run-time compiled)",
     "xvendor.xpu.check:summary_for_check")
"""

from __future__ import annotations

import torch

__all__ = ["summary_for_check"]

_FIELDS = ("op", "case", "dtype", "backend", "rel_error", "tolerance", "ok", "error")


def summary_for_check() -> list[dict]:
    """One row per (op, case, dtype); one failed row with the reason if SYCL cannot run."""
    from .. import registry, selfcheck
    from . import backend, runtime
    reason = backend.probe()
    if reason:
        return [{"op": "*", "ok": False, "error": f"sycl backend unusable: {reason}"}]
    with registry.use_backend("sycl"):  # the ops the sycl record says it implements
        results = selfcheck.run(torch.device("cpu"), op_names=registry.backends()["sycl"].ops)
    stats = runtime.stats()
    rows = [{k: getattr(r, k) for k in _FIELDS} for r in results]
    for row in rows:
        row["device"] = "opencl:cpu"
    rows.append({"op": "(compile)", "case": f"{stats['builds']} RTC builds, "
                 f"{stats['persistent_hits']} from the persistent cache, "
                 f"{stats['build_seconds']:.2f} s", "ok": True})
    return rows
