"""Backends, their availability, and the choice of one per (op, device, dtype, shape class).

A backend is one module plus a small frozen ``Backend`` record. The module exposes
``KERNELS: dict[str, callable]`` (op name -> implementation taking the op's arguments);
the record says where it may run and where it is the default, and is validated on creation.
Built-in records live in ``_BUILTIN`` below; out-of-tree backends come through the
entry-point group ``xvendor.backends`` (each entry point loads to a ``Backend`` or a
callable returning one) and are loaded lazily, on the first selection.

NOTE [selection order] (DESIGN.md):
1. explicit request: the op's ``backend=`` argument, then ``with xvendor.use_backend(...)``,
   then ``XVENDOR_BACKEND``. It must be served or the call raises, naming why.
2. the tuned winner for (op, arch, dtype, shape class), from the hook the tuner installs;
3. a backend whose record names this arch as a default (only with evidence);
4. the reference backend ``aten``, correct everywhere.
An automatic choice that raises falls back to the next candidate and warns once; the
failing (backend, op, device, dtype) is never chosen again in this process.
Decisions are cached; the hot path is one dictionary lookup.

The correctness gate for gated backends: NOTE [correctness gate] in ``xvendor.gate``.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from . import devices
from .gate import Gate, GateFailure  # noqa: F401 (GateFailure is part of this API)

__all__ = ["Backend", "BackendUnavailable", "GateFailure", "Decision", "register", "backends",
           "select", "use_backend", "set_tuned_lookup", "reset", "plugin_problems"]

OPS = frozenset({"gemm", "grouped_mm", "rms_norm", "topk"})
FLOAT_DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16})
_ANY = frozenset({"*"})


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot serve the call; the message says why."""


@dataclass(frozen=True)
class Backend:
    """Where a backend may run, where it is the default, and where its kernels live.

    ``archs``/``vendors`` of ``{"*"}`` mean any. ``defaults`` maps an op to the archs where
    selection picks this backend automatically for that op (``"*"``: every arch); a default
    needs ``evidence`` (a measurement here, a recorded benchmark, or public numbers). ``explicit_device_types`` are device types served only on explicit request
    (e.g. SYCL kernels on CPU tensors through the CPU SYCL device). ``probe`` is
    ``"module:function"`` returning ``None`` when usable, else the reason it is not.
    ``gate_identity`` (``"module:function"``, ``fn(op, device_info, dtype) -> str``) puts
    the backend behind the correctness gate (NOTE [correctness gate]): the string names
    the kernel (template, config, toolchain version) whose verdict is cached per arch.
    """

    name: str
    module: str
    ops: frozenset
    device_types: frozenset
    vendors: frozenset = _ANY
    archs: frozenset = _ANY
    dtypes: frozenset = FLOAT_DTYPES
    defaults: dict = field(default_factory=dict, hash=False)  # op -> archs
    evidence: str = ""
    explicit_device_types: frozenset = frozenset()
    probe: str | None = None
    priority: int = 0  # among several defaults for one arch, higher is tried first
    gate_identity: str | None = None  # "module:function"; set = checked on first use

    def __post_init__(self):
        for attr in ("ops", "device_types", "vendors", "archs", "dtypes",
                     "explicit_device_types"):
            object.__setattr__(self, attr, frozenset(getattr(self, attr)))
        object.__setattr__(self, "defaults",
                           {op: frozenset(archs) for op, archs in self.defaults.items()})
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"Backend name {self.name!r} must match [a-z][a-z0-9_]*")
        unknown = self.ops - OPS
        if unknown:
            raise ValueError(f"Backend {self.name!r}: unknown ops {sorted(unknown)}; "
                             f"xvendor ops are {sorted(OPS)}")
        if self.defaults and not self.evidence:
            raise ValueError(f"Backend {self.name!r} is a default for {self.defaults} but gives "
                             "no evidence; a backend becomes a default only with a "
                             "measurement or public numbers")
        for op, archs in self.defaults.items():
            if op not in self.ops:
                raise ValueError(f"Backend {self.name!r}: default for {op!r}, which it does "
                                 "not implement")
            if self.archs != _ANY and not archs <= self.archs | _ANY:
                raise ValueError(f"Backend {self.name!r}: default archs for {op} "
                                 f"{sorted(archs - self.archs)} are not in its archs")

    def why_not(self, op: str, dev: devices.DeviceInfo, dtype: torch.dtype,
                explicit: bool, dry_run: bool = False) -> str | None:
        """``None`` if this backend can serve the call, else the reason it cannot."""
        if op not in self.ops:
            return f"does not implement {op} (implements {', '.join(sorted(self.ops))})"
        kind = dev.device.type
        if kind not in self.device_types and not (explicit and kind in self.explicit_device_types):
            only = " (only on explicit request)" if kind in self.explicit_device_types else ""
            return f"does not run on {kind} devices{only}; runs on {', '.join(sorted(self.device_types))}"
        if self.vendors != _ANY and dev.vendor not in self.vendors:
            return f"supports vendors {sorted(self.vendors)}, not {dev.vendor}"
        if self.archs != _ANY and dev.arch not in self.archs:
            return f"built for {', '.join(sorted(self.archs))}, not {dev.arch}"
        if dtype not in self.dtypes:
            return f"does not take {dtype} (takes {', '.join(sorted(map(str, self.dtypes)))})"
        if dry_run:  # a hypothetical device: this machine's probes say nothing about it
            return None
        return _registry.unavailable_reason(self) or _gate.failed_reason(self, op, dev, dtype)

    def is_default_for(self, op: str, arch: str) -> bool:
        archs = self.defaults.get(op, ())
        return arch in archs or "*" in archs


