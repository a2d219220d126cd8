"""Per-call time of xvendor.gemm against torch.mm and a plain torch.library.custom_op wrapper.

All candidates run in the same process, interleaved round by round so that drift of a
shared machine hits them alike; each figure is the median over rounds of the per-call
mean within a round. Prints microseconds per call and the overhead added over torch.mm.

    python bench/dispatch_overhead.py [--size 64] [--rounds 41] [--calls 2000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

import xvendor


@torch.library.custom_op("xvendor_bench::mm", mutates_args=())
def plain_custom_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


@plain_custom_op.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


def per_call_us(fn, a, b, calls: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(a, b)
    return (time.perf_counter_ns() - t0) / calls / 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=41)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1 keeps the thread pool's jitter out of the figure)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    a, b = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
    candidates = {
        "torch.mm": torch.mm,
        "xvendor.gemm (eager)": xvendor.gemm,
        "torch.ops.xvendor.gemm (dispatcher)": torch.ops.xvendor.gemm,
        "custom_op wrapper of torch.mm": plain_custom_op,
    }
    for fn in candidates.values():  # warm up: imports, decision cache, allocator
        for _ in range(200):
            fn(a, b)
    rounds = {name: [] for name in candidates}
    for _ in range(args.rounds):
        for name, fn in candidates.items():
            rounds[name].append(per_call_us(fn, a, b, args.calls))
    base = statistics.median(rounds["torch.mm"])
    print(f"{args.size}x{args.size} fp32 mm on the CPU, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}, threads={torch.get_num_threads()}")
    print(f"{'candidate':40s} {'us/call':>9s} {'added us':>9s} {'ratio':>6s}")
    for name, xs in rounds.items():
        med = statistics.median(xs)
        print(f"{name:40s} {med:9.2f} {med - base:+9.2f} {med / base:6.2f}")


if __name__ == "__main__":
    main()
