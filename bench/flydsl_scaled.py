"""FlyDSL MX scaled GEMM: static report of the shipped configs (no AMD GPU needed).

    python bench/flydsl_scaled.py [--configs default|all] [--targets gfx950,gfx1250]
        [--json out.json]

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

import re
import sys
from collections import Counter

import isolated  # bench/isolated.py: one compile per process

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
    args = isolated.parser(__doc__.splitlines()[0], scaled_configs.TARGETS).parse_args(argv)
    if isolated.answer_one(args, compile_and_count):
        return 0
    print("| arch | format | config | VGPR | LDS B | WG/CU | spills | scratch "
          "| instruction (count) | C stores |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    records = []
    for job in jobs(args.targets.split(","), args.configs):
        rec = isolated.run(__file__, job, dict(zip(("arch", "fmt", "config", "recipe"), job)))
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
    return isolated.summarize(records, args.json)

if __name__ == "__main__":
    sys.exit(main())
