"""``xvendor tune``: tune captured (or given) problems on the present device.

    XVENDOR_TUNE=capture python train.py            # records the problem keys it meets
    xvendor tune --from ~/.cache/xvendor/tuning/captured-1234.json [--budget S] [--top-k K]
    xvendor tune --shape gemm:4096x4096x4096 --shape grouped_mm:8192x2048x7168:64
    xvendor tune --shape scaled_mm:8192x8192x4096:mx:e4m3xe4m3 --arch gfx950

Every backend whose record names a ``tunable`` and that can serve the device (explicit
request rules) is tuned (NOTE [tuning loop] in ``tuner``); the table shows each config's
prediction, measurement, and speedup over the backend's default and over ATen. A problem
that cannot be tuned (no input generator for it, a backend that raises) is reported with
its reason and skipped; the others are still tuned.

Scaled ops (``scaled_mm``, ``scaled_grouped_mm``): a ``--shape`` ending in ``:RECIPE:AxB``
(else ``--scaled RECIPE:AxB``) names the recipe and element formats (NOTE [scaled problem
keys] in ``problem``), ``--dtype`` the output dtype; captured scaled keys carry theirs.

Memory-bound ops (FlyDSL's ``rms_norm``, ``rms_norm_backward``, ``topk``): ``--shape
rms_norm:RxH`` / ``rms_norm_backward:RxH`` (R rows of H elements) and ``topk:RxN:K`` (R rows
of N, the k largest); their keys are ``xvendor.rocm.tunable.problem_key``'s (layout "rows",
M = rows, N = row length, K = topk's k, exact rows), ranked by the tunable's own model.

``--arch`` with problems (a chip that is not here): the loop stops after ranking
(``predict``): candidates, pruning with the real cross-compile records, the analytical
model; nothing is gated or timed, and each backend's best prediction is stored for
(problem, backend) only, marked ``"kind": "predicted"`` (never for ``*``: a prediction
never makes a backend the default), in the table of that arch and CU count.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time

import torch
from rich.console import Console
from rich.table import Table

from .. import devices, registry, shapes
from . import serve, tuner
from .problem import SCALED_OPS, ProblemKey, key_for, scaled_inputs
from .store import TuningStore, Winner


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("tune", help="tune captured problems on the present device")
    p.add_argument("--from", dest="source", help="a capture file (XVENDOR_TUNE=capture)")
    p.add_argument("--shape", action="append", default=[],
                   help="op:MxNxK[:G], e.g. gemm:4096x4096x4096 or grouped_mm:8192x2048x7168:64; "
                        "memory-bound ops: rms_norm:RxH, rms_norm_backward:RxH, topk:RxN:K; "
                        "scaled ops may end in :RECIPE:AxB (else --scaled), e.g. "
                        "scaled_mm:8192x8192x4096:mx:e2m1xe2m1")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"],
                   help="input and output dtype (scaled ops: the output dtype)")
    p.add_argument("--scaled", default="mx:e4m3xe4m3", metavar="RECIPE:AxB",
                   help="recipe (tensorwise|rowwise|mx) and element formats (e4m3|e5m2|e2m1) "
                        "of scaled_mm / scaled_grouped_mm shapes that name none "
                        "(default mx:e4m3xe4m3)")
    p.add_argument("--backend", action="append", help="only these backends")
    p.add_argument("--budget", type=float, help="seconds per problem and backend")
    p.add_argument("--top-k", type=int, help="time only the k best predictions")
    p.add_argument("--device", help="default: the first accelerator, else cpu")
    p.add_argument("--export-flydsl", metavar="DIR",
                   help="also write the chip's flydsl winners (tuned, else the shipped "
                        "predictions, marked so) as FlyDSL offline-config artifacts "
                        "(FLYDSL_AUTOTUNE_CONFIG_DIR) into DIR")
    p.add_argument("--arch", help="a chip of this arch that is not here (its CU count and "
                                  "product from the arch table, or --cus/--product): with "
                                  "--shape, predict (rank without timing) and store the "
                                  "predictions; with --export-flydsl, export its winners "
                                  "(after storing the predictions, when both are given)")
    p.add_argument("--cus", type=int, help="with --arch: the chip's compute-unit count")
    p.add_argument("--product", help="with --arch: the chip's product name as torch reports it")
    p.set_defaults(func=main)
    return p


def _even_split(total: int, groups: int, device) -> torch.Tensor:
    """int32 cumulative ends of ``groups`` near-equal groups over ``total``."""
    sizes = [total // groups + (1 if i < total % groups else 0) for i in range(groups)]
    return torch.tensor(sizes).cumsum(0).to(torch.int32).to(device)


def make_args(key: ProblemKey, device, gen: torch.Generator) -> tuple:
    """Inputs with the key's shape (M at its bucket), dtype, operand layouts and form.

    The four grouped forms as the ops define them (``xvendor.shapes``): 2Dx3D splits M
    rows over the groups, 3Dx2D splits N columns, 2Dx2D splits K (the weight gradient),
    3Dx3D is batched; scaled ops: ``_scaled_args``. The result's problem key is ``key``
    (tested).
    """
    if key.op in SCALED_OPS:
        return _scaled_args(key, device, gen)
    if key.op in ROW_OPS:
        return _row_args(key, device, gen)
    dt = getattr(torch, key.dtype)
    out_dtype = None if key.out_dtype == key.dtype else getattr(torch, key.out_dtype)

    def mat(*shape, layout="N"):
        """(..., rows, cols) with the last dim contiguous ("N") or the one before ("T")."""
        if layout == "N":
            t = torch.randn(*shape, generator=gen)
        else:
            t = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=gen).transpose(-2, -1)
        return t.to(device=device, dtype=dt)

    if key.op == "gemm":
        la, lb = key.layout
        return (mat(key.m, key.k, layout=la), mat(key.k, key.n, layout=lb), None, out_dtype)
    if key.op != "grouped_mm":
        raise ValueError(f"no input generator for op {key.op!r}")
    form, _, (la, lb) = key.layout.partition(":")
    g, m, n, k = max(1, key.groups), key.m, key.n, key.k
    if form == "2Dx3D":
        return (mat(m, k, layout=la), mat(g, k, n, layout=lb), _even_split(m, g, device),
                None, out_dtype)
    if form == "3Dx2D":
        return (mat(g, m, k, layout=la), mat(k, n, layout=lb), _even_split(n, g, device),
                None, out_dtype)
    if form == "2Dx2D":
        return (mat(m, k, layout=la), mat(k, n, layout=lb), _even_split(k, g, device),
                None, out_dtype)
    if form == "3Dx3D":
        return (mat(g, m, k, layout=la), mat(g, k, n, layout=lb), None, None, out_dtype)
    raise ValueError(f"unknown grouped_mm form {form!r} (forms: 2Dx3D, 3Dx2D, 2Dx2D, 3Dx3D)")


ROW_OPS = ("rms_norm", "rms_norm_backward", "topk")  # keys: layout "rows", M rows of N
NORM_EPS = 1e-6  # the tuning calls' eps (a typical LLM RMSNorm's)


def _row_args(key: ProblemKey, device, gen) -> tuple:
    """The kernel's positional arguments of a memory-bound op's key: ``key.m`` rows of
    ``key.n`` fresh normal values (rms_norm: x, an (N,) weight, eps; the backward: grad, x,
    weight, eps; topk: x, k, the last dim, largest, sorted)."""
    dt = getattr(torch, key.dtype)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dt)

    if key.op == "topk":
        return (rand(key.m, key.n), key.k, -1, True, True)
    if key.op == "rms_norm":
        return (rand(key.m, key.n), rand(key.n), NORM_EPS)
    return (rand(key.m, key.n), rand(key.m, key.n), rand(key.n), NORM_EPS)


def _row_key(text: str, op: str, dims: str, rest: list, info, dtype: str) -> ProblemKey:
    """The key of ``op:RxH`` (rms_norm, rms_norm_backward) or ``topk:RxN:K``."""
    from ..rocm.tunable import problem_key
    form = "topk:RxN:K" if op == "topk" else f"{op}:RxH"
    try:
        rows, n = (int(x) for x in dims.lower().split("x"))
        k = int(rest[0]) if op == "topk" and len(rest) == 1 else 0
        if (op == "topk") != (len(rest) == 1) or len(rest) > 1:
            raise ValueError(f"{len(rest) + 1} ':'-separated field(s) after the op")
    except ValueError as e:
        raise SystemExit(f"xvendor tune: --shape {text!r}: expected {form} ({e})")
    if rows < 1 or n < 1:
        raise SystemExit(f"xvendor tune: --shape {text!r}: rows and row length must be >= 1, "
                         f"got {rows}x{n}")
    if op == "topk" and not 1 <= k <= n:
        raise SystemExit(f"xvendor tune: --shape {text!r}: k must be in 1..{n} (the row "
                         f"length), got {k}")
    key = problem_key(op, info.arch, rows, n, k, dtype, info.cu_count, info.product)
    return ProblemKey(**{**key.__dict__, "backend": "*"})


_QDTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
            "e2m1": torch.float4_e2m1fn_x2}


def _quantized(fmt, recipe, lead, rows, k, k_last, gen, device):
    """(data, scale) of a (*lead, rows, K) operand quantized along K: K contiguous
    (``k_last``) or a transposed view; scales (*lead, rows, 1) RowWise, (*lead, rows, K/32)
    MX, () TensorWise."""
    from ..ops.quantize import quantize
    if k_last:
        return quantize(torch.randn(*lead, rows, k, generator=gen).to(device), _QDTYPES[fmt],
                        recipe, dim=-1)
    data, scale = quantize(torch.randn(*lead, k, rows, generator=gen).to(device),
                           _QDTYPES[fmt], recipe, dim=-2)
    return data.transpose(-2, -1), (scale if scale.dim() == 0 else scale.transpose(-2, -1))


def _scaled_args(key: ProblemKey, device, gen) -> tuple:
    """A scaled call's arguments, normalized as the ops hand them to kernels: operands of
    the key's formats and layouts quantized along K with its recipe (``xvendor.quantize``),
    b as the transpose of its (N, K) rows (the scale orientation torch takes)."""
    from torch.nn.functional import ScalingType
    recipe, fa, fb = key.scaled
    rid = {"tensorwise": ScalingType.TensorWise, "rowwise": ScalingType.RowWise,
           "mx": ScalingType.BlockWise1x32}[recipe].value
    out = getattr(torch, key.out_dtype)
    form, _, (la, lb) = key.layout.rpartition(":")
    g, m, n, k = max(1, key.groups), key.m, key.n, key.k
    lead = (g,) if form == "2Dx3D" else ()
    a, sa = _quantized(fa, recipe, (), m, k, la == "N", gen, device)
    w, sw = _quantized(fb, recipe, lead, n, k, lb == "T", gen, device)
    b = w.transpose(-2, -1)
    if key.op == "scaled_mm":
        sb = sw.transpose(-2, -1) if recipe == "rowwise" else sw  # RowWise wants (1, N)
        return (a, b, sa, rid, sb, rid, 0, 0, None, out)
    if form == "2Dx3D":
        if recipe == "rowwise":  # (M,) and (G, N)
            sa, sw = sa.squeeze(-1), sw.squeeze(-1)
        return (a, b, sa, rid, sw, rid, _even_split(m, g, device), 0, 0, out)
    if form == "2Dx2D":  # ragged K: group starts on 32-element blocks (one E8M0 block each)
        ends = (_even_split(k // 32, g, device) * 32).to(torch.int32)
        return (a, b, sa, rid, sw, rid, ends, 0, 0, out)
    raise ValueError(f"unknown scaled_grouped_mm form {form!r} (forms: 2Dx3D, 2Dx2D)")


def _scaled_key(op, m, n, k, groups, info, dtype, scaled) -> ProblemKey:
    if scaled_inputs(scaled) is None:
        raise SystemExit(f"xvendor tune: --scaled {scaled!r}: expected RECIPE:AxB with recipe "
                         f"tensorwise|rowwise|mx and formats e4m3|e5m2|e2m1")
    layout = "NT" if op == "scaled_mm" else "2Dx3D:NT"
    return ProblemKey(op, "*", info.arch, info.cu_count, info.product, scaled, dtype, layout,
                      shapes.m_bucket(m), n, k, shapes.pow2_bucket(groups) if groups else 0)


def parse_shape(text: str, info, dtype: str, scaled: str = "mx:e4m3xe4m3") -> ProblemKey:
    op, _, tail = text.partition(":")
    if op in ROW_OPS:
        dims, *rest = tail.split(":")
        return _row_key(text, op, dims, rest, info, dtype)
    try:
        op, dims, *rest = text.split(":")
        if op in SCALED_OPS and len(rest) >= 2 and scaled_inputs(":".join(rest[-2:])):
            scaled, rest = ":".join(rest[-2:]), rest[:-2]  # op:MxNxK[:G]:RECIPE:AxB
        m, n, k = (int(x) for x in dims.lower().split("x"))
        groups = int(rest[0]) if rest else 0
    except ValueError as e:
        raise SystemExit(f"xvendor tune: --shape {text!r}: expected op:MxNxK[:G] (scaled ops: "
                         f"op:MxNxK[:G][:RECIPE:AxB]) ({e})")
    if op in SCALED_OPS:
        if op == "scaled_grouped_mm" and groups < 1:
            raise SystemExit(f"xvendor tune: --shape {text!r}: scaled_grouped_mm needs :G")
        return _scaled_key(op, m, n, k, groups, info, dtype, scaled)
    dt = getattr(torch, dtype)
    if op == "gemm":
        args = (torch.empty(m, k, dtype=dt, device="meta"), torch.empty(k, n, dtype=dt, device="meta"),
                None, None)
    elif op == "grouped_mm":
        args = (torch.empty(m, k, dtype=dt, device="meta"),
                torch.empty(max(groups, 1), k, n, dtype=dt, device="meta"),
                torch.empty(max(groups, 1), dtype=torch.int32, device="meta"), None, None)
    else:
        raise SystemExit(f"xvendor tune: --shape {text!r}: op must be gemm, grouped_mm, "
                         f"scaled_mm, scaled_grouped_mm, rms_norm, rms_norm_backward or topk")
    return key_for(op, "*", info.arch, info.cu_count, info.product, args)


def decision_dtype(key: ProblemKey) -> torch.dtype:
    """The dtype the dispatch layer decides ``key``'s calls on (scaled ops: the output's)."""
    return getattr(torch, key.out_dtype if key.op in SCALED_OPS else key.dtype)


def tunable_backends(op: str, info, dtype, only=None, dry_run=False) -> dict:
    """name -> tunable object, for the backends that declare one and can serve ``info``
    (``dry_run``: a chip that is not here; this machine's probes are not asked)."""
    found = {}
    for name, b in registry.backends().items():
        if (only and name not in only) or not b.tunable:
            continue
        if b.why_not(op, info, dtype, explicit=True, dry_run=dry_run):
            continue
        found[name] = registry.tunable(name)
    return found


def predict(key: ProblemKey, tunable, info) -> tuner.TuneResult:
    """The tuning loop up to its ranking step (NOTE [tuning loop]): what can be done for a
    chip that is not here. Rows: pruned (with the reason) or predicted; the winner is the
    best prediction, neither gated nor timed."""
    t0 = time.monotonic()
    cands = tunable.candidates(key.op, info, key)
    ranked, dropped, model_name = tuner.rank_candidates(key.op, tunable, info, key, cands)
    configs = {c.name: c.config for c in cands}
    rows = [tuner.Row(n, configs[n], None, None, f"pruned: {why}") for n, why in dropped.items()]
    best = [tuner.Row(r["config_name"], r["config"], us, None,
                      "predicted (no device here: not gated, not timed)") for us, r in ranked]
    return tuner.TuneResult(key, rows + best, best[0] if best else None, None, None,
                            float("nan"), time.monotonic() - t0, model=model_name)


def store_prediction(store: TuningStore, backend: str, res: tuner.TuneResult) -> None:
    """Store ``res``'s best prediction for (problem, ``backend``) only, marked predicted."""
    w = res.winner
    own = ProblemKey(**{**res.key.__dict__, "backend": backend})
    store.put(own, Winner(backend, w.config, w.name, None, w.predicted_us, {
        "kind": "predicted", "model": res.model,
        "from": f"{backend} cross-compile records (no spills, LDS within limit, the "
                f"instructions the template must issue) ranked by {res.model}",
        "date": datetime.date.today().isoformat()}))
    res.stored.append(str(own))


def _absent_chip(args):
    """The DeviceInfo of ``--arch`` (with ``--cus``/``--product``), a chip not here."""
    spec = devices.arch_spec(args.arch)
    return dataclasses.replace(devices.hypothetical(args.arch), cu_count=args.cus or spec.cus,
                               product=args.product or spec.product)


def _predict_all(console, args, keys, info) -> int:
    """``--arch`` with problems: rank and store predictions for a chip that is not here."""
    store = TuningStore(info.arch, info.cu_count)
    stored = 0
    for key in keys:
        what = f"{key.op} {key.layout} {key.m}x{key.n}x{key.k} G~{key.groups} {key.dtype}"
        backends = tunable_backends(key.op, info, decision_dtype(key), args.backend, True)
        if not backends:
            console.print(f"[yellow]{what}: skipped: no tunable backend serves {info.arch}[/]")
        for name, tunable in backends.items():
            try:
                res = predict(key, tunable, info)
            except Exception as e:  # one problem that cannot be ranked never stops the run
                console.print(f"[yellow]{what} on {name}: skipped: {type(e).__name__}: {e}[/]")
                continue
            if res.winner is not None:
                store_prediction(store, name, res)
                stored += 1
            _print(console, name, res)
    console.print(f"xvendor tune: {stored} prediction(s) stored for {info.arch} "
                  f"({info.cu_count} CUs), {len(keys)} problem(s); nothing was timed")
    return 0 if stored else 1


def main(args) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=160)
    if args.arch and args.shape:  # a chip not here: predict, then export if asked
        info = _absent_chip(args)
        status = _predict_all(console, args, [parse_shape(s, info, args.dtype, args.scaled)
                                              for s in args.shape], info)
        if args.export_flydsl:
            status = _export(console, args, info, None, [], status) or status
        return status
    device = torch.device(args.device) if args.device else devices._default_device()
    info = registry.device_info(device)
    keys = [parse_shape(s, info, args.dtype, args.scaled) for s in args.shape]
    if args.source:
        keys += [k for k in serve.captured_keys(args.source)
                 if k.arch == info.arch and k.cus == info.cu_count]
    if not keys and not args.export_flydsl:
        console.print("xvendor tune: nothing to tune (give --from FILE or --shape)")
        return 2
    store = serve.store_for(info)
    gen = torch.Generator().manual_seed(0)
    tuned = skipped = 0
    for key in keys:
        what = f"{key.op} {key.layout} {key.m}x{key.n}x{key.k} G~{key.groups}"
        try:
            argsets = [make_args(key, device, gen) for _ in range(3)]
            backends = tunable_backends(key.op, info, decision_dtype(key), args.backend)
            if not backends:
                raise ValueError(f"no tunable backend can run on {device} ({info.arch})")
        except Exception as e:  # one problem that cannot be tuned never stops the run
            console.print(f"[yellow]{what}: skipped: {type(e).__name__}: {e}[/]")
            skipped += 1
            continue
        for name, tunable in backends.items():
            try:
                with console.status(f"tuning {name} for {what}"):
                    res = tuner.tune(key.op, name, tunable, info, key, argsets, store,
                                     top_k=args.top_k, budget_s=args.budget,
                                     default_name=_default_name(tunable, info, key))
            except Exception as e:
                console.print(f"[yellow]{what} on {name}: skipped: {type(e).__name__}: {e}[/]")
                skipped += 1
                continue
            _print(console, name, res)
            tuned += res.winner is not None
    status = 0 if tuned else 1
    if keys:
        console.print(f"xvendor tune: {tuned} winner(s) stored, {skipped} skipped, "
                      f"{len(keys)} problem(s)")
    if args.export_flydsl:
        status = _export(console, args, info, store, keys, status)
    return status


