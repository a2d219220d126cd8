"""``xvendor.explain(op, *args, **kwargs)``: which backend would run, and why not the others."""

from __future__ import annotations

import torch

from . import devices, registry
from .ops.gemm import check as _gemm_check
from .ops.grouped_mm import check as _grouped_mm_check
from .ops.rms_norm import check as _rms_norm_check
from .ops.topk import check as _topk_check

_CHECKS = {  # op -> its metadata argument check, called with the op's arguments
    "gemm": lambda a, b, bias=None, out_dtype=None: _gemm_check(a, b, bias, out_dtype),
    "grouped_mm": lambda a, b, offs=None, bias=None, out_dtype=None:
        _grouped_mm_check(a, b, offs, bias, out_dtype),
    "rms_norm": lambda x, weight=None, eps=None: _rms_norm_check(x, weight, eps),
    "topk": lambda x, k, dim=-1, largest=True, sorted=True: _topk_check(x, k, dim),
}


def explain(op: str, *args, arch: str | None = None, backend: str | None = None,
            **kwargs) -> registry.Decision:
    """The decision ``op(*args, **kwargs)`` would get, with the reasons for the rest.

    ``arch="gfx950"`` asks what would happen on a device of that arch (a dry run: the
    tensors may live on the CPU; this machine's availability probes are not consulted).
    ``backend=`` asks about an explicit request; like the op,
    it raises ``BackendUnavailable`` when that backend cannot serve the call.
    """
    if op not in _CHECKS:
        raise ValueError(f"xvendor.explain: unknown op {op!r}; ops are {sorted(_CHECKS)}")
    _CHECKS[op](*args, **kwargs)
    ref = args[0]
    info = devices.hypothetical(arch) if arch else registry.device_info(ref.device)
    requested = backend or registry._requested.get() or registry._registry.env_backend
    return registry.select(op, info, ref.dtype, None, requested, dry_run=bool(arch))


def dispatch_table(ops=("gemm", "grouped_mm", "rms_norm", "topk"), dtypes=(torch.bfloat16,),
                   infos=None, dry_run: bool = False) -> list[registry.Decision]:
    """One decision per (device, op, dtype), for the present devices (or ``infos``)."""
    infos = infos or [registry.device_info(d) for d in devices.present_devices()]
    return [registry.select(op, info, dt, dry_run=dry_run)
            for info in infos for op in ops for dt in dtypes]
