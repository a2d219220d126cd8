"""Cold and warm (cached) time of the full Triton cross-compile sweep over four targets.

Cold: an empty result cache and an empty Triton cache (a fresh temporary directory), so
every template x config x target is compiled by ``triton.compile`` in worker processes.
Warm: the same sweep again over the same directory: every record comes from the cache.
Prints both times and their ratio, the valid configs per target and template, and each
default config's VGPR/AGPR/LDS/occupancy, then a Markdown block for bench/RESULTS.md.

    python bench/compile_sweep.py [--targets gfx950,gfx1250,gfx942,sm_90] [--workers N]
                                  [--json PATH] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time

from xvendor.tuning import sweep


def _defaults_table(records) -> list[str]:
    rows = ["| target | template | default config | VGPR | AGPR | SGPR | LDS bytes | "
            "occupancy (WG/CU) | waves/SIMD | limit | mma |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["default"]:
            rows.append(f"| {r['target']} | {r['template']} | {r['config_name']} | "
                        f"{r.get('vgpr')} | {r.get('agpr')} | {r.get('sgpr') or '-'} | "
                        f"{r.get('lds_bytes')} | {r.get('occupancy')} | "
                        f"{r.get('waves_per_simd')} | {r.get('occupancy_limit')} | "
                        f"{r.get('mma_instr')} |" + ("" if r["ok"] else f" INVALID: {r['reason']}"))
    return rows


def _valid_table(records, targets) -> list[str]:
    rows = ["| target | gemm valid | grouped_mm valid | rejected (reason) |", "|---|---|---|---|"]
    for t in targets:
        mine = [r for r in records if r["target"] == t]
        cell = {}
        for tpl in ("gemm", "grouped_mm"):
            rs = [r for r in mine if r["template"] == tpl]
            cell[tpl] = f"{sum(r['ok'] for r in rs)}/{len(rs)}"
        bad = "; ".join(f"{r['template']} {r['config_name']}: {r['reason']}"
                        for r in mine if not r["ok"]) or "-"
        rows.append(f"| {t} | {cell['gemm']} | {cell['grouped_mm']} | {bad} |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default="gfx950,gfx1250,gfx942,sm_90")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--json", help="write the cold sweep's records here")
    p.add_argument("--cache-dir", help="use (and keep) this directory instead of a temporary one")
    args = p.parse_args()
    targets = args.targets.split(",")
    root = args.cache_dir or tempfile.mkdtemp(prefix="xvendor-sweep-")
    if args.cache_dir and os.listdir(root):
        raise SystemExit(f"--cache-dir {root} is not empty: a cold sweep needs an empty one")
    try:
        t0 = time.perf_counter()
        cold = sweep.sweep("triton", targets, "all", cache_dir=root, workers=args.workers)
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = sweep.sweep("triton", targets, "all", cache_dir=root, workers=args.workers)
        warm_s = time.perf_counter() - t0
    finally:
        if not args.cache_dir:
            shutil.rmtree(root, ignore_errors=True)
    assert all(r["cached"] for r in warm), "warm sweep recompiled something"
    import triton
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs; triton {triton.__version__}")
    print(f"configs: {len(cold)} (templates x configs x targets), workers: "
          f"{args.workers or os.cpu_count()}")
    print(f"cold sweep: {cold_s:.1f} s; warm sweep: {warm_s:.2f} s; "
          f"cold/warm = {cold_s / max(warm_s, 1e-9):.0f}x")
    print(f"sum of compile times: {sum(r.get('compile_s', 0) for r in cold):.1f} s")
    print()
    print("\n".join(_valid_table(cold, targets)))
    print()
    print("\n".join(_defaults_table(cold)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cold_s": cold_s, "warm_s": warm_s, "records": cold}, f, indent=1)


if __name__ == "__main__":
    main()