def _export(console, args, info, store, keys, status) -> int:
    from .flydsl_export import NothingToExport, export_store
    product = info.product
    if args.arch:
        if keys:
            raise SystemExit("xvendor tune: --arch exports for a chip that is not here; it "
                             "cannot be combined with tuning (--from/--shape)")
        spec = devices.arch_spec(args.arch)
        cus, product = args.cus or spec.cus, args.product or spec.product
        store = TuningStore(args.arch, cus)
    try:
        paths = export_store(store, args.export_flydsl, product=product)
    except NothingToExport as e:
        console.print(f"[red]xvendor tune --export-flydsl: {e}; nothing written[/]")
        return 1
    kinds = sorted({json.loads(p.read_text()).get("provenance", {}).get("kind", "?")
                    for p in paths})
    console.print(f"exported {len(paths)} flydsl winner(s) ({', '.join(kinds)}) to "
                  f"{args.export_flydsl}")
    return 0 if not keys else status


def _default_name(tunable, info, key) -> str | None:
    """The config the backend runs untuned: a name, or ``default_name(arch, op)``."""
    name = getattr(tunable, "default_name", None)
    return name(info.arch, key.op) if callable(name) else name


def _print(console, backend, res) -> None:
    k = res.key
    t = Table(title=f"{backend}: {k.op} {k.layout} M~{k.m} N={k.n} K={k.k} G~{k.groups} "
                    f"{k.dtype} on {k.arch} ({res.seconds:.1f} s, rank corr. "
                    f"{res.rank_correlation:.2f})")
    for col in ("config", "predicted µs", "measured µs", "vs default", "vs ATen", "status"):
        t.add_column(col)
    for r in sorted(res.rows, key=lambda r: (r.measured_us is None, r.measured_us or 0)):
        vs_def = f"{res.default_us / r.measured_us:.2f}x" if r.measured_us and res.default_us else "-"
        vs_aten = f"{res.aten_us / r.measured_us:.2f}x" if r.measured_us and res.aten_us else "-"
        mark = " [bold green]<- winner[/]" if res.winner is r else ""
        t.add_row(r.name, f"{r.predicted_us:.1f}" if r.predicted_us is not None else "-",
                  f"{r.measured_us:.1f}" if r.measured_us is not None else "-", vs_def, vs_aten,
                  r.status + mark)
    console.print(t)
    console.print(f"stored: {', '.join(res.stored) or 'nothing (no config passed the gate)'}")
