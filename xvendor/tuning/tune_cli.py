"""``xvendor tune``: tune captured (or given) problems on the present device.

    XVENDOR_TUNE=capture python train.py            # records the problem keys it meets
    xvendor tune --from ~/.cache/xvendor/tuning/captured-1234.json [--budget S] [--top-k K]
    xvendor tune --shape gemm:4096x4096x4096 --shape grouped_mm:8192x2048x7168:64

Every backend whose module exposes ``TUNABLE`` and that can serve the device (explicit
request rules) is tuned (NOTE [tuning loop] in ``tuner``); the table shows each config's
prediction, measurement, and speedup over the backend's default and over ATen.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import torch
from rich.console import Console
from rich.table import Table

from .. import devices, registry
from . import serve, tuner
from .problem import ProblemKey, key_for


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
                   help="also write the chip's flydsl winners as FlyDSL offline-config "
                        "artifacts (FLYDSL_AUTOTUNE_CONFIG_DIR) into DIR")
    p.set_defaults(func=main)
    return p


def make_args(key: ProblemKey, device, gen: torch.Generator) -> tuple:
    """Inputs with the key's shape (M at its bucket), dtype and operand layouts."""
    dt = getattr(torch, key.dtype)
    out_dtype = None if key.out_dtype == key.dtype else getattr(torch, key.out_dtype)

    def mat(rows, cols, layout):
        t = torch.randn(*((rows, cols) if layout == "N" else (cols, rows)), generator=gen)
        t = t if layout == "N" else t.t()
        return t.to(device=device, dtype=dt)

    if key.op == "gemm":
        la, lb = key.layout
        return (mat(key.m, key.k, la), mat(key.k, key.n, lb), None, out_dtype)
    form, lay = key.layout.split(":")
    g, m, n, k = max(1, key.groups), key.m, key.n, key.k
    sizes = [m // g + (1 if i < m % g else 0) for i in range(g)]
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32).to(device)
    if form == "2Dx3D":
        w = torch.stack([mat(k, n, lay[1]) for _ in range(g)])
        return (mat(m, k, lay[0]), w, offs, None, out_dtype)
    if form == "3Dx3D":
        return (torch.stack([mat(m // g or 1, k, lay[0]) for _ in range(g)]),
                torch.stack([mat(k, n, lay[1]) for _ in range(g)]), None, None, out_dtype)
    raise ValueError(f"xvendor tune: layout {form} is not generated here yet (2Dx3D, 3Dx3D)")


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
    found = {}
    for name, b in registry.backends().items():
        if only and name not in only:
            continue
        if b.why_not(op, info, dtype, explicit=True):
            continue
        try:
            mod = importlib.import_module(b.module)
        except Exception:
            continue
        if hasattr(mod, "TUNABLE"):
            found[name] = mod
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
    status = 1
    for key in keys:
        dtype = getattr(torch, key.dtype)
        backends = tunable_backends(key.op, info, dtype, args.backend)
        if not backends:
            console.print(f"[yellow]{key.op} {key.layout} {key.m}x{key.n}x{key.k}: no tunable "
                          f"backend can run on {device} ({info.arch})[/]")
            continue
        argsets = [make_args(key, device, gen) for _ in range(3)]
        for name, mod in backends.items():
            with console.status(f"tuning {name} for {key.op} {key.m}x{key.n}x{key.k}"):
                res = tuner.tune(key.op, name, mod.TUNABLE, info, key, argsets, store,
                                 top_k=args.top_k, budget_s=args.budget,
                                 default_name=getattr(mod.TUNABLE, "default_name", None))
            _print(console, name, res)
            status = 0 if res.winner is not None else status
    if args.export_flydsl:
        from .flydsl_export import export_store
        paths = export_store(store, args.export_flydsl)
        console.print(f"exported {len(paths)} flydsl winner(s) to {args.export_flydsl}")
        status = 0 if not keys else status
    return status


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
