"""``xvendor.explain(op, *args, **kwargs)``: which backend would run, and why not the others."""

from __future__ import annotations

import torch

from . import devices, ops, registry


def explain(op: str, *args, arch: str | None = None, backend: str | None = None,
            **kwargs) -> registry.Decision:
    """The decision ``op(*args, **kwargs)`` would get, with the reasons for the rest.

    ``arch="gfx950"`` asks what would happen on a device of that arch (a dry run: the
    tensors may live on the CPU; this machine's probes and tuning tables are not consulted).
    ``backend=`` asks about an explicit request; like the op, it raises
    ``BackendUnavailable`` when that backend cannot serve the call. Without ``arch``, the
    decision is the one the call would really get (tuned config included).
    """
    spec = ops.SPECS.get(op)
    if spec is None:
        raise ValueError(f"xvendor.explain: unknown op {op!r}; ops are {sorted(ops.SPECS)}")
    spec.check(*args, **kwargs)
    ref, dtype = args[0], spec.decision_dtype(args, kwargs)
    if arch:
        return registry.explain_request(op, devices.hypothetical(arch), dtype, backend,
                                        dry_run=True, args=spec.positional(args, kwargs))
    return registry.explain_request(op, registry.device_info(ref.device), dtype, backend,
                                    args=spec.positional(args, kwargs))


def dispatch_table(op_names=None, dtypes=(torch.bfloat16,), infos=None,
                   dry_run: bool = False) -> list[registry.Decision]:
    """One decision per (device, op, dtype), for the present devices (or ``infos``)."""
    infos = infos or [registry.device_info(d) for d in devices.present_devices()]
    return [registry.explain_request(op, info, dt, dry_run=dry_run)
            for info in infos for op in (op_names or sorted(ops.SPECS)) for dt in dtypes]
