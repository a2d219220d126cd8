"""The ``Backend`` record: where a backend may run, where it is the default, and where its
kernels, probe, tunable, gate identity and per-call rules live (as ``"module:attribute"``
strings, loaded lazily by the engine).

Every backend's folder holds its own record (``xvendor/<folder>/record.py``, attribute
``BACKEND``); the engine lists the in-tree ones by those strings, exactly as it loads the
entry points of out-of-tree backends (group ``xvendor.backends``). This module is a leaf:
backends import it to describe themselves without reaching into the engine.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import devices

__all__ = ["Backend", "BackendUnavailable", "FLOAT_DTYPES", "ANY", "ROLES", "load_attr"]

FLOAT_DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16})
ANY = frozenset({"*"})
_ANY = ANY
ROLES = ("kernels", "floor", "reference")


# The engine's cached probe verdicts: ``fn(record) -> None | reason`` (set by the engine;
# a record is data and holds no state of its own).
_probe_verdict: list[Callable] = [lambda record: None]


def set_probe_verdicts(fn: Callable) -> None:
    _probe_verdict[0] = fn


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot serve the call; the message says why."""


def load_attr(spec: str):
    """The object a ``"module:attribute"`` string names (the idiom of probes and hooks)."""
    mod, _, attr = spec.partition(":")
    return getattr(importlib.import_module(mod), attr)


@dataclass(frozen=True)
class Backend:
    """Where a backend may run, where it is the default, and where its kernels live.

    ``ops``/``archs``/``vendors`` of ``{"*"}`` mean any. ``defaults`` maps an op to the
    archs where selection picks this backend automatically for that op (``"*"``: every
    arch); a default needs ``evidence`` (a measurement, a recorded benchmark, or public
    numbers). ``explicit_device_types`` are device types served only on explicit request
    (e.g. SYCL kernels on CPU tensors through the CPU SYCL device). The three hooks are
    ``"module:attribute"`` strings, loaded lazily:
    ``probe`` -> ``fn() -> None | reason``: ``None`` when usable here, else why not;
    ``tunable`` -> the object ``xvendor.tuning`` tunes (``candidates``, ``run``);
    ``gate_identity`` -> ``fn(op, device_info, dtype, args, config) -> str`` naming the
    compiled specialization a call runs: set, the backend is behind the correctness gate;
    ``accepts`` -> ``fn(op, device_info) -> None | reason | rule``: per-call rules.
    """

    name: str
    module: str
    ops: frozenset
    device_types: frozenset
    vendors: frozenset = _ANY
    archs: frozenset = _ANY
    dtypes: frozenset = FLOAT_DTYPES
    op_dtypes: dict = field(default_factory=dict, hash=False)  # op -> dtypes, where not ``dtypes``
    defaults: dict = field(default_factory=dict, hash=False)  # op -> archs
    evidence: str = ""
    explicit_device_types: frozenset = frozenset()
    probe: str | None = None
    priority: int = 0  # among several defaults for one arch, higher is tried first
    gate_identity: str | None = None
    tunable: str | None = None
    # Ops whose kernels here reject every input the op's check rejects (but the dtype,
    # checked when a decision is made): plain calls then skip the per-call argument filter.
    checks_inputs: frozenset = frozenset()
    # "kernels": a backend of our own kernels; "floor": torch's own ops, tried after every
    # default and before the reference; "reference": the exact oracle, the last resort.
    role: str = "kernels"
    # "module:function" -> fn(op, device_info) -> None | reason | rule: for a backend that
    # serves only part of an op's calls (torch's own ops: their dtype and recipe rules):
    # None, every call; a str, no call on that device (why); else the per-call rule
    # ``rule(*args) -> None | reason``. A call the rule refuses goes to the next candidate.
    accepts: str | None = None

    def __post_init__(self):
        for attr in ("ops", "device_types", "vendors", "archs", "dtypes",
                     "explicit_device_types", "checks_inputs"):
            object.__setattr__(self, attr, frozenset(getattr(self, attr)))
        object.__setattr__(self, "defaults",
                           {op: frozenset(archs) for op, archs in self.defaults.items()})
        object.__setattr__(self, "op_dtypes",
                           {op: frozenset(ds) for op, ds in self.op_dtypes.items()})
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"Backend name {self.name!r} must match [a-z][a-z0-9_]*")
        if self.role not in ROLES:
            raise ValueError(f"Backend {self.name!r}: role must be one of {ROLES}, got "
                             f"{self.role!r}")
        for attr in ("probe", "gate_identity", "tunable", "accepts"):
            spec = getattr(self, attr)
            if spec is not None and not re.fullmatch(r"[\w.]+:\w+", spec):
                raise ValueError(f"Backend {self.name!r}: {attr} must be 'module:attribute', "
                                 f"got {spec!r}")
        if self.defaults and not self.evidence:
            raise ValueError(f"Backend {self.name!r} is a default for {self.defaults} but gives "
                             "no evidence; a backend becomes a default only with a "
                             "measurement or public numbers")
        for op, archs in self.defaults.items():
            if not self.implements(op):
                raise ValueError(f"Backend {self.name!r}: default for {op!r}, which it does "
                                 "not implement")
            if self.archs != _ANY and not archs <= self.archs | _ANY:
                raise ValueError(f"Backend {self.name!r}: default archs for {op} "
                                 f"{sorted(archs - self.archs)} are not in its archs")

    def implements(self, op: str) -> bool:
        return op in self.ops or self.ops == _ANY

    def why_not(self, op: str, dev: devices.DeviceInfo, dtype: torch.dtype,
                explicit: bool, dry_run: bool = False) -> str | None:
        """``None`` if this backend can serve the call, else the reason it cannot (this
        machine's probe verdict comes from the engine's probe cache)."""
        if not self.implements(op):
            return f"does not implement {op} (implements {', '.join(sorted(self.ops))})"
        kind = dev.device.type
        if kind not in self.device_types and not (explicit and kind in self.explicit_device_types):
            only = " (only on explicit request)" if kind in self.explicit_device_types else ""
            return f"does not run on {kind} devices{only}; runs on {', '.join(sorted(self.device_types))}"
        if self.vendors != _ANY and dev.vendor not in self.vendors:
            return f"supports vendors {sorted(self.vendors)}, not {dev.vendor}"
        if self.archs != _ANY and dev.arch not in self.archs:
            return f"built for {', '.join(sorted(self.archs))}, not {dev.arch}"
        takes = self.op_dtypes.get(op, self.dtypes)
        if dtype not in takes:
            return f"does not take {dtype} for {op} (takes {', '.join(sorted(map(str, takes)))})"
        if dry_run:  # a hypothetical device: this machine's probes say nothing about it
            return None
        return _probe_verdict[0](self)

    def is_default_for(self, op: str, arch: str) -> bool:
        archs = self.defaults.get(op, ())
        return arch in archs or "*" in archs
