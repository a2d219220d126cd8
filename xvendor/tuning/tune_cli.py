"""``xvendor tune``: tune captured (or given) problems on the present device.

    XVENDOR_TUNE=capture python train.py            # records the problem keys it meets
    xvendor tune --from ~/.cache/xvendor/tuning/captured-1234.json [--budget S] [--top-k K]
    xvendor tune --shape gemm:4096x4096x4096 --shape grouped_mm:8192x2048x7168:64

Every backend whose record names a ``tunable`` and that can serve the device (explicit
request rules) is tuned (NOTE [tuning loop] in ``tuner``); the table shows each config's
prediction, measurement, and speedup over the backend's default and over ATen. A problem
that cannot be tuned (no input generator for it, a backend that raises) is reported with
its reason and skipped; the others are still tuned.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from rich.console import Console
from rich.table import Table

from .. import devices, registry
from . import serve, tuner
from .problem import ProblemKey, key_for
from .store import TuningStore


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("tune", help="tune captured problems on the present device")
    p.add_argument("--from", dest="source", help="a capture file (XVENDOR_TUNE=capture)")
    p.add_argument("--shape", action="append", default=[],
                   help="op:MxNxK[:G], e.g. gemm:4096x4096x4096 or grouped_mm:8192x2048x7168:64")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--backend", action="append", help="only these backends")
    p.add_argument("--budget", type=float, help="seconds per problem and backend")
    p.add_argument("--top-k", type=int, help="time only the k best predictions")
    p.add_argument("--device", help="default: the first accelerator, else cpu")
    p.add_argument("--export-flydsl", metavar="DIR",
                   help="also write the chip's flydsl winners (tuned, else the shipped "
                        "predictions, marked so) as FlyDSL offline-config artifacts "
                        "(FLYDSL_AUTOTUNE_CONFIG_DIR) into DIR")
    p.add_argument("--arch", help="with --export-flydsl and no tuning: export for a chip of "
                                  "this arch that is not here (its CU count and product from "
                                  "the arch table, or --cus/--product)")
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
    3Dx3D is batched. The result's problem key is ``key`` (tested).
    """
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


def parse_shape(text: str, info, dtype: str) -> ProblemKey:
    try:
        op, dims, *rest = text.split(":")
        m, n, k = (int(x) for x in dims.lower().split("x"))
        groups = int(rest[0]) if rest else 0
    except ValueError as e:
        raise SystemExit(f"xvendor tune: --shape {text!r}: expected op:MxNxK[:G] ({e})")
    dt = getattr(torch, dtype)
    if op == "gemm":
        args = (torch.empty(m, k, dtype=dt, device="meta"), torch.empty(k, n, dtype=dt, device="meta"),
                None, None)
    elif op == "grouped_mm":
        args = (torch.empty(m, k, dtype=dt, device="meta"),
                torch.empty(max(groups, 1), k, n, dtype=dt, device="meta"),
                torch.empty(max(groups, 1), dtype=torch.int32, device="meta"), None, None)
    else:
        raise SystemExit(f"xvendor tune: --shape {text!r}: op must be gemm or grouped_mm")
    return key_for(op, "*", info.arch, info.cu_count, info.product, args)


def tunable_backends(op: str, info, dtype, only=None) -> dict:
    """name -> tunable object, for the backends that declare one and can serve ``info``."""
    found = {}
    for name, b in registry.backends().items():
        if (only and name not in only) or not b.tunable:
            continue
        if b.why_not(op, info, dtype, explicit=True):
            continue
        found[name] = registry.tunable(name)
    return found


def main(args) -> int:
    console = Console() if sys.stdout.isatty() else Console(width=160)
    device = torch.device(args.device) if args.device else devices._default_device()
    info = registry.device_info(device)
    keys = [parse_shape(s, info, args.dtype) for s in args.shape]
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
            backends = tunable_backends(key.op, info, getattr(torch, key.dtype), args.backend)
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
