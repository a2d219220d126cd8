"""Run one candidate N times, for counting instructions per call under callgrind.

Instruction counts are deterministic (the same binary, inputs and environment give the
same total whatever else the machine does), so they measure dispatch overhead on a shared
machine where microseconds drift. Difference two runs to get instructions per call:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/dispatch_instructions.py {mm,xv,custom_op} 20000
    # per call = (total[xv] - total[mm]) / 20000; every run imports the same modules

``grouped_torch`` / ``grouped_xv``: the MoE decode case (fp32 2Dx3D, 32 tokens over 64
experts, K=256, N=128), ``F.grouped_mm`` against ``xvendor.grouped_mm``; these calls are
longer, so difference two N of the same candidate (per call = (total[N2] - total[N1]) /
(N2 - N1)) and compare the two per-call figures.
"""

import sys

import torch

import xvendor


@torch.library.custom_op("xvendor_bench::mm_instr", mutates_args=())
def plain_custom_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def _decode_moe():
    experts, counts = 64, [0] * 64
    for i in range(32):  # 32 tokens spread over the experts, some empty
        counts[(i * 7) % experts] += 1
    offs = torch.tensor(counts).cumsum(0).to(torch.int32)
    return torch.randn(32, 256), torch.randn(experts, 256, 128), offs


def main() -> None:
    torch.set_num_threads(1)
    name = sys.argv[1]
    if name.startswith("grouped_"):
        args = _decode_moe()
        fn = {"grouped_torch": lambda x, w, o: torch.nn.functional.grouped_mm(x, w, offs=o),
              "grouped_xv": xvendor.grouped_mm}[name]
    else:
        args = torch.randn(64, 64), torch.randn(64, 64)
        fn = {"mm": torch.mm, "xv": xvendor.gemm, "custom_op": plain_custom_op}[name]
    for _ in range(200):  # warm-up: decision cache, allocator
        fn(*args)
    for _ in range(int(sys.argv[2])):
        fn(*args)


if __name__ == "__main__":
    main()
