"""rms_norm on the CPU: torch's eager op against the ``torch`` backend's one-buffer form
(NOTE [rms_norm in one buffer] in ``xvendor/torch_backend/kernels.py``), over a sweep of
sizes, in one process, interleaved; prints each row's ratio and the size from which the
one-buffer form is at least as fast on every larger row: the evidence for
``rules.RMS_NORM_ONE_BUFFER["cpu"]``.

    python bench/rms_norm_cpu.py [--threads N] [--rounds R] [--dtypes float32,bfloat16]
        [--heap steady|default]

Both sides are called as kernels (no xvendor dispatch around either): this measures the
arithmetic, not the op's Python (``bench/op_overhead.py`` measures that). Each round times
a few calls of each side back to back, in alternating order; the table shows medians over
rounds (wall time, or thread CPU time with one thread) and each side's error against the
fp64 oracle (normwise relative).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import steady_heap  # bench/, beside this script

SHAPES = [(1, 2048), (1, 8192), (8, 2048), (8, 4096), (16, 4096), (32, 2048), (32, 4096),
          (64, 4096), (256, 2048), (256, 4096), (256, 8192), (1024, 4096), (4096, 2048)]


def _time(fn, calls: int, clock) -> float:
    t = clock()
    for _ in range(calls):
        fn()
    return (clock() - t) / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--heap", default="steady", choices=steady_heap.MODES,
                   help="glibc heap trimming held still (default) or as the process "
                        "starts; see bench/steady_heap.py")
    args = p.parse_args(argv)
    heap = steady_heap.ensure(args.heap, __file__)

    from xvendor import numerics
    from xvendor.torch_backend import kernels, rules

    if args.threads:
        torch.set_num_threads(args.threads)
    one = torch.get_num_threads() == 1
    clock = time.thread_time if one else time.perf_counter
    print(f"# rms_norm on the CPU, torch {torch.__version__}, {torch.get_num_threads()} "
          f"thread(s), {'thread CPU' if one else 'wall'} time, {heap}; thresholds now "
          f"{ {str(k).replace('torch.', ''): v for k, v in rules.RMS_NORM_ONE_BUFFER['cpu'].items()} }")
    print("| dtype | M x H | elements | torch ms | one-buffer ms | torch/ours | "
          "err torch | err ours | bitwise equal |")
    print("|---|---|---|---|---|---|---|---|---|")
    gen = torch.Generator().manual_seed(0)
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        rows = []
        for m, h in SHAPES:
            x = torch.randn(m, h, generator=gen).to(dtype)
            w = torch.randn(h, generator=gen).to(dtype)
            theirs = lambda: torch.rms_norm(x, (h,), w, 1e-6)  # noqa: E731
            ours = lambda: kernels._rms_norm_one_buffer(x, w, 1e-6)  # noqa: E731
            ref = numerics.rms_norm(x, w, 1e-6)
            got_t, got_o = theirs(), ours()
            err_t, err_o = numerics.rel_error(got_t, ref), numerics.rel_error(got_o, ref)
            same = torch.equal(got_t, got_o)
            calls = max(1, min(50, int(2e6 // (m * h))))
            for fn in (theirs, ours):  # warm both
                _time(fn, calls, clock)
            ts, os_ = [], []
            for r in range(args.rounds):
                pair = ((theirs, ts), (ours, os_)) if r % 2 == 0 else ((ours, os_), (theirs, ts))
                for fn, acc in pair:
                    acc.append(_time(fn, calls, clock))
            t, o = statistics.median(ts), statistics.median(os_)
            rows.append((m * h, t / o))
            print(f"| {name} | {m}x{h} | {m * h} | {t * 1e3:.3f} | {o * 1e3:.3f} | "
                  f"{t / o:.2f}x | {err_t:.1e} | {err_o:.1e} | {'yes' if same else 'NO'} |", flush=True)
        # the smallest size from which every row (this one and all larger) is >= 1.0x
        rows.sort()
        from_ = next((n for i, (n, _) in enumerate(rows)
                      if all(q >= 1.0 for _, q in rows[i:])), None)
        print(f"# {name}: one buffer at least as fast from {from_} elements on every "
              f"larger row" if from_ else f"# {name}: no size from which it is always faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
