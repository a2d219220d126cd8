"""FlyDSL topk: the static report of each compiled default next to a memory-bound
prediction per shape (no AMD GPU here: nothing is timed, numerics are unverified).

topk is memory-bound: the prediction is bytes moved over the arch's HBM bandwidth
(``xvendor.devices.ARCHS[arch].hbm_tbps``). Router form: x is read once (one vector and a
tail element per lane), values and int64 indices written: ``rows * (n * e + k * (e + 8))``.
Radix form (``xvendor.rocm.topk``): each row is read by 4 key passes and the gather pass
(3 more index passes when the k-th key is tied); the row belongs to one workgroup and is
re-read right away, so the prediction counts HBM once ("cached") and, as an upper bound,
every pass from HBM ("no reuse"). Not modelled: launch latency, the 256-bucket scans and
the k^2 rank compares (LDS work, ~k^2 / threads per thread: 4096 at k = 1024), which bound
small rows with large k. The code objects are compiled by ``xvendor.rocm.crosscompile.compile_one`` in worker
processes, the same plans the backend launches.

    python bench/flydsl_topk.py
"""

from __future__ import annotations

import datetime
import platform

from flydsl_rmsnorm import compile_jobs  # same folder: the two-worker compile of the jobs
from xvendor import devices
from xvendor.rocm import configs, rmsnorm, topk

ELEM = 2  # bf16
ROUTER = [(t, e, k) for t in (4096, 16384) for e, k in ((8, 2), (64, 6), (128, 8), (256, 8))]
SAMPLING = [(r, n, k) for r in (64, 256) for n, k in ((32000, 50), (128256, 1024),
                                                       (262144, 1024))]
PASSES = topk.KEY_PASSES + 1  # key passes + gather, without ties


def predicted_us(arch: str, rows: int, n: int, k: int, reads: int) -> tuple[int, float]:
    nbytes = rows * (reads * n * ELEM + k * (ELEM + 8))
    return nbytes, nbytes / (devices.ARCHS[arch].hbm_tbps * 1e12) * 1e6


def main() -> None:
    jobs = [(f"topk:{form}", a, configs.TOPK_DEFAULTS[a][form])
            for a in configs.TARGETS for form in ("router", "radix")]
    recs = compile_jobs(jobs)
    print(f"# {datetime.date.today()}, {platform.machine()}, flydsl "
          f"{__import__('importlib.metadata').metadata.version('flydsl')}; "
          "no AMD GPU: nothing timed")
    print("\n| arch | template | config | VGPR | SGPR | LDS B | spills | scratch | WG/CU | "
          "vector load (count) | reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (t, arch, cfg), r in zip(jobs, recs):
        load = rmsnorm.vector_instrs(arch, cfg.vec * ELEM)[0]
        print(f"| {arch} | {t} | {cfg.name} | {r.get('vgpr')} | {r.get('sgpr')} | "
              f"{r.get('lds_bytes')} | {r.get('spills')} | {r.get('scratch')} | "
              f"{r.get('occupancy')} | {load} ({r.get('required', {}).get(load)}) | "
              f"{r['reason'] or '-'} |")
    print("\n| arch | HBM TB/s | rows x n, k | form | MB moved | predicted µs |")
    print("|---|---|---|---|---|---|")
    for arch in configs.TARGETS:
        for rows, n, k in ROUTER:
            nb, us = predicted_us(arch, rows, n, k, 1)
            print(f"| {arch} | {devices.ARCHS[arch].hbm_tbps} | {rows} x {n}, {k} | "
                  f"{configs.topk_for(arch, n, k).form} | {nb / 1e6:.2f} | {us:.2f} |")
        for rows, n, k in SAMPLING:
            nb, us = predicted_us(arch, rows, n, k, 1)
            nb5, us5 = predicted_us(arch, rows, n, k, PASSES)
            print(f"| {arch} | {devices.ARCHS[arch].hbm_tbps} | {rows} x {n}, {k} | "
                  f"{configs.topk_for(arch, n, k).form} | {nb / 1e6:.1f} cached / "
                  f"{nb5 / 1e6:.1f} no reuse | {us:.1f} / {us5:.1f} |")


if __name__ == "__main__":
    main()