_BUILTIN = (
    Backend(name="aten", module="xvendor.reference", ops=OPS,
            device_types={"cpu", "cuda", "xpu", "mps", "meta"},
            dtypes=FLOAT_DTYPES | {torch.float64}, defaults={op: {"*"} for op in OPS},
            evidence="the reference: correct everywhere; cuBLAS/hipBLASLt/oneDNN behind it",
            priority=-100),
    Backend(name="triton", module="xvendor.triton.backend", ops={"gemm", "grouped_mm"},
            device_types={"cuda"}, explicit_device_types={"cpu"},  # cpu: interpreter only
            dtypes=FLOAT_DTYPES, defaults={"grouped_mm": {"gfx942", "gfx950", "gfx1250"}},
            evidence="public numbers: torch's grouped_mm on ROCm is a slow per-group fallback, "
                     "Triton grouped GEMM ~740-900 TFLOPS on MI355X (torch PR 194032); ATen "
                     "(cuBLAS) stays the default on NVIDIA",
            probe="xvendor.triton.backend:probe"),
    Backend(name="flydsl", module="xvendor.rocm.backend", ops={"gemm", "grouped_mm"},
            device_types={"cuda"}, vendors={"amd"}, archs={"gfx950", "gfx1250"},
            dtypes={torch.float16, torch.bfloat16},
            defaults={"gemm": {"gfx950"}, "grouped_mm": {"gfx950"}},
            evidence="public numbers on MI355X (gfx950): FlyDSL bf16 GEMM 1.19x Triton / "
                     "1.15x ATen geomean (torch PR 190903); FlyDSL grouped GEMM ~900-1215 "
                     "TFLOPS vs Triton ~740-900 (torch PR 194032). gfx1250: no public "
                     "numbers, so no default there",
            probe="xvendor.rocm.backend:probe", priority=10,
            gate_identity="xvendor.rocm.backend:gate_identity"),
    Backend(name="sycl", module="xvendor.xpu.backend", ops=OPS, device_types={"xpu"},
            explicit_device_types={"cpu"},  # cpu: through the OpenCL CPU SYCL device
            dtypes=FLOAT_DTYPES, probe="xvendor.xpu.backend:probe"),
)
REFERENCE = "aten"


@dataclass
class Decision:
    """The outcome of selection: the backend to run, why, and why the others were not."""

    op: str
    device: devices.DeviceInfo
    dtype: torch.dtype
    backend: str
    reason: str
    fallbacks: tuple = ()  # names tried next, in order, if the choice fails at run time
    passed_over: dict = field(default_factory=dict)  # name -> reason
    explicit: bool = False
    kernel: Callable | None = field(default=None, repr=False)  # resolved by decide()

    def __str__(self) -> str:
        lines = [f"{self.op} on {self.device.device} ({self.device.arch}, {self.dtype}) -> "
                 f"{self.backend}: {self.reason}"]
        if self.fallbacks:
            lines.append(f"  falls back to: {' -> '.join(self.fallbacks)}")
        lines += [f"  not {name}: {why}" for name, why in sorted(self.passed_over.items())]
        return "\n".join(lines)


_requested: contextvars.ContextVar[str | None] = contextvars.ContextVar("xvendor_backend",
                                                                       default=None)


@contextlib.contextmanager
def use_backend(name: str | None):
    """Within the block, xvendor ops run on backend ``name`` (or raise if it cannot)."""
    token = _requested.set(name)
    try:
        yield
    finally:
        _requested.reset(token)


