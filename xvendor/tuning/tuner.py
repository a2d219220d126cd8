"""Tune one problem: prune, rank, gate, time, store.

A backend is tunable when its ``Backend`` record names a ``tunable`` ("module:attribute"),
an object with
    candidates(op, info, key) -> list[Candidate]      the config space for this chip
    run(op, config, args) -> output                   one launch with that config
(``registry.tunable(name)`` loads it). Each candidate may carry its cross-compile record
(for pruning). A tunable may also rank its own ops:
    rank(op, info, key, candidates) -> ((predicted µs, record) best first, {name: why
                                         dropped}), or None where it leaves ranking to
                                         ``model`` (the GEMM family)
(the FlyDSL tunable's memory-bound model for rms_norm, rms_norm_backward and topk). An op
that neither the tunable nor ``model`` can rank is refused (``ValueError``), never ranked
with a GEMM model that knows nothing of it.

The gate is the op's own ``OpSpec`` (``xvendor.ops.SPECS[op]``): its fp64 ``oracle`` and,
where the op has one, its ``error`` hook, read as ``xvendor check`` reads them: the error
must be within ``numerics.TOLERANCE`` of the output dtype. Normalized hooks (scaled GEMMs,
rms_norm_backward, quantize) return 0 within tolerance and > 1 outside, so they pass and
fail the same way; topk's hook returns a plain normwise error, compared with the tolerance.

NOTE [tuning loop]: candidates -> static pruning (compile records, tile fit) -> analytical
ranking -> top-k -> for each, the correctness gate (the output against the fp64 oracle on
the tuning inputs; a failing config is never timed) -> timing (warm-up, median of
repeats over rotating input buffers, device events on GPUs) within the time budget ->
the fastest gated config is stored for (problem, backend), and for (problem, "*") when it
also beats ATen measured in the same run. Every stored winner records who measured it.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time
from dataclasses import dataclass, field

import torch

from .. import devices, numerics
from . import model
from .problem import ProblemKey
from .store import TuningStore, Winner


MODEL_OPS = ("gemm", "grouped_mm", "scaled_mm", "scaled_grouped_mm")  # what ``model`` ranks
MODEL_NAME = "xvendor.tuning.model v1"


@dataclass
class Candidate:
    name: str
    config: dict
    record: dict | None = None  # cross-compile record (ok, occupancy, ...) when one exists


@dataclass
class Row:
    name: str
    config: dict
    predicted_us: float | None
    measured_us: float | None = None
    status: str = "not timed (outside top-k)"


@dataclass
class TuneResult:
    key: ProblemKey
    rows: list
    winner: Row | None
    aten_us: float | None
    default_us: float | None
    rank_correlation: float
    seconds: float
    stored: list = field(default_factory=list)
    model: str = MODEL_NAME  # what ranked the candidates


def time_us(fn, argsets: list, device: torch.device, warmup: int = 2, reps: int = 7) -> float:
    """Median µs per call over ``reps`` calls cycling through ``argsets`` (rotating buffers)."""
    kind = device.type
    for i in range(warmup):
        fn(*argsets[i % len(argsets)])
    samples = []
    for i in range(reps):
        args = argsets[i % len(argsets)]
        if kind in ("cuda", "xpu"):
            mod = getattr(torch, kind)
            start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        else:
            t0 = time.perf_counter()
            fn(*args)
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def split_args(op: str, args: tuple) -> tuple[tuple, dict]:
    """A kernel's positional arguments (the op's parameters but ``backend``, in order) as
    the op's own (args, kwargs): keyword-only parameters (the scaled GEMMs' swizzles, bias,
    output dtype) go by name, as the op's oracle and error hook take them."""
    import inspect

    from ..ops import SPECS
    params = [p for p in inspect.signature(SPECS[op].function).parameters.values()
              if p.name != "backend"]
    pos, kw = [], {}
    for p, v in zip(params, args):
        (kw.__setitem__(p.name, v) if p.kind is p.KEYWORD_ONLY else pos.append(v))
    return tuple(pos), kw


def output_dtype(args: tuple, kwargs: dict) -> torch.dtype:
    """The dtype the gate's tolerance is taken for: the call's out_dtype / output_dtype
    where it names one, else the first argument's (``xvendor check``'s rule)."""
    for name in ("out_dtype", "output_dtype"):
        if isinstance(kwargs.get(name), torch.dtype):
            return kwargs[name]
    last = args[-1] if args else None
    return last if isinstance(last, torch.dtype) else args[0].dtype


