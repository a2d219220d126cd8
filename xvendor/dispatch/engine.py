"""The dispatch engine: the backends' table and state, the choice of one per call, the
decision cache, binding (config, gate, per-call rules) and the one dispatch path every op
takes (decide, run, pass on or fall back). ``xvendor.registry`` is its public face.

Ops are defined by ``xvendor.ops`` (``define_op``): the engine knows each op's name and
how to compute its shape class, nothing else. It imports no op, backend or tuning module:
backends are named by ``"module:attribute"`` strings (their records, kernels, probes,
tunables, gate identities and rules), and the tuned-winner hook is installed from above.

NOTE [selection order]:
1. explicit request: the op's ``backend=`` argument, then ``with xvendor.use_backend(...)``,
   then ``XVENDOR_BACKEND``. It must be served or the call raises, naming why.
2. the tuned winner for (op, arch, dtype, shape class), from the tuned-winner hook;
3. a backend of our own kernels whose record names this arch as a default (only with
   evidence), highest priority first;
4. ``torch``, torch's own op (role "floor"), where its rules (``Backend.accepts``) take
   the call: never slower than the framework we plug into, and no host synchronization;
5. ``reference`` (role "reference"), exact and slow, the last resort.
An automatic choice that raises falls back to the next candidate and warns once; the
failing (backend, op, device, dtype) is never chosen again in this process. A call that a
backend's per-call rules refuse goes to the next candidate without a warning (a rule is
not a failure); ``explain`` names the rule. The decision carries the chosen backend's
tuned config, passed to its kernel as ``config=``.

NOTE [tuned-winner hook]: ``set_tuned_lookup`` takes a ``"module:function"`` factory
(the package installs ``xvendor.tuning.serve:hook`` at import), called once on the first
decision miss after import or ``reset()``; it returns the lookup ``fn(op, info, dtype,
shape_class, backend) -> (backend, config) | None`` (``backend="*"``: the best backend for
the problem), or ``None`` when there is nothing to serve. Without a lookup no decision
depends on shape and the hot path never computes a shape class.

The correctness gate for gated backends: NOTE [correctness gate] in ``xvendor.gate``.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import importlib
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import devices
from ..gate import Gate, GateFailure
from .records import ANY as _ANY, FLOAT_DTYPES, Backend, BackendUnavailable, load_attr
from .records import set_probe_verdicts

__all__ = ["Backend", "BackendUnavailable", "GateFailure", "Decision", "Fallback", "register",
           "backends", "ops", "define_op", "select", "decide", "dispatcher", "explain_request",
           "use_backend", "requested_backend", "set_tuned_lookup", "tunable", "reset",
           "plugin_problems", "fallbacks", "fallback_count", "device_info", "unavailable_reason",
           "IN_TREE", "REFERENCE", "FLOOR", "load_attr", "FLOAT_DTYPES", "floor_kernel",
           "floor_refuses", "never_reason", "failed_reason"]

REFERENCE = "reference"
FLOOR = "torch"
# The in-tree backends, named as entry points name out-of-tree ones: each folder holds its
# own record (NOTE [selection order] says how the roles are ordered).
IN_TREE = ("xvendor.reference.record:BACKEND", "xvendor.torch_backend.record:BACKEND",
           "xvendor.triton.record:BACKEND", "xvendor.rocm.record:BACKEND",
           "xvendor.xpu.record:BACKEND")


def _in_tree() -> dict[str, Backend]:
    return {b.name: b for b in map(load_attr, IN_TREE)}


def _is_default(b: Backend, op: str, arch: str) -> bool:
    return b.is_default_for(op, arch) or b.is_default_for("*", arch)


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
    config: dict | None = None  # the tuned config the kernel receives (None: its default)
    kernel: Callable | None = field(default=None, repr=False)  # resolved by decide()
    shape_class: tuple | None = None
    checks_inputs: bool = False  # the kernel rejects every bad input itself (resolved too)
    # The backend's per-call rules (Backend.accepts), resolved by decide(): a call they
    # refuse runs on ``passed_on``, the next candidate's decision (built on first need).
    accepts: Callable | None = field(default=None, repr=False)
    passed_on: "Decision | None" = field(default=None, repr=False)

    def __str__(self) -> str:
        cfg = f" [tuned config {self.config.get('name', self.config)}]" if self.config else ""
        lines = [f"{self.op} on {self.device.device} ({self.device.arch}, {self.dtype}) -> "
                 f"{self.backend}{cfg}: {self.reason}"]
        if self.fallbacks:
            lines.append(f"  falls back to: {' -> '.join(self.fallbacks)}")
        lines += [f"  not {name}: {why}" for name, why in sorted(self.passed_over.items())]
        return "\n".join(lines)


@dataclass(frozen=True)
class Fallback:
    """One automatic choice that failed at run time and the backend that ran instead."""

    op: str
    device: str
    dtype: str
    backend: str
    to: str
    error: str
    whole_backend: bool  # False: only one compiled specialization was refused (gate)


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


class _State:
    """Everything the registry caches or is configured with; ``reset()`` clears it."""

    def __init__(self):
        self.backends: dict[str, Backend] = _in_tree()
        self.ops: dict[str, Callable | None] = {}  # op -> shape-class function
        # NOTE [tuned-winner hook]: installed from above (``install_default_tuned_hook``):
        # the engine names no tuning module.
        self.default_tuned_hook: str | Callable | None = None
        self.tuned_hook: str | Callable | None = None
        self.clear()

    def clear(self):
        self.kernels: dict[tuple[str, str], Callable] = {}
        self.rules: dict[tuple, object] = {}  # (backend, op, device key) -> Backend.accepts
        self.failed: dict[tuple, str] = {}  # (backend, op, device key, dtype) -> error
        self.unavailable: dict[str, str | None] = {}
        self.plugin_problems: dict[str, str] = {}
        self.plugins_loaded = False
        self.tuned_lookup: Callable | None = None
        self.tuning_resolved = False
        self.env_backend = os.environ.get("XVENDOR_BACKEND") or None
        self.fallbacks = collections.deque(maxlen=256)
        self.fallback_count = 0
        self.warned: set = set()

    def unavailable_reason(self, b: Backend) -> str | None:
        if b.name not in self.unavailable:
            reason = None
            if b.probe:
                try:
                    reason = load_attr(b.probe)()
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
                register(rec, replace=rec.name in self.backends and rec.name != REFERENCE)
            except Exception as e:  # a broken third-party backend is reported, not fatal
                self.plugin_problems[ep.name] = f"{type(e).__name__}: {e}"
                warnings.warn(f"xvendor: backend entry point {ep.name!r} ({ep.value}) failed "
                              f"to load and is ignored: {type(e).__name__}: {e}", stacklevel=3)

    def resolve_tuning(self):
        """Run the tuned-winner hook's factory once (NOTE [tuned-winner hook])."""
        self.tuning_resolved = True
        hook = self.tuned_hook
        if isinstance(hook, str):
            try:
                hook = load_attr(hook)()
            except Exception as e:  # tuning is an optimization: never fail a call for it
                warnings.warn(f"xvendor: the tuned-winner hook {self.tuned_hook} failed "
                              f"({type(e).__name__}: {e}); serving untuned defaults",
                              stacklevel=4)
                hook = None
        self.tuned_lookup = hook


