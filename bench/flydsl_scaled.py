"""FlyDSL MX scaled GEMM: static report of the shipped configs (no AMD GPU needed).

    python bench/flydsl_scaled.py [--configs default|all] [--targets gfx950,gfx1250] [--json out.json]

Compiles ``xvendor.rocm.scaled_launch``'s representative problem (M, N off the tile, K a
multiple of 32 but not of block_k) for gfx950 and gfx1250 in MXFP8 (e4m3), MXFP4 (e2m1) and
RowWise e4m3 to real code objects, one process per compile (LLVM errors abort a process),
and prints what ``xvendor.tuning.resources.inspect`` reads (registers, LDS, occupancy,
spills, the scaled matrix instruction) plus the C stores of the ISA by name
(``buffer_store_*``, each static instruction once). The representative N (136) is a
multiple of 8, so the stores are as wide as the accumulator runs allow. Nothing is timed;
the numerics need a gfx950/gfx1250 device (the correctness gate checks them on first use).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = re.compile(r"^\s+(buffer_store_\w+|global_store_\w+)\b", re.M)
VARIANTS = (("e4m3", "mx"), ("e2m1", "mx"), ("e4m3", "rowwise"))


def compile_and_count(arch: str, fmt: str, config: dict | None, recipe: str) -> dict:
    """One compile in this process: the judged resources and the store counts."""
    from xvendor.rocm import scaled_configs, scaled_launch
    from xvendor.tuning import resources
    raw = scaled_launch.compile_mx(arch, fmt, config, recipe)
    rec = resources.inspect(arch, raw)
    keep = ("ok", "reason", "vgpr", "agpr", "sgpr", "spills", "scratch", "lds_bytes",
            "occupancy", "mma_instr", "mma_count")
    exact = sum(scaled_configs.MX_INSTR[arch] in ln for ln in raw["asm"].splitlines())
    return {"arch": arch, "fmt": fmt, "config": config, "recipe": recipe, "exact": exact,
            "stores": dict(sorted(Counter(STORE.findall(raw["asm"])).items())),
            **{k: rec.get(k) for k in keep}}


def run_isolated(job: list, timeout_s: float = 600) -> dict:
    """``compile_and_count`` in a fresh interpreter; a crash becomes a record saying so."""
    proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(job)],
                          capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        arch, fmt, config, recipe = job
        return {"arch": arch, "fmt": fmt, "config": config, "recipe": recipe, "ok": False,
                "reason": f"compile process exited {proc.returncode}: {proc.stderr[-800:]}"}
    return json.loads(lines[-1])


def jobs(targets, which):
    from xvendor.rocm import scaled_configs
    for arch in targets:
        cfgs = scaled_configs.SPACES[arch] if which == "all" else (scaled_configs.default(arch),)
        for cfg in cfgs:
            for fmt, recipe in VARIANTS:
                yield [arch, fmt, cfg.to_dict(), recipe]


def main(argv=None) -> int:
    from xvendor.rocm import scaled_configs
    from xvendor.rocm.configs import Config
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", default=",".join(scaled_configs.TARGETS))
    p.add_argument("--configs", choices=("default", "all"), default="default")
    p.add_argument("--json", type=Path)
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(compile_and_count(*json.loads(args.one))))
        return 0
    print("| arch | format | config | VGPR | LDS B | WG/CU | spills | scratch "
          "| instruction (count) | C stores |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    records = []
    for job in jobs(args.targets.split(","), args.configs):
        rec = run_isolated(job)
        records.append(rec)
        arch, fmt, config, recipe = job
        name = {"mx": "MXFP8" if fmt == "e4m3" else "MXFP4"}.get(recipe, "RowWise e4m3")
        head = f"| {arch} | {name} | {Config(**config).name} |"
        if not rec["ok"]:
            print(f"{head} FAILED: {rec['reason']} |", flush=True)
            continue
        stores = ", ".join(f"{v} {k}" for k, v in rec["stores"].items())
        print(f"{head} {rec['vgpr']} | {rec['lds_bytes']} | {rec['occupancy']} | {rec['spills']} "
              f"| {rec['scratch']} | `{rec['mma_instr']}` x{rec['exact']} | {stores} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    bad = [r for r in records if not r["ok"] or r.get("spills") or r.get("scratch")]
    print(f"{len(records) - len(bad)}/{len(records)} code objects ok, no spills, no scratch")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