class _Registry:
    def __init__(self):
        self.backends: dict[str, Backend] = {b.name: b for b in _BUILTIN}
        self.kernels: dict[tuple[str, str], Callable] = {}
        self.decisions: dict[tuple, Decision] = {}
        self.failed: dict[tuple, str] = {}  # (backend, op, device key, dtype) -> error
        self.unavailable: dict[str, str | None] = {}
        self.plugin_problems: dict[str, str] = {}
        self.plugins_loaded = False
        self.tuned_lookup: Callable | None = None
        self.tuning_checked = False
        self.env_backend = os.environ.get("XVENDOR_BACKEND") or None

    def unavailable_reason(self, b: Backend) -> str | None:
        if b.name not in self.unavailable:
            reason = None
            if b.probe:
                mod, _, fn = b.probe.partition(":")
                try:
                    reason = getattr(importlib.import_module(mod), fn)()
                except Exception as e:  # a broken probe makes the backend unavailable
                    reason = f"probe {b.probe} raised {type(e).__name__}: {e}"
            self.unavailable[b.name] = reason
        return self.unavailable[b.name]

    def kernel(self, backend: str, op: str) -> Callable:
        fn = self.kernels.get((backend, op))
        if fn is None:
            fn = importlib.import_module(self.backends[backend].module).KERNELS[op]
            self.kernels[(backend, op)] = fn
        return fn

    def load_plugins(self):
        self.plugins_loaded = True
        from importlib.metadata import entry_points
        for ep in entry_points(group="xvendor.backends"):
            try:
                obj = ep.load()
                rec = obj() if callable(obj) and not isinstance(obj, Backend) else obj
                if not isinstance(rec, Backend):
                    raise TypeError(f"loaded {type(rec).__name__}, expected xvendor.Backend")
                register(rec)
            except Exception as e:  # a broken third-party backend is reported, not fatal
                self.plugin_problems[ep.name] = f"{type(e).__name__}: {e}"
                warnings.warn(f"xvendor: backend entry point {ep.name!r} ({ep.value}) failed "
                              f"to load and is ignored: {type(e).__name__}: {e}", stacklevel=3)


_registry = _Registry()


def register(backend: Backend, *, replace: bool = False) -> None:
    """Add a backend (or replace one with ``replace=True``); clears cached decisions."""
    if backend.name in _registry.backends and not replace:
        raise ValueError(f"backend {backend.name!r} is already registered; pass replace=True "
                         f"to override it. Registered: {sorted(_registry.backends)}")
    _registry.backends[backend.name] = backend
    _registry.unavailable.pop(backend.name, None)
    for key in [k for k in _registry.kernels if k[0] == backend.name]:
        del _registry.kernels[key]
    _registry.decisions.clear()


def unregister(name: str) -> None:
    if name == REFERENCE:
        raise ValueError("the reference backend 'aten' cannot be removed")
    _registry.backends.pop(name, None)
    _registry.decisions.clear()


def backends() -> dict[str, Backend]:
    """The registered backends by name (entry-point backends included)."""
    if not _registry.plugins_loaded:
        _registry.load_plugins()
    return dict(_registry.backends)


def plugin_problems() -> dict[str, str]:
    """Entry-point backends that failed to load: name -> error."""
    backends()
    return dict(_registry.plugin_problems)


def set_tuned_lookup(fn: Callable | None) -> None:
    """Install the tuner's hook: ``fn(op, device_info, dtype, shape_class) -> name | None``."""
    _registry.tuned_lookup = fn
    _registry.decisions.clear()


_gate = Gate(lambda name: _registry.backends.get(name))


def reset() -> None:
    """Forget cached decisions, failures, probes and re-read ``XVENDOR_BACKEND``/``XVENDOR_ARCH``.

    NOTE [env read once]: reading ``os.environ`` costs ~1 µs, half the per-call budget, so
    the environment is read at import and on ``reset()``, not on every call.
    """
    _registry.decisions.clear()
    _registry.failed.clear()
    _registry.unavailable.clear()
    _registry.env_backend = os.environ.get("XVENDOR_BACKEND") or None
    _gate.verdicts.clear()
    _device_info.clear()
    devices._detect_cached.cache_clear()


_device_info: dict[torch.device, devices.DeviceInfo] = {}


def device_info(device: torch.device) -> devices.DeviceInfo:
    info = _device_info.get(device)
    if info is None:
        info = _device_info[device] = devices.detect(device)
    return info


