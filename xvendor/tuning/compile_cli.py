"""``xvendor compile``: cross-compile the kernel templates for GPU targets and inspect them.

    xvendor compile --backend triton --targets gfx950,gfx1250,gfx942,sm_90 [--json PATH]
                    [--configs default|all] [--workers N] [--cache-dir DIR]
    xvendor compile --backend flydsl --targets gfx950,gfx1250 [...]

Prints a progress bar, a table of every config (ok or the reason it is rejected) and a
per-target summary; writes the JSON report (one record per template/target/config) when
``--json`` is given. Exit status 1 when any target's default config is invalid.

``add_parser(subparsers)`` adds the subcommand to the ``xvendor`` CLI (the handler is
``args.func(args) -> int``); ``summary_for_check()`` is the cross-compile summary of the
default configs that ``xvendor check`` shows (``flydsl_summary_for_check()`` the FlyDSL
one, which also says that FlyDSL numerics are unverified without the hardware). Standalone:
``python -m xvendor.tuning.compile_cli compile ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..rocm.configs import TARGETS as FLYDSL_TARGETS
from ..triton.configs import TARGETS as TRITON_TARGETS

BACKENDS = ("triton", "flydsl")
# each backend's cross-compile targets are its own data (triton/configs, rocm/configs)
ALL_TARGETS = tuple(TRITON_TARGETS)
BACKEND_TARGETS = {"triton": ALL_TARGETS, "flydsl": FLYDSL_TARGETS}
_CHECK_FIELDS = ("target", "template", "config_name", "ok", "reason", "vgpr", "agpr",
                 "spills", "lds_bytes", "occupancy", "mma_instr", "cached")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "compile", help="cross-compile kernel templates for GPU targets and inspect them",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default="triton")
    p.add_argument("--targets", default=None,
                   help="comma-separated targets (default: all of the backend's: "
                        + "; ".join(f"{b}: {','.join(t)}" for b, t in BACKEND_TARGETS.items()) + ")")
    p.add_argument("--configs", choices=("default", "all"), default="all",
                   help="each target's default config only, or the whole config space")
    p.add_argument("--json", metavar="PATH", help="write the report (JSON) here")
    p.add_argument("--workers", type=int, default=None,
                   help="compile processes in parallel (default: CPU count)")
    p.add_argument("--cache-dir", default=None,
                   help="result + Triton cache (default: $XVENDOR_CACHE_DIR or ~/.cache/xvendor)")
    p.set_defaults(func=main)
    return p


def _targets(text: str | None, backend: str = "triton") -> list[str]:
    known = BACKEND_TARGETS[backend]
    if text is None:
        return list(known)
    targets = [t.strip() for t in text.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(known))
    if unknown:
        raise SystemExit(f"xvendor compile: unknown targets {unknown} for --backend {backend}; "
                         f"known: {','.join(known)}")
    return targets


def run_sweep(backend, targets, which, *, workers=None, cache_dir=None, console=None):
    """The sweep with a rich progress bar; returns (records, seconds)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import sweep as sw
    tc = sw.toolchain(backend)
    jobs = sw.plan(tc, targets, which)
    with Progress(TextColumn("[bold]compile"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.description}"),
                  console=console, transient=False) as bar:
        task = bar.add_task("", total=len(jobs))

        def done(rec):
            bar.update(task, advance=1, description=f"{rec['target']} {rec['template']} "
                                                    f"{rec['config_name']}")
        t0 = time.perf_counter()
        records = sw.sweep(backend, jobs=jobs, cache_dir=cache_dir, workers=workers,
                           progress=done)
    return records, time.perf_counter() - t0


