"""The tuning loop on the CPU SYCL device: the tuned SYCL gemm against its untuned default
on the same problems in one run (speedup), the tuning time, and how well the analytical
model's ranking predicted the measured one (Spearman's rho).

    python bench/tuning.py [--top-k K]

Tuning writes into a temporary table (the user's tuning dir is left alone). Timings are
medians over rotating inputs (NOTE [tuning loop]); the machine is a shared 2-core box, so
read the ratios, not the microseconds.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch


PROBLEMS = [(512, 512, 512), (256, 1024, 512), (1024, 256, 256), (128, 2048, 1024)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top-k", type=int, default=None)
    args = p.parse_args()
    os.environ["XVENDOR_TUNING_DIR"] = tempfile.mkdtemp(prefix="xv-tuning-bench-")
    from xvendor import devices
    from xvendor.tuning import serve, tuner
    from xvendor.tuning.problem import key_for
    from xvendor.xpu import backend, tunable
    info = devices.detect("cpu")
    store = serve.store_for(info)
    gen = torch.Generator().manual_seed(0)
    print(f"{'problem (MxNxK fp32)':22s} {'default us':>10s} {'tuned us':>9s} {'speedup':>8s} "
          f"{'winner':20s} {'rho':>5s} {'tune s':>7s} {'aten us':>8s}")
    for m, n, k in PROBLEMS:
        argsets = [(torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen), None, None)
                   for _ in range(3)]
        key = key_for("gemm", "*", info.arch, info.cu_count, info.product, argsets[0])
        res = tuner.tune("gemm", "sycl", tunable.TUNABLE, info, key, argsets, store,
                         top_k=args.top_k, default_name=tunable.TUNABLE.default_name)
        win, dflt = res.winner, res.default_us
        speed = f"{dflt / win.measured_us:.2f}x" if win and dflt else "-"
        print(f"{f'{m}x{n}x{k}':22s} {dflt or float('nan'):10.0f} "
              f"{win.measured_us if win else float('nan'):9.0f} {speed:>8s} "
              f"{win.name if win else '-':20s} {res.rank_correlation:5.2f} {res.seconds:7.1f} "
              f"{res.aten_us:8.0f}")


if __name__ == "__main__":
    main()