def select(op: str, dev: devices.DeviceInfo, dtype: torch.dtype, shape_class=None,
           requested: str | None = None, dry_run: bool = False) -> Decision:
    """Choose the backend for one call (uncached; ``decide`` is the cached hot path).

    ``dry_run`` (a hypothetical device of another arch): availability probes, earlier
    failures and gate verdicts of this machine are not consulted; the rest of the rules are.
    """
    table = backends()
    if requested is not None:
        b = table.get(requested)
        if b is None:
            raise BackendUnavailable(f"xvendor.{op}: no backend named {requested!r}. "
                                     f"Registered backends: {sorted(table)}")
        why = b.why_not(op, dev, dtype, True, dry_run) or (
            None if dry_run else _failed_reason(b.name, op, dev, dtype))
        if why:
            raise BackendUnavailable(f"xvendor.{op}: backend {requested!r} was requested but "
                                     f"cannot run on {dev.device} ({dev.arch}, {dtype}): {why}")
        return Decision(op, dev, dtype, requested, "explicitly requested", explicit=True)
    passed: dict[str, str] = {}
    eligible: dict[str, Backend] = {}
    for name, b in table.items():
        why = b.why_not(op, dev, dtype, False, dry_run) or (
            None if dry_run else _failed_reason(name, op, dev, dtype))
        if why:
            passed[name] = why
        else:
            eligible[name] = b
    chain: list[tuple[str, str]] = []
    tuned = _registry.tuned_lookup(op, dev, dtype, shape_class) if _registry.tuned_lookup else None
    if tuned in eligible:
        chain.append((tuned, f"tuned winner for {dev.arch} {shape_class}"))
    elif tuned is not None:
        passed[tuned] = passed.get(tuned, "tuned winner, but not registered")
    defaults = sorted((b for b in eligible.values() if b.is_default_for(op, dev.arch)),
                      key=lambda b: (-b.priority, b.name))
    for b in defaults:
        if all(b.name != n for n, _ in chain):
            chain.append((b.name, f"default for {dev.arch}: {b.evidence}"))
    if REFERENCE in eligible and all(n != REFERENCE for n, _ in chain):
        chain.append((REFERENCE, "reference (no other backend is a default here)"))
    if not chain:
        raise BackendUnavailable(f"xvendor.{op}: no backend can run on {dev.device} "
                                 f"({dev.arch}, {dtype}): " + "; ".join(
                                     f"{n}: {why}" for n, why in sorted(passed.items())))
    for name in eligible:
        if all(name != n for n, _ in chain):
            passed[name] = (f"available, but not the default for {dev.arch} and not a tuned "
                            "winner (no evidence it wins here); request it explicitly to use it")
    (first, reason), rest = chain[0], chain[1:]
    return Decision(op, dev, dtype, first, reason, tuple(n for n, _ in rest), passed)


def _failed_reason(name, op, dev, dtype) -> str | None:
    err = _registry.failed.get((name, op, dev.key, dtype))
    return f"failed earlier in this process on this device: {err}" if err else None


def decide(op: str, device: torch.device, dtype: torch.dtype, requested: str | None = None,
           shape_class_fn: Callable | None = None, args: tuple = ()) -> Decision:
    """Cached ``select``: the hot path of every op (one context-var read, one dict lookup).

    The shape class (``shape_class_fn(*args)``) is computed only while a tuned-winner lookup
    is installed: without one no decision depends on shape, and the hot path skips it.
    """
    if requested is None:
        requested = _requested.get() or _registry.env_backend
    sc = shape_class_fn(*args) if _registry.tuned_lookup is not None and shape_class_fn else None
    key = (op, device, dtype, sc, requested)
    dec = _registry.decisions.get(key)
    if dec is None:
        if not _registry.tuning_checked:  # first miss: tuned tables for a present chip?
            _registry.tuning_checked = True
            from .tuning import serve
            serve.install_if_useful()
            return decide(op, device, dtype, requested, shape_class_fn, args)
        dec = select(op, device_info(device), dtype, sc, requested)
        dec.kernel = _gate.wrap(dec, _registry.kernel(dec.backend, op))
        _registry.decisions[key] = dec
    return dec


def run(dec: Decision, args: tuple):
    """Run the decided kernel; an automatic choice that fails falls back and warns once."""
    try:
        return dec.kernel(*args)
    except Exception as e:
        return fall_back(dec, args, e)


def fall_back(dec: Decision, args: tuple, exc: Exception):
    """After ``dec``'s kernel raised ``exc``: re-raise it, or warn once and try the next."""
    if dec.explicit or not dec.fallbacks:
        raise exc
    err = f"{type(exc).__name__}: {exc}"
    _registry.failed[(dec.backend, dec.op, dec.device.key, dec.dtype)] = err
    warnings.warn(f"xvendor.{dec.op}: backend {dec.backend!r} failed on {dec.device.device} "
                  f"({dec.device.arch}, {dec.dtype}) and will not be chosen again in this "
                  f"process; falling back to {dec.fallbacks[0]!r}. Error: {err}", stacklevel=4)
    _registry.decisions.clear()
    nxt = Decision(dec.op, dec.device, dec.dtype, dec.fallbacks[0], "fallback",
                   dec.fallbacks[1:], dict(dec.passed_over, **{dec.backend: err}))
    nxt.kernel = _gate.wrap(nxt, _registry.kernel(nxt.backend, nxt.op))
    return run(nxt, args)