_state = _State()
set_probe_verdicts(lambda record: _state.unavailable_reason(record))
_decisions: dict[tuple, Decision] = {}  # (op, device, dtype, shape class, requested)
_fast_decisions: dict[str, dict] = {}  # op -> (device, dtype, requested) -> Decision
_direct_floors: list[dict] = []  # each dispatcher's (device, dtype) -> torch's call


def _forget_decisions() -> None:
    _decisions.clear()
    for per_op in _fast_decisions.values():
        per_op.clear()
    for table in _direct_floors:
        table.clear()


_gate = Gate(lambda name: _state.backends.get(name), lambda op: _state.kernel(REFERENCE, op),
             load_attr)


def define_op(name: str, shape_class: Callable | None = None) -> None:
    """Make ``name`` an op the registry dispatches (``xvendor.ops`` calls this once per op).

    ``shape_class(*args)`` gives the tuple a tuned winner is keyed on (``xvendor.shapes``);
    ``None`` for ops that are never tuned.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"op name {name!r} must match [a-z][a-z0-9_]*")
    _state.ops[name] = shape_class
    _forget_decisions()


def ops() -> tuple[str, ...]:
    """The names of the defined ops."""
    return tuple(_state.ops)


def register(backend: Backend, *, replace: bool = False) -> None:
    """Add a backend (or replace one with ``replace=True``); clears cached decisions."""
    if backend.name in _state.backends and not replace:
        raise ValueError(f"backend {backend.name!r} is already registered; pass replace=True "
                         f"to override it. Registered: {sorted(_state.backends)}")
    unknown = backend.ops - _ANY - set(_state.ops)
    if _state.ops and unknown:  # ops are defined when xvendor.ops is imported
        raise ValueError(f"Backend {backend.name!r}: unknown ops {sorted(unknown)}; "
                         f"xvendor ops are {sorted(_state.ops)}")
    _state.backends[backend.name] = backend
    _state.unavailable.pop(backend.name, None)
    if backend.name == FLOOR:  # what the compiled path traces into
        _FLOOR_RULES.clear()
        _FLOOR_KERNELS.clear()
    for key in [k for k in _state.kernels if k[0] == backend.name]:
        del _state.kernels[key]
    _forget_decisions()


def backends() -> dict[str, Backend]:
    """The registered backends by name (entry-point backends included)."""
    if not _state.plugins_loaded:
        _state.load_plugins()
    return dict(_state.backends)


def plugin_problems() -> dict[str, str]:
    """Entry-point backends that failed to load: name -> error."""
    backends()
    return dict(_state.plugin_problems)


def unavailable_reason(name: str) -> str | None:
    """Why backend ``name`` cannot run on this machine (its probe), or ``None``."""
    return _state.unavailable_reason(backends()[name])


def tunable(name: str):
    """The tunable object of backend ``name`` (its record's ``tunable``), or ``None``."""
    b = backends().get(name)
    return load_attr(b.tunable) if b is not None and b.tunable else None


def set_tuned_lookup(hook: str | Callable | None) -> None:
    """Configure the tuned-winner hook: a ``"module:function"`` factory, a lookup callable
    ``fn(op, info, dtype, shape_class, backend) -> (backend, config) | None``, or ``None``
    (no tuning). See NOTE [tuned-winner hook]."""
    _state.tuned_hook = hook
    _state.tuned_lookup = None
    _state.tuning_resolved = False
    _forget_decisions()


def requested_backend(explicit: str | None = None) -> str | None:
    """The backend a call would explicitly request: the argument, the context, the env."""
    return explicit or _requested.get() or _state.env_backend


def reset(*, configuration: bool = False) -> None:
    """Forget every cached decision, failure, probe, gate verdict, device and tuning state,
    and re-read ``XVENDOR_BACKEND``/``XVENDOR_ARCH``; the tuned-winner hook runs again on
    the next call. ``configuration=True`` also drops backends and hooks set at run time
    (``register``, ``set_tuned_lookup``): the registry is as it was at import.

    NOTE [env read once]: reading ``os.environ`` costs ~1 µs, half the per-call budget, so
    the environment is read at import and on ``reset()``, not on every call.
    """
    if configuration:
        _state.backends = _in_tree()
        _state.tuned_hook = _state.default_tuned_hook
    _state.clear()
    _forget_decisions()
    _gate.clear()
    devices.clear_cache()


def fallbacks() -> list[Fallback]:
    """The latest run-time fallbacks (at most 256), oldest first."""
    return list(_state.fallbacks)


def fallback_count() -> int:
    """How many run-time fallbacks this process has had (since the last ``reset``)."""
    return _state.fallback_count


device_info = devices.info  # what the registry decides with: cleared by reset()


def select(op: str, dev: devices.DeviceInfo, dtype: torch.dtype, shape_class=None,
           requested: str | None = None, dry_run: bool = False) -> Decision:
    """Choose the backend for one call (uncached; ``decide`` caches it).

    ``dry_run`` (a hypothetical device of another arch): availability probes, earlier
    failures and tuned winners of this machine are not consulted; the rest of the rules are.
    """
    if op not in _state.ops:
        raise ValueError(f"xvendor: unknown op {op!r}; ops are {sorted(_state.ops)}")
    table = backends()
    lookup = None if dry_run else _state.tuned_lookup
    if requested is not None:
        b = table.get(requested)
        if b is None:
            raise BackendUnavailable(f"xvendor.{op}: no backend named {requested!r}. "
                                     f"Registered backends: {sorted(table)}")
        why = b.why_not(op, dev, dtype, True, dry_run) or (
            None if dry_run else _failed_reason(b.name, op, dev, dtype)) or _never(b, op, dev)
        if why:
            raise BackendUnavailable(f"xvendor.{op}: backend {requested!r} was requested but "
                                     f"cannot run on {dev.device} ({dev.arch}, {dtype}): {why}")
        dec = Decision(op, dev, dtype, requested, "explicitly requested", explicit=True,
                       shape_class=shape_class)
        dec.config = _tuned(lookup, dec, requested)
        return dec
    passed: dict[str, str] = {}
    eligible: dict[str, Backend] = {}
    for name, b in table.items():
        why = b.why_not(op, dev, dtype, False, dry_run) or (
            None if dry_run else _failed_reason(name, op, dev, dtype)) or _never(b, op, dev)
        if why:
            passed[name] = why
        else:
            eligible[name] = b
    chain: list[tuple[str, str]] = []
    winner = None
    if lookup is not None and shape_class is not None:
        winner = lookup(op, dev, dtype, shape_class, "*")
    if winner is not None and winner[0] in eligible:
        chain.append((winner[0], f"tuned winner for {dev.arch} {shape_class}"))
    elif winner is not None:
        passed[winner[0]] = passed.get(winner[0], "tuned winner, but not registered")
    defaults = sorted((b for b in eligible.values()
                       if b.role == "kernels" and _is_default(b, op, dev.arch)),
                      key=lambda b: (-b.priority, b.name))
    for b in defaults:
        if all(b.name != n for n, _ in chain):
            chain.append((b.name, f"default for {dev.arch}: {b.evidence}"))
    for role, why in (("floor", "torch's own op (the floor: no kernel of ours is a default "
                                "or tuned winner here)"),
                      ("reference", "the reference (last resort: torch's own op cannot serve)")):
        for b in sorted((b for b in eligible.values() if b.role == role),
                        key=lambda b: (-b.priority, b.name)):
            if all(b.name != n for n, _ in chain):
                chain.append((b.name, why))
    if not chain:
        raise BackendUnavailable(f"xvendor.{op}: no backend can run on {dev.device} "
                                 f"({dev.arch}, {dtype}): " + "; ".join(
                                     f"{n}: {why}" for n, why in sorted(passed.items())))
    for name in eligible:
        if all(name != n for n, _ in chain):
            passed[name] = (f"available, but not the default for {dev.arch} and not a tuned "
                            "winner (no evidence it wins here); request it explicitly to use it")
    (first, reason), rest = chain[0], chain[1:]
    dec = Decision(op, dev, dtype, first, reason, tuple(n for n, _ in rest), passed,
                   shape_class=shape_class)
    dec.config = (winner[1] or None) if winner is not None and winner[0] == first else \
        _tuned(lookup, dec, first)
    return dec


def _tuned(lookup, dec: Decision, backend: str) -> dict | None:
    """The tuned config of ``backend`` for the decision's problem (None: its default)."""
    if lookup is None or dec.shape_class is None:
        return None
    hit = lookup(dec.op, dec.device, dec.dtype, dec.shape_class, backend)
    return (hit[1] or None) if hit is not None else None  # {}: the backend's default


def _rules(b: Backend, op: str, dev: devices.DeviceInfo):
    """The backend's verdict for ``op`` on ``dev`` (Backend.accepts), remembered."""
    key = (b.name, op, dev.key)
    if key not in _state.rules:
        _state.rules[key] = load_attr(b.accepts)(op, dev) if b.accepts else None
    return _state.rules[key]


def _never(b: Backend, op: str, dev: devices.DeviceInfo) -> str | None:
    verdict = _rules(b, op, dev)
    return verdict if isinstance(verdict, str) else None


def _failed_reason(name, op, dev, dtype) -> str | None:
    err = _state.failed.get((name, op, dev.key, dtype))
    return f"failed earlier in this process on this device: {err}" if err else None


def _bind(dec: Decision) -> Decision:
    """Resolve the decision's kernel: its config bound, behind the gate if the backend is."""
    fn = _state.kernel(dec.backend, dec.op)
    if dec.config is not None:
        plain, config = fn, dec.config

        def fn(*args):
            return plain(*args, config=config)
    dec.kernel = _gate.wrap(dec, fn)
    record = _state.backends[dec.backend]
    dec.checks_inputs = dec.op in record.checks_inputs and dec.device.device.type != "meta"
    if record.accepts:
        rule = _rules(record, dec.op, dec.device)
        dec.accepts = rule if callable(rule) else None
    return dec


def _pass_on(dec: Decision, args: tuple, why: str):
    """Run a call that ``dec``'s backend's rules refuse on the next candidate (no warning:
    a rule is not a failure). An explicit request for that backend raises instead."""
    nxt = _refused(dec, why)
    if nxt.accepts is not None:
        further = nxt.accepts(*args)
        if further is not None:
            return _pass_on(nxt, args, further)
    try:
        return nxt.kernel(*args)
    except Exception as e:
        return _fall_back(nxt, args, e)


def _refused(dec: Decision, why: str) -> Decision:
    """The decision a call goes to when ``dec``'s rules refuse it (cached on ``dec``)."""
    if dec.explicit or not dec.fallbacks:
        raise BackendUnavailable(f"xvendor.{dec.op}: backend {dec.backend!r} cannot serve "
                                 f"this call on {dec.device.device}: {why}")
    nxt = dec.passed_on
    if nxt is None:
        nxt = Decision(dec.op, dec.device, dec.dtype, dec.fallbacks[0],
                       f"{dec.backend}'s rules refuse this call, so the next candidate",
                       dec.fallbacks[1:], dict(dec.passed_over), shape_class=dec.shape_class)
        nxt.config = _tuned(_state.tuned_lookup, nxt, nxt.backend)
        dec.passed_on = _bind(nxt)
    nxt.passed_over = dict(dec.passed_over, **{dec.backend: f"its rules refuse this call: {why}"})
    return nxt


def decide(op: str, device: torch.device, dtype: torch.dtype, args: tuple = (),
           backend: str | None = None) -> Decision:
    """The cached decision for one call: what a ``dispatcher`` runs."""
    requested = backend or _requested.get() or _state.env_backend
    if not _state.tuning_resolved:
        _state.resolve_tuning()
    sc_fn = _state.ops.get(op)
    sc = sc_fn(*args) if _state.tuned_lookup is not None and sc_fn is not None and args else None
    key = (op, device, dtype, sc, requested)
    dec = _decisions.get(key)
    if dec is None:
        dec = _decisions[key] = _bind(select(op, device_info(device), dtype, sc, requested))
    return dec


def dispatcher(op: str, check: Callable | None = None) -> Callable:
    """THE call path of one op (decide, cached; run; fall back on error), as the closure
    its op module keeps (NOTE [dispatch cost]).

    With ``check`` (the op's argument rules), the closure takes unchecked arguments: it
    runs ``check`` on every call, except where the decided backend's record says its
    kernel rejects every bad input itself (``Backend.checks_inputs``); there ``check``
    runs when the decision is made (the dtype is part of its key) and after a kernel
    error, so bad input still surfaces as the op's ``ArgumentError``.

    NOTE [dispatch cost]: the eager budget is ~2 µs per call over the kernel, so the hot
    path is one context-variable read, one 3-tuple and one lookup in a per-op dictionary;
    the shape class is computed only while a tuned-winner lookup is installed.
    """
    fast = _fast_decisions.setdefault(op, {})
    state, requested_var = _state, _requested

    direct: dict = {}  # NOTE [straight to the floor]
    _direct_floors.append(direct)
    entry: list = []  # this closure, for the table's calls that need it after all

    def miss(device, dtype, args, requested):
        if check is not None:
            check(*args)
        dec = decide(op, device, dtype, args, requested)
        if state.tuned_lookup is None:  # shape-blind decisions: one per 3-tuple
            fast[(device, dtype, requested)] = dec
            if requested is None and dec.backend == FLOOR:
                direct[(device, dtype)] = _straight(dec, check,
                                                    functools.partial(entry[0], device, dtype))
        return dec

    def failed(dec, args, e):
        if check is not None:
            try:
                check(*args)
            except Exception as bad:  # the caller's bad input, named by the op
                raise bad from None
        return _fall_back(dec, args, e)

    if check is None:
        def run(device, dtype, args, backend=None):
            requested = backend or requested_var.get() or state.env_backend
            dec = fast.get((device, dtype, requested)) if state.tuned_lookup is None else None
            if dec is None:
                dec = miss(device, dtype, args, requested)
            if dec.accepts is not None and (why := dec.accepts(*args)) is not None:
                return _pass_on(dec, args, why)
            try:
                return dec.kernel(*args)
            except Exception as e:
                return failed(dec, args, e)
        run.direct = direct
        entry.append(run)
        return run

    def run_checked(device, dtype, args, backend=None):
        requested = backend or requested_var.get() or state.env_backend
        dec = fast.get((device, dtype, requested)) if state.tuned_lookup is None else None
        if dec is None:
            dec = miss(device, dtype, args, requested)
        elif not dec.checks_inputs:
            check(*args)
        if dec.accepts is not None and (why := dec.accepts(*args)) is not None:
            return _pass_on(dec, args, why)
        try:
            return dec.kernel(*args)
        except Exception as e:
            return failed(dec, args, e)
    run_checked.direct = direct
    entry.append(run_checked)
    return run_checked


def _straight(dec: Decision, check: Callable | None, again: Callable) -> Callable:
    """What a dispatcher's ``direct`` table holds for a decision that is the floor: torch's
    kernel, behind the op's check where the dispatcher would run it and the floor's
    per-call rule; ``again(args)``, the dispatcher, takes any call they refuse or the
    kernel raises on.

    NOTE [straight to the floor]: where the decision is torch's own kernel (the usual case
    on every device without a kernel of ours), the dispatcher's closure resolves the
    request, looks the decision up and reads its rule and check flags around torch's op,
    on every MoE layer and norm of a decode step (``python bench/op_overhead.py``,
    ``bench/dispatch_overhead.py``). So each dispatcher keeps ``dispatch.direct``,
    ``(device, dtype) -> fn(*args)``, and an op's public function, on a plain eager call
    with no backend requested (no ``backend`` argument and ``requested_in_context()`` is
    ``None``), calls ``fn`` with the arguments it would give the dispatcher. A call that
    ``fn``'s check or rule refuses, or whose kernel raises, goes to the dispatcher, which
    runs it again and reports the op's error, passes it on or falls back, exactly as
    without the table. An entry is made by the dispatcher's own miss, only while nothing
    is requested in any way (so no ``XVENDOR_BACKEND``: it is read once, at import and
    ``reset``) and no tuned-winner lookup is installed; everything that changes a decision
    empties every table (``_forget_decisions``).
    """
    kernel, rule = dec.kernel, dec.accepts
    if dec.checks_inputs:  # torch's op rejects every bad input itself
        check = None

    def straight(*args):
        try:
            if check is not None:
                check(*args)
            if rule is None or rule(*args) is None:
                return kernel(*args)
        except Exception:
            pass
        return again(args)
    return straight


requested_in_context = _requested.get  # the ``use_backend`` block around a call, if any


def floor_trainer(op: str) -> Callable:
    """For an op module's eager training calls: ``floor(device, dtype, args, backend)`` runs
    the floor's (torch's own) kernel and returns its output when this call's decision is the
    floor and the floor's rules take it, else returns ``None`` (also when the kernel raised:
    the op's own path then reports the error or falls back). It reads the same decision
    cache as ``dispatcher(op)`` (the caller has checked ``args``).

    NOTE [eager training on the floor]: where the decision is the floor, a call that needs
    gradients runs torch's kernel directly and torch's own autograd differentiates it, as
    in a compiled graph (``traced_floor``): a training step then pays what calling torch
    pays (an autograd.Function of ours costs ~50-150 us more per forward + backward of a
    small op on a 2-core CPU: ``python bench/op_overhead.py``). The floor kernels keep the
    extended semantics differentiable (grouped_mm's unowned rows get zero gradients).
    With a tuned-winner lookup installed (a tuning table, or a capture) it says ``None``:
    the backward's calls have shapes of their own, which a tuned kernel may serve.
    """
    fast = _fast_decisions.setdefault(op, {})
    state, requested_var = _state, _requested

    def floor(device, dtype, args, backend=None):
        requested = backend or requested_var.get() or state.env_backend
        dec = fast.get((device, dtype, requested)) if state.tuned_lookup is None else None
        if dec is None:
            dec = decide(op, device, dtype, args, requested)  # resolves the tuned-winner hook
            if state.tuned_lookup is not None:
                # tuned winners (or a capture) may serve the backward's own shapes: its
                # calls must reach the dispatcher, through the op's autograd
                return None
            fast[(device, dtype, requested)] = dec
        if dec.backend != FLOOR or (dec.accepts is not None and dec.accepts(*args) is not None):
            return None
        try:
            return dec.kernel(*args)
        except Exception:  # the op's autograd path runs the call again, and reports it
            return None
    return floor


def _fall_back(dec: Decision, args: tuple, exc: Exception):
    """After ``dec``'s kernel raised ``exc``: re-raise it, or warn once and try the next.

    A ``GateFailure`` refuses one compiled specialization only: the backend stays chosen
    for the calls its other specializations serve, and this call runs on the next one.
    """
    if dec.explicit or not dec.fallbacks:
        raise exc
    err = f"{type(exc).__name__}: {exc}"
    whole = not isinstance(exc, GateFailure)
    nxt = dec.fallbacks[0]
    _state.fallback_count += 1
    _state.fallbacks.append(Fallback(dec.op, str(dec.device.device), str(dec.dtype),
                                     dec.backend, nxt, err, whole))
    warn_key = (dec.backend, dec.op, dec.device.key, dec.dtype, getattr(exc, "identity", None))
    if warn_key not in _state.warned:
        _state.warned.add(warn_key)
        scope = ("will not be chosen again in this process" if whole else
                 "keeps serving its other specializations; this one is refused")
        warnings.warn(f"xvendor.{dec.op}: backend {dec.backend!r} failed on {dec.device.device} "
                      f"({dec.device.arch}, {dec.dtype}) and {scope}; falling back to "
                      f"{nxt!r}. Error: {err}", stacklevel=4)
    if whole:
        _state.failed[(dec.backend, dec.op, dec.device.key, dec.dtype)] = err
        _forget_decisions()
    following = Decision(dec.op, dec.device, dec.dtype, nxt, "fallback", dec.fallbacks[1:],
                         dict(dec.passed_over, **{dec.backend: err}),
                         shape_class=dec.shape_class)
    following.config = _tuned(_state.tuned_lookup, following, nxt)
    _bind(following)
    try:
        return following.kernel(*args)
    except Exception as e:
        return _fall_back(following, args, e)


def explain_request(op: str, info: devices.DeviceInfo, dtype: torch.dtype,
                    backend: str | None = None, dry_run: bool = False,
                    args: tuple = ()) -> Decision:
    """What a call would be decided (uncached, no kernel loaded): ``select`` with the
    explicit request and, given the call's ``args``, the shape class resolved as
    a ``dispatcher`` resolves them."""
    sc = None
    if not dry_run:
        if not _state.tuning_resolved:
            _state.resolve_tuning()
        sc_fn = _state.ops.get(op)
        if _state.tuned_lookup is not None and sc_fn is not None and args:
            sc = sc_fn(*args)
    dec = select(op, info, dtype, sc, requested_backend(backend), dry_run=dry_run)
    record = backends().get(dec.backend)
    while args and record is not None and record.accepts and dec.fallbacks:
        rule = _rules(record, op, info)
        why = rule(*args) if callable(rule) else rule
        if why is None:
            break
        nxt = Decision(op, info, dtype, dec.fallbacks[0],
                       f"{dec.backend}'s rules refuse this call ({why}), so the next candidate",
                       dec.fallbacks[1:],
                       dict(dec.passed_over, **{dec.backend: f"its rules refuse this call: {why}"}),
                       shape_class=sc)
        dec, record = nxt, backends().get(nxt.backend)
    return dec


def install_default_tuned_hook(hook: str | Callable | None) -> None:
    """The tuned-winner hook this process starts with and ``reset(configuration=True)``
    restores; installed by the package above the engine (NOTE [tuned-winner hook])."""
    _state.default_tuned_hook = hook
    set_tuned_lookup(hook)


def assume_constant_result(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result`` without its import of ``torch._dynamo``
    (about 2 s of every process start, paid by an eager job too: a restarted worker that
    rejoins its group waits for it). torch's decorator only sets this flag, which Dynamo
    reads when it traces a call (``tests/dispatch/test_engine_import.py`` checks that it
    still does)."""
    fn._dynamo_marked_constant = True
    return fn


@assume_constant_result
def _floor_decided(op: str, device: torch.device, dtype: torch.dtype,
                   backend: str | None) -> bool:
    """Whether the decision for (op, device, dtype) is the floor, taken at trace time
    (run eagerly by Dynamo, which also loads the floor's rule and kernel for the trace)."""
    if decide(op, device, dtype, (), backend).backend != FLOOR:
        return False
    if (op, device) not in _FLOOR_RULES:
        rule = _rules(_state.backends[FLOOR], op, device_info(device))
        _FLOOR_RULES[(op, device)] = rule if callable(rule) else None
        _FLOOR_KERNELS[op] = _state.kernel(FLOOR, op)
    return True


def traced_floor(op: str, device: torch.device, dtype: torch.dtype, args: tuple,
                 backend: str | None = None) -> Callable | None:
    """Under ``torch.compile``: torch's own kernel for a call whose decision is the floor
    and whose rules take it, so the graph holds torch's op (Inductor lowers, fuses and
    autotunes it as if the user had called torch); ``None``: keep the xvendor op.

    NOTE [decided at trace time]: the decision (explicit request, tuned winner, default)
    is read when the graph is traced; a later ``use_backend`` block does not retrace it.
    """
    if not _floor_decided(op, device, dtype, backend):
        return None
    # Filled when Dynamo ran _floor_decided (Dynamo may reuse its result without running it
    # again, so reset() keeps them: they change only when the torch record is replaced);
    # should they be empty, the xvendor op stays, which is still correct.
    kernel, key = _FLOOR_KERNELS.get(op), (op, device)
    if kernel is None or key not in _FLOOR_RULES:
        return None
    rule = _FLOOR_RULES[key]
    if rule is not None and rule(*args) is not None:
        return None
    return kernel


def floor_kernel(op: str) -> Callable:
    """The floor's (torch's own) kernel for ``op``."""
    return _state.kernel(FLOOR, op)


def floor_refuses(op: str, device: torch.device, args: tuple) -> str | None:
    """Why the floor's rules refuse this call, or ``None`` when they take it."""
    rule = _rules(_state.backends[FLOOR], op, device_info(device))
    if isinstance(rule, str):
        return rule
    return rule(*args) if callable(rule) else None


def never_reason(b: Backend, op: str, dev: devices.DeviceInfo) -> str | None:
    """Why ``b``'s rules never take ``op`` on ``dev`` (None: they may)."""
    return _never(b, op, dev)


failed_reason = _failed_reason  # why (backend, op, device, dtype) is out: it failed here


_FLOOR_RULES: dict = {}  # (op, device) -> the floor's per-call rule (None: every call)
_FLOOR_KERNELS: dict = {}  # op -> the floor's kernel
