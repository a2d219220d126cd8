"""Run one candidate N times, for counting instructions per call under callgrind.

Instruction counts are deterministic (the same binary, inputs and environment give the
same total whatever else the machine does), so they measure dispatch overhead on a shared
machine where microseconds drift. Difference two runs to get instructions per call:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/dispatch_instructions.py {mm,xv,custom_op} 20000
    # per call = (total[xv] - total[mm]) / 20000; every run imports the same modules
"""

import sys

import torch

import xvendor


@torch.library.custom_op("xvendor_bench::mm_instr", mutates_args=())
def plain_custom_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def main() -> None:
    torch.set_num_threads(1)
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    fn = {"mm": torch.mm, "xv": xvendor.gemm, "custom_op": plain_custom_op}[sys.argv[1]]
    for _ in range(200):  # warm-up: decision cache, allocator
        fn(a, b)
    for _ in range(int(sys.argv[2])):
        fn(a, b)


if __name__ == "__main__":
    main()