def gate(op: str, out, expected, args: tuple) -> str | None:
    """None when ``out`` passes the op's correctness check against ``expected`` (its fp64
    oracle on ``args``, the kernel's positional arguments), else why it failed."""
    from ..ops import SPECS
    spec = SPECS[op]
    pos, kw = split_args(op, args)
    tol = numerics.TOLERANCE[output_dtype(pos, kw)]
    if spec.error is not None:  # the op's own comparison: dtypes, shapes and values
        err = spec.error(out, expected, pos, kw)
    elif not isinstance(out, torch.Tensor) or out.dtype != output_dtype(pos, kw) \
            or tuple(out.shape) != tuple(expected.shape):
        err = float("inf")
    else:
        err = numerics.rel_error(out, expected)
    return None if err <= tol else f"gate failed: error {err:.2e} > {tol:.0e}"


def oracle(op: str, args: tuple):
    """The fp64 answer of one call given as the kernel's positional arguments."""
    from ..ops import SPECS
    pos, kw = split_args(op, args)
    return SPECS[op].oracle(*pos, **kw)


def rank_candidates(op: str, tunable, info: devices.DeviceInfo, key: ProblemKey,
                    cands: list) -> tuple[list, dict, str]:
    """((predicted µs, record) best first, {name: why dropped}, the model's name): the
    tunable's own ``rank`` where it ranks ``op``, else ``model``'s prune and rank (the GEMM
    family); ``ValueError`` for an op neither ranks."""
    r = tunable.rank(op, info, key, cands) if hasattr(tunable, "rank") else None
    if r is not None:
        ranked, dropped = r
        return ranked, dropped, getattr(tunable, "MODEL_NAME", None) \
            or f"{type(tunable).__module__} rank"
    if op not in MODEL_OPS:
        raise ValueError(f"{type(tunable).__module__} does not rank {op!r} and the analytical "
                         f"model covers only {', '.join(MODEL_OPS)}")
    records = [dict(c.record or {"ok": True}, config=c.config, config_name=c.name) for c in cands]
    kept, dropped = model.prune(records, key.m, key.n, key.k, key.groups)
    return model.rank(kept, key.m, key.n, key.k, key.groups, key.dtype, info.arch), dropped, \
        MODEL_NAME


def provenance(info: devices.DeviceInfo, versions: dict) -> dict:
    return {"kind": "measured", "device": f"{info.product} ({info.arch}, {info.cu_count} CUs)",
            "host": platform.node(), "date": datetime.date.today().isoformat(),
            "versions": {"torch": torch.__version__, **versions}}


def tune(op: str, backend: str, tunable, info: devices.DeviceInfo, key: ProblemKey,
         argsets: list, store: TuningStore, *, top_k: int | None = None,
         budget_s: float | None = None, default_name: str | None = None,
         versions: dict | None = None, progress=None) -> TuneResult:
    t0 = time.monotonic()
    cands = tunable.candidates(op, info, key)
    ranked, dropped, model_name = rank_candidates(op, tunable, info, key, cands)
    by_name = {c.name: c for c in cands}
    rows = [Row(n, by_name[n].config, None, None, f"pruned: {why}") for n, why in dropped.items()]
    ranked_rows = [Row(r["config_name"], r["config"], pred) for pred, r in ranked]
    rows += ranked_rows
    args0 = argsets[0]
    ref = oracle(op, args0)
    from .. import reference
    aten = getattr(reference, op)
    aten_us = time_us(aten, argsets, info.device)
    for i, row in enumerate(ranked_rows):
        if top_k is not None and i >= top_k:
            break
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            row.status = "not timed (time budget spent)"
            continue
        try:
            why = gate(op, tunable.run(op, row.config, args0), ref, args0)
        except Exception as e:  # a config that crashes is a failed gate, not a crashed tune
            why = f"gate failed: {type(e).__name__}: {e}"
        if why:
            row.status = why
        else:
            row.measured_us = time_us(lambda *a, c=row.config: tunable.run(op, c, a),
                                      argsets, info.device)
            row.status = "timed"
        if progress:
            progress(row)
    timed = [r for r in rows if r.measured_us is not None]
    winner = min(timed, key=lambda r: r.measured_us) if timed else None
    default = next((r for r in timed if r.name == default_name), None)
    both = [r for r in timed if r.predicted_us is not None]
    rho = model.rank_correlation([r.predicted_us for r in both], [r.measured_us for r in both])
    res = TuneResult(key, rows, winner, aten_us, default.measured_us if default else None, rho,
                     time.monotonic() - t0, model=model_name)
    if winner is not None:
        prov = provenance(info, versions or {})
        w = Winner(backend, winner.config, winner.name, winner.measured_us, winner.predicted_us,
                   prov)
        own = ProblemKey(**{**key.__dict__, "backend": backend})
        store.put(own, w)
        res.stored.append(str(own))
        if winner.measured_us < aten_us:  # the backend beats ATen here: serve it first
            star = ProblemKey(**{**key.__dict__, "backend": "*"})
            store.put(star, w)
            res.stored.append(str(star))
    return res
