"""RCCL version and feature detection for the resilient process groups.

RCCL tracks NCCL's API (2.30.x is synced to NCCL 2.30); what matters to the data plane is
whether ``ncclCommShrink`` (NCCL 2.27+) and ``ncclCommGrow`` (NCCL 2.29+; in RCCL from
2.30.7) are there. The version comes from torch (``torch.cuda.nccl.version()`` reports RCCL's
on a ROCm build) or from ``XV_RCCL_VERSION`` ("2.30.7") where torch cannot load it.
Untested on ROCm hardware here: only the version arithmetic is exercised (l0).
"""

from __future__ import annotations

import os

GROW_MIN = (2, 30, 7)     # first RCCL release with ncclCommGrow
SHRINK_MIN = (2, 27, 0)


def parse(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.strip().split(".")]
    if not 2 <= len(parts) <= 3:
        raise ValueError(f"RCCL version {text!r}: expected MAJOR.MINOR[.PATCH], e.g. '2.30.7'")
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


def version() -> tuple[int, int, int] | None:
    """RCCL's version on a ROCm build of torch, else None."""
    if os.environ.get("XV_RCCL_VERSION"):
        return parse(os.environ["XV_RCCL_VERSION"])
    try:
        import torch
        if torch.version.hip is None or not torch.cuda.is_available():
            return None
        v = torch.cuda.nccl.version()
        return tuple(v) + (0,) * (3 - len(v))  # type: ignore[return-value]
    except Exception:
        return None


def _norm(v) -> tuple | None:
    return None if v is None else tuple(v) + (0,) * (3 - len(v))


def supports_comm_shrink(v) -> bool:
    v = _norm(v)
    return v is not None and v >= SHRINK_MIN


def supports_comm_grow(v) -> bool:
    v = _norm(v)
    return v is not None and v >= GROW_MIN
