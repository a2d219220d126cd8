"""Tune one problem: prune, rank, gate, time, store.

A backend is tunable when its ``Backend`` record names a ``tunable`` ("module:attribute"),
an object with
    candidates(op, info, key) -> list[Candidate]      the config space for this chip
    run(op, config, args) -> output                   one launch with that config
(``registry.tunable(name)`` loads it). Each candidate may carry its cross-compile record
(for pruning).

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

from .. import devices
from .. import numerics as oracle
from . import model
from .problem import ProblemKey
from .store import TuningStore, Winner


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


def _oracle(op, args):
    """The fp64 oracle of one call's arguments (the op's own argument order)."""
    if op == "scaled_mm":
        a, b, sa, ra, sb, rb, _, _, bias, _ = args
        return oracle.scaled_mm(a, b, sa, ra, sb, rb, bias)
    if op == "scaled_grouped_mm":
        a, b, sa, ra, sb, rb, offs = args[:7]
        return oracle.scaled_grouped_mm(a, b, sa, ra, sb, offs)
    return oracle.gemm(*args[:3]) if op == "gemm" else oracle.grouped_mm(*args[:4])


def _gate(op, out, ref, out_dtype) -> str | None:
    err = oracle.rel_error(out, ref)
    tol = oracle.TOLERANCE[out_dtype]
    return None if err <= tol else f"gate failed: rel. error {err:.2e} > {tol:.0e}"


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
    records = [dict(c.record or {"ok": True}, config=c.config, config_name=c.name) for c in cands]
    kept, dropped = model.prune(records, key.m, key.n, key.k, key.groups)
    ranked = model.rank(kept, key.m, key.n, key.k, key.groups, key.dtype, info.arch)
    by_name = {c.name: c for c in cands}
    rows = [Row(n, by_name[n].config, None, None, f"pruned: {why}") for n, why in dropped.items()]
    ranked_rows = [Row(r["config_name"], r["config"], pred) for pred, r in ranked]
    rows += ranked_rows
    args0 = argsets[0]
    out_dtype = args0[-1] or args0[0].dtype
    ref = _oracle(op, args0)
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
            why = _gate(op, tunable.run(op, row.config, args0), ref, out_dtype)
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
                     time.monotonic() - t0)
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
