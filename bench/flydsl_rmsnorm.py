"""FlyDSL RMSNorm forward and backward: the static report of each compiled default next to
a memory-bound prediction per shape (no AMD GPU here: nothing is timed, numerics are
unverified).

RMSNorm is memory-bound: the prediction is bytes moved (read x once, read the weight once,
write y) over the arch's HBM bandwidth (``xvendor.devices.ARCHS[arch].hbm_tbps``). The
kernel reads x twice (sum of squares, then scale); the second read is the workgroup's own
row, just read, so it is counted as a cache hit. Launch latency and the tail of the last
wave of workgroups are not modelled. The code objects are the ones the backend would
launch for each shape (``configs.norm_for``), compiled by the sweep's workers (cached).

Backward (NOTE [rms_norm backward]): reads x and grad, writes dx, reads the weight once;
each workgroup adds its rows' dweight terms to its own fp32 partial row (read and written
per row: cache traffic, its row is the workgroup's own), which reaches HBM once, and the
host's final sum reads the partials back: ``3 * tokens * hidden * 2 + 2 * grid * hidden
* 4`` bytes, grid = tokens / rows per workgroup. The fused residual forward reads x and the
residual and writes y and x + residual: ``4 * tokens * hidden * 2`` bytes. The backward
and residual code objects are compiled by ``xvendor.rocm.crosscompile.compile_one`` in workers (uncached).

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


def predicted_bwd_us(arch: str, tokens: int, hidden: int, rows_per_wg: int) -> tuple[int, float]:
    grid = -(-tokens // rows_per_wg)
    nbytes = 3 * tokens * hidden * ELEM + hidden * W_ELEM + 2 * grid * hidden * 4
    return nbytes, nbytes / (devices.ARCHS[arch].hbm_tbps * 1e12) * 1e6


def predicted_residual_us(arch: str, tokens: int, hidden: int) -> tuple[int, float]:
    nbytes = 4 * tokens * hidden * ELEM + hidden * W_ELEM
    return nbytes, nbytes / (devices.ARCHS[arch].hbm_tbps * 1e12) * 1e6


def compile_jobs(jobs) -> list[dict]:
    """Compile ``jobs`` ((template, arch, config)) with the FlyDSL toolchain's
    ``compile_one`` in two worker processes (an LLVM abort costs one record, never the
    script). Also used by ``bench/flydsl_topk.py``."""
    from concurrent.futures import ThreadPoolExecutor

    from xvendor.tuning.workers import Worker, worker_env
    pool = [Worker(worker_env(None)) for _ in range(2)]

    def one(i):
        t, a, c = jobs[i]
        return pool[i % 2].run({"toolchain": "flydsl", "template": t, "arch": a,
                                "config": c.to_dict()}, 600)
    try:
        with ThreadPoolExecutor(2) as ex:
            return list(ex.map(one, range(len(jobs))))
    finally:
        for w in pool:
            w.close()


def backward_report(shapes) -> None:
    jobs = [(t, a, configs.NORM_BWD_DEFAULTS[a] if t != "rms_norm:residual"
             else configs.default(a, "rms_norm"))
            for a in configs.TARGETS for t in ("rms_norm_bwd", "rms_norm:residual")]
    recs = compile_jobs(jobs)
    print("\n| arch | kernel | config | VGPR | SGPR | LDS B | spills | scratch | WG/CU | "
          "vector load/store (count) | reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (t, arch, cfg), r in zip(jobs, recs):
        load, store = rmsnorm.vector_instrs(arch, cfg.vec * ELEM)
        req = r.get("required", {})
        print(f"| {arch} | {t} | {cfg.name} | {r.get('vgpr')} | {r.get('sgpr')} | "
              f"{r.get('lds_bytes')} | {r.get('spills')} | {r.get('scratch')} | "
              f"{r.get('occupancy')} | {load} ({req.get(load)}) / {store} ({req.get(store)}) "
              f"| {r['reason'] or '-'} |")
    print("\n| arch | tokens x hidden | backward: WGs | MB | predicted µs | "
          "fused residual: MB | predicted µs |")
    print("|---|---|---|---|---|---|---|")
    for arch in configs.TARGETS:
        cfg = configs.NORM_BWD_DEFAULTS[arch]
        for t, h in shapes:
            nb, us = predicted_bwd_us(arch, t, h, cfg.rows)
            nr, ur = predicted_residual_us(arch, t, h)
            print(f"| {arch} | {t} x {h} | {-(-t // cfg.rows)} | {nb / 1e6:.1f} | {us:.1f} | "
                  f"{nr / 1e6:.1f} | {ur:.1f} |")


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
    backward_report(shapes)


if __name__ == "__main__":
    main()
