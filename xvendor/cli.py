"""xvendor's command line: check (the main job), info, explain, compile, tune, port, ci, run,
coordinator, fr, demo.

``xvendor check`` prints the devices, the dispatch table (op x device -> backend and why,
for the present devices and, as a dry run, for the archs xvendor targets), runs every op
through the dispatch layer on every present device against an fp64 oracle, and exits
non-zero on any failure. ``--json`` prints the same as one JSON document.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import platform
import sys
from typing import TYPE_CHECKING

from .ci import cli as ci_cli

# torch, rich and the dispatch layer load inside the commands that use them: `xvendor ci`
# runs where only the standard library is installed (the matrix job of a CI).
if TYPE_CHECKING:
    from rich.console import Console

    from . import devices, registry

DRY_RUN_ARCHS = ("gfx950", "gfx1250", "gfx942", "sm_90", "pvc")
# Toolchain sections of `xvendor check`, as data: (title, "module:function"). Each function
# returns a list of row dicts with an "ok" key; a section that raises counts as failed.
CHECK_SECTIONS: list[tuple[str, str]] = [
    ("Triton cross-compile of each target's default configs (static checks)",
     "xvendor.tuning.compile_cli:summary_for_check"),
    ("FlyDSL compile of each target's default configs (static checks; numerics unverified "
     "without gfx950/gfx1250 hardware)", "xvendor.tuning.compile_cli:flydsl_summary_for_check"),
    ("SYCL kernels on the OpenCL CPU device (run-time compiled)",
     "xvendor.xpu.check:summary_for_check"),
]
_DISTRIBUTIONS = ("torch", "triton", "flydsl", "ziglang", "dpctl", "intel-sycl-rt",
                  "intel-opencl-rt", "numpy", "rich", "pytest", "hypothesis")


def _versions() -> dict[str, str | None]:
    found = {}
    for dist in _DISTRIBUTIONS:
        try:
            found[dist] = md.version(dist)
        except md.PackageNotFoundError:
            found[dist] = None
    return found


def info_report() -> dict:
    import torch

    from . import devices, registry
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_cuda": torch.version.cuda,
        "torch_hip": torch.version.hip,
        "torch_xpu": bool(hasattr(torch, "xpu") and torch.xpu._is_compiled()),
        "packages": _versions(),
        "devices": [_device_row(registry.device_info(d)) for d in devices.present_devices()],
        "backends": {name: registry.unavailable_reason(name) or "available"
                     for name in registry.backends()},
        "backend_plugin_problems": registry.plugin_problems(),
    }


def _device_row(info: devices.DeviceInfo) -> dict:
    return {"device": str(info.device), "vendor": info.vendor, "arch": info.arch,
            "product": info.product, "compute_units": info.cu_count}


def _decision_row(dec: registry.Decision) -> dict:
    return {"device": str(dec.device.device), "arch": dec.device.arch, "op": dec.op,
            "dtype": str(dec.dtype).removeprefix("torch."), "backend": dec.backend,
            "why": dec.reason, "fallbacks": list(dec.fallbacks), "passed_over": dec.passed_over}


def check_report(dtypes=None) -> dict:
    from . import devices, registry, selfcheck
    from .explain import dispatch_table
    dtypes = selfcheck.DTYPES if dtypes is None else dtypes
    present = [registry.device_info(d) for d in devices.present_devices()]
    results = [r for info in present for r in selfcheck.run(info.device, dtypes)]
    sections = _run_sections()
    return {
        "devices": [_device_row(i) for i in present],
        "dispatch": [_decision_row(d) for d in dispatch_table(infos=present)],
        "dispatch_dry_run": [_decision_row(d) for d in dispatch_table(
            infos=[devices.hypothetical(a) for a in DRY_RUN_ARCHS], dry_run=True)],
        "backends": {name: registry.unavailable_reason(name) or "available"
                     for name in registry.backends()},
        "correctness": [r.as_dict() for r in results],
        "sections": sections,
        "ok": all(r.ok for r in results) and all(row.get("ok", False)
                                                  for rows in sections.values() for row in rows),
    }


def _run_sections() -> dict[str, list[dict]]:
    import importlib
    found = {}
    for title, target in CHECK_SECTIONS:
        mod, _, fn = target.partition(":")
        try:
            found[title] = list(getattr(importlib.import_module(mod), fn)())
        except Exception as e:  # a broken toolchain is a failed section, not a crash
            found[title] = [{"ok": False, "error": f"{type(e).__name__}: {e}"}]
    return found


def _print_check(rep: dict, console: Console) -> None:
    from rich.table import Table
    t = Table(title="Devices")
    for col in ("device", "vendor", "arch", "product", "CUs"):
        t.add_column(col)
    for d in rep["devices"]:
        t.add_row(d["device"], d["vendor"], d["arch"], d["product"], str(d["compute_units"]))
    console.print(t)
    t = Table(title="Backends")
    t.add_column("backend")
    t.add_column("status")
    for name, status in rep["backends"].items():
        t.add_row(name, status)
    console.print(t)
    for key, title in (("dispatch", "Dispatch (present devices, bf16)"),
                       ("dispatch_dry_run", "Dispatch dry run (hypothetical devices, bf16; "
                                            "availability on that hardware assumed)")):
        t = Table(title=title)
        for col in ("device", "arch", "op", "backend", "why", "fallbacks"):
            t.add_column(col, overflow="fold")
        for d in rep[key]:
            t.add_row(d["device"], d["arch"], d["op"], d["backend"], d["why"],
                      " -> ".join(d["fallbacks"]) or "-")
        console.print(t)
    t = Table(title="Correctness vs fp64 oracle: max normwise relative error (tolerance)")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rep["correctness"]))
    for col in ("device", "op", "case", "backend", *dtypes):
        t.add_column(col)
    rows: dict[tuple, dict] = {}
    for r in rep["correctness"]:
        rows.setdefault((r["device"], r["op"], r["case"]), {})[r["dtype"]] = r
    for (dev, op, case), by_dtype in rows.items():
        cells = []
        for dt in dtypes:
            r = by_dtype.get(dt)
            cells.append("-" if r is None else
                         f"[green]PASS[/] {r['rel_error']:.1e} ({r['tolerance']:.0e})" if r["ok"]
                         else f"[red]FAIL[/] {r['rel_error']:.1e} ({r['tolerance']:.0e}) "
                              f"{r['error']}")
        # the backend that produced the output; "decided -> ran" when it fell back
        backends = sorted({f"{r['fell_back_from']} -> {r['backend']}" if r["fell_back_from"]
                           else r["backend"] for r in by_dtype.values()})
        t.add_row(dev, op, case, ",".join(backends), *cells)
    console.print(t)
    for title, rows in rep["sections"].items():
        t = Table(title=title)
        cols = list(dict.fromkeys(k for row in rows for k in row))
        for col in cols:
            t.add_column(col, overflow="fold")
        for row in rows:
            t.add_row(*[("[green]yes[/]" if row.get(c) else "[red]NO[/]") if c == "ok"
                        else str(row.get(c, "")) for c in cols])
        console.print(t)
    n_bad = sum(not r["ok"] for r in rep["correctness"])
    bad_sections = [t for t, rows in rep["sections"].items() if not all(r.get("ok") for r in rows)]
    console.print("[bold green]xvendor check: PASS[/]" if rep["ok"] else
                  f"[bold red]xvendor check: FAIL[/] ({n_bad} of {len(rep['correctness'])} "
                  f"cases failed; failed sections: {bad_sections or 'none'})")


def _console() -> Console:
    from rich.console import Console
    # Logs and CI capture stdout: rich would wrap tables at 80 columns there.
    return Console() if sys.stdout.isatty() else Console(width=150)


def cmd_check(args) -> int:
    rep = check_report()
    if args.json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        _print_check(rep, _console())
    return 0 if rep["ok"] else 1


def cmd_info(args) -> int:
    from rich.table import Table
    rep = info_report()
    if args.json:
        print(json.dumps(rep, indent=2, default=str))
        return 0
    console = _console()
    t = Table(title="xvendor environment")
    t.add_column("component")
    t.add_column("version / status")
    t.add_row("python", rep["python"])
    t.add_row("platform", rep["platform"])
    t.add_row("torch CUDA / HIP / XPU build",
              f"{rep['torch_cuda'] or '-'} / {rep['torch_hip'] or '-'} / "
              f"{'yes' if rep['torch_xpu'] else 'no'}")
    for dist, ver in rep["packages"].items():
        t.add_row(dist, ver or "[yellow]missing[/]")
    for d in rep["devices"]:
        t.add_row(f"device {d['device']}", f"{d['vendor']} {d['arch']} {d['product']}")
    for name, status in rep["backends"].items():
        t.add_row(f"backend {name}", status)
    for name, err in rep["backend_plugin_problems"].items():
        t.add_row(f"plugin {name}", f"[red]{err}[/]")
    console.print(t)
    return 0


def cmd_explain(args) -> int:
    import torch

    from . import devices, registry
    info = devices.hypothetical(args.arch) if args.arch else registry.device_info(
        torch.device(args.device))
    dtype = getattr(torch, args.dtype)
    print(registry.explain_request(args.op, info, dtype, args.backend, dry_run=bool(args.arch)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xvendor", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="devices, dispatch table, correctness of every op")
    c.add_argument("--json", action="store_true", help="one JSON document instead of tables")
    c.set_defaults(fn=cmd_check)
    i = sub.add_parser("info", help="versions of torch and the toolchains; what is missing")
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_info)
    e = sub.add_parser("explain", help="which backend an op would use, and why")
    e.add_argument("op", help="an xvendor op: gemm, grouped_mm, rms_norm, topk, ...")
    e.add_argument("--device", default="cpu")
    e.add_argument("--arch", help="a hypothetical device of this arch (dry run)")
    e.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    e.add_argument("--backend", help="ask about an explicit request")
    e.set_defaults(fn=cmd_explain)
    ci_cli.add_parser(sub)
    from .distributed.cli import add_parsers as add_distributed  # run, fr analyze, demo
    add_distributed(sub)
    from .tuning import compile_cli, tune_cli  # light: toolchains load only when used
    compile_cli.add_parser(sub)
    tune_cli.add_parser(sub)
    from .port import cli as port_cli  # xvendor port FILE.cu ...
    port_cli.add_parser(sub)
    return p


def _ci_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="xvendor", description=__doc__.splitlines()[0])
    ci_cli.add_parser(p.add_subparsers(dest="command", required=True))
    return p


def _expected_errors() -> tuple:
    # A BackendUnavailable can only come from a loaded registry; `xvendor ci` never loads it.
    registry = sys.modules.get(f"{__package__}.registry")
    return (ValueError,) + ((registry.BackendUnavailable,) if registry else ())


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # The full parser imports torch (other subcommands build their arguments from it).
    parser = _ci_parser() if argv[:1] == ["ci"] else build_parser()
    args = parser.parse_args(argv)
    try:
        return (getattr(args, "fn", None) or args.func)(args)
    except Exception as e:
        if not isinstance(e, _expected_errors()):  # MatrixError is a ValueError
            raise
        print(f"xvendor: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
