"""XPU specifics of interprocess events (the device-generic face is ``xvendor.events``).

torch 2.15 exposes ``torch.xpu.Event(interprocess=True)``, ``.ipc_handle()`` and
``Event.from_ipc_handle``; they need a torch built against oneAPI 2026.2 or newer (the SYCL
runtime's event IPC). ``torch.version.xpu`` encodes oneAPI as YYYYMMPP (e.g. "20260200").
Untested on an Intel GPU here; the version rules are tested at l0.
"""

from __future__ import annotations

import torch

MIN_ONEAPI = 20260200


def event_ipc_problem(xpu_version: str | None = None, has_xpu_ipc: bool | None = None) -> str | None:
    """Why XPU event IPC cannot work with this torch build, or None."""
    has_xpu_ipc = hasattr(torch.xpu.Event, "ipc_handle") if has_xpu_ipc is None else has_xpu_ipc
    xpu_version = torch.version.xpu if xpu_version is None else xpu_version
    if not has_xpu_ipc:
        return (f"torch {torch.__version__} has no torch.xpu.Event.ipc_handle: XPU event IPC "
                "needs torch 2.15 or newer")
    if not xpu_version:
        return "this torch build has no XPU support (torch.version.xpu is None)"
    try:
        version = int(str(xpu_version)[:8])
    except ValueError:
        return f"cannot read the oneAPI version from torch.version.xpu={xpu_version!r}"
    if version < MIN_ONEAPI:
        return (f"XPU event IPC needs a torch built with oneAPI 2026.2 or newer "
                f"(torch.version.xpu={xpu_version})")
    return None
