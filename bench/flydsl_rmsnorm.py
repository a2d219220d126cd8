"""FlyDSL RMSNorm: the static report of each compiled default next to a memory-bound
prediction per shape (no AMD GPU here: nothing is timed, numerics are unverified).

RMSNorm is memory-bound: the prediction is bytes moved (read x once, read the weight once,
write y) over the arch's HBM bandwidth (``xvendor.devices.ARCHS[arch].hbm_tbps``). The
kernel reads x twice (sum of squares, then scale); the second read is the workgroup's own
row, just read, so it is counted as a cache hit. Launch latency and the tail of the last
wave of workgroups are not modelled. The code objects are the ones the backend would
launch for each shape (``configs.norm_for``), compiled by the sweep's workers (cached).

    python bench/flydsl_rmsnorm.py [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import platform

from xvendor import devices
from xvendor.rocm import configs, rmsnorm
from xvendor.tuning import sweep

TOKENS = (4096, 16384)
HIDDEN = (4096, 7168, 8192)
SHORT = ((16384, 1024),)  # a short-row shape: the several-rows form
ELEM, W_ELEM = 2, 2  # bf16 x / y, bf16 weight


def predicted_us(arch: str, tokens: int, hidden: int) -> tuple[int, float]:
    nbytes = 2 * tokens * hidden * ELEM + hidden * W_ELEM
    return nbytes, nbytes / (devices.ARCHS[arch].hbm_tbps * 1e12) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args()
    shapes = [(t, h) for t in TOKENS for h in HIDDEN] + list(SHORT)
    jobs = {}
    for arch in configs.TARGETS:
        for _, h in shapes:
            cfg = configs.norm_for(arch, h)
            tmpl = "rms_norm" if cfg.rows == 1 else "rms_norm:rows"
            jobs[(tmpl, arch, cfg)] = None
    recs = sweep.sweep("flydsl", jobs=list(jobs), cache_dir=args.cache_dir, workers=2)
    by = {(r["target"], r["config_name"]): r for r in recs}
    print(f"# {datetime.date.today()}, {platform.machine()}, "
          f"flydsl {sweep.toolchain('flydsl').version}; no AMD GPU: nothing timed")
    print("\n| arch | config | VGPR | SGPR | LDS B | spills | scratch | WG/CU | vector load/store "
          "(count) | other reason |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    mma = {a: devices.ARCHS[a].mma_instr for a in configs.TARGETS}
    for (tmpl, arch, cfg) in jobs:
        r = by[(arch, cfg.name)]
        load, store = rmsnorm.vector_instrs(arch, cfg.vec * ELEM)
        req = r.get("required", {})
        other = "; ".join(x for x in r["reason"].split("; ")
                          if x and not x.startswith(f"no {mma[arch]} ")) or "-"
        print(f"| {arch} | {cfg.name} | {r.get('vgpr')} | {r.get('sgpr')} | {r.get('lds_bytes')} "
              f"| {r.get('spills')} | {r.get('scratch')} | {r.get('occupancy')} | "
              f"{load} ({req.get(load)}) / {store} ({req.get(store)}) | {other} |")
    print("\n| arch | HBM TB/s | tokens x hidden | config | workgroups | MB moved | "
          "predicted µs |")
    print("|---|---|---|---|---|---|---|")
    for arch in configs.TARGETS:
        for t, h in shapes:
            cfg = configs.norm_for(arch, h)
            nbytes, us = predicted_us(arch, t, h)
            print(f"| {arch} | {devices.ARCHS[arch].hbm_tbps} | {t} x {h} | {cfg.name} | "
                  f"{-(-t // cfg.rows)} | {nbytes / 1e6:.1f} | {us:.1f} |")


if __name__ == "__main__":
    main()