def render(records, console) -> None:
    from rich.table import Table
    table = Table(title="cross-compile results", show_lines=False)
    for col in ("target", "template", "config", "ok", "VGPR", "AGPR", "SGPR", "spills",
                "LDS", "occ", "mma", "s", "reason"):
        table.add_column(col, overflow="fold")
    for r in records:
        cfg = r["config_name"] + (" *" if r.get("default") else "")
        table.add_row(r["target"], r["template"], cfg, "[green]ok" if r["ok"] else "[red]no",
                      *(str(r.get(k, "")) if r.get(k) is not None else "-"
                        for k in ("vgpr", "agpr", "sgpr", "spills", "lds_bytes", "occupancy")),
                      _short_mma(r.get("mma_instr")),
                      "cached" if r.get("cached") else f"{r.get('compile_s', 0):.1f}",
                      r.get("reason", ""))
    console.print(table)
    summary = Table(title="per target (* = default config)")
    for col in ("target", "template", "valid", "default", "default verdict"):
        summary.add_column(col)
    for (target, template), group in _groups(records).items():
        d = next((r for r in group if r.get("default")), None)
        verdict = ("-" if d is None else
                   f"[green]ok[/] VGPR {d['vgpr']} LDS {d['lds_bytes']} occ {d['occupancy']}"
                   if d["ok"] else f"[red]{d['reason']}")
        summary.add_row(target, template, f"{sum(r['ok'] for r in group)}/{len(group)}",
                        d["config_name"] if d else "-", verdict)
    console.print(summary)


def _short_mma(name) -> str:
    if not name:
        return "-"
    return name.removeprefix("v_").replace(".mma_async.sync.aligned", "")


def _groups(records) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault((r["target"], r["template"]), []).append(r)
    return out


def main(args) -> int:
    from rich.console import Console
    console = Console()
    if not console.is_terminal:  # a log file: do not fold the table into 80 columns
        console = Console(width=200)
    targets = _targets(args.targets, args.backend)
    records, seconds = run_sweep(args.backend, targets, args.configs, workers=args.workers,
                                 cache_dir=args.cache_dir, console=console)
    render(records, console)
    valid = sum(r["ok"] for r in records)
    cached = sum(bool(r.get("cached")) for r in records)
    console.print(f"{valid}/{len(records)} configs valid; {cached} from cache; {seconds:.1f} s")
    if args.json:
        report = {"backend": args.backend, "targets": targets, "configs": args.configs,
                  "seconds": round(seconds, 2), "records": records}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        console.print(f"report written to {args.json}")
    bad = [r for r in records if r.get("default") and not r["ok"]]
    for r in bad:
        console.print(f"[red]default config invalid[/]: {r['target']} {r['template']} "
                      f"{r['config_name']}: {r['reason']}")
    return 1 if bad else 0


def _summary(toolchain: str, targets, cache_dir, extra: dict) -> list[dict]:
    """Cross-compile each target's default configs (cached): one row per (target, template)
    with ``_CHECK_FIELDS`` (+ ``extra``); if the toolchain cannot run here, one failed row
    per target with the reason. ``xvendor check`` reports, it does not crash."""
    from . import sweep as sw
    try:
        records = sw.sweep(toolchain, list(targets), "default", cache_dir=cache_dir)
    except Exception as e:
        return [{"target": t, "template": "*", "config_name": "-", "ok": False,
                 "reason": f"{toolchain} compile unavailable: {type(e).__name__}: {e}"}
                for t in targets]
    return [dict({k: r.get(k) for k in _CHECK_FIELDS}, **extra) for r in records]


def summary_for_check(targets=ALL_TARGETS, cache_dir=None) -> list[dict]:
    """The Triton section of ``xvendor check``."""
    return _summary("triton", targets, cache_dir, {})


FLYDSL_NOTE = ("static checks only: FlyDSL numerics are unverified until run on gfx950/gfx1250 "
               "hardware; the correctness gate checks each kernel there on first use")


def flydsl_summary_for_check(targets=BACKEND_TARGETS["flydsl"], cache_dir=None) -> list[dict]:
    """The FlyDSL section of ``xvendor check``, with a ``numerics`` column that says plainly
    what a compile cannot show."""
    return _summary("flydsl", targets, cache_dir, {"numerics": FLYDSL_NOTE})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="xvendor")
    add_parser(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args()
    sys.exit(ns.func(ns))
