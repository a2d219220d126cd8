"""GEMM and MoE grouped GEMM on a CUDA/ROCm GPU: every xvendor backend that can serve the
call against torch (torch.mm / torch._grouped_mm) on the same shapes, in the same run.

Timing: CUDA events around each call, 10 warm-ups, median of 50 timed calls, inputs
rotated over 4 buffer sets so the L2 cache does not flatter small shapes. Each xvendor
backend is first checked against the fp64 oracle on that shape; a wrong one is reported,
not timed. Prints TFLOP/s and the ratio to torch; ``--json PATH`` writes the records.

    python bench/gpu_gemm.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

import xvendor
from xvendor import registry
from xvendor import numerics as oracle

GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 1024), (257, 4096, 4096)]
MOE_SHAPES = [  # (tokens*topk, experts, hidden K, expert N)
    (32768, 8, 4096, 2048), (65536, 64, 2048, 1408), (8192, 128, 7168, 512)]


def time_ms(fn, argsets, warmup=10, reps=50) -> float:
    for i in range(warmup):
        fn(*argsets[i % len(argsets)])
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*argsets[i % len(argsets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def candidates(op, example, dtype):
    found = {}
    for name in sorted(registry.backends()):
        try:
            xvendor.explain(op, *example, backend=name)
        except (xvendor.BackendUnavailable, xvendor.ArgumentError):
            continue
        found[name] = name
    return found


def ragged_offs(tokens, experts, gen):
    weights = torch.rand(experts, generator=gen) + 0.2
    sizes = (weights / weights.sum() * tokens).floor().long()
    sizes[-1] += tokens - sizes.sum()
    return oracle.random_offs(sizes.tolist(), "cuda")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/gpu_gemm.py needs a CUDA or ROCm GPU")
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(0)
    records = []
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  dtype {args.dtype}")
    print(f"{'op':10s} {'shape':28s} {'impl':10s} {'ms':>8s} {'TFLOP/s':>8s} {'vs torch':>8s}  check")
    for m, n, k in GEMM_SHAPES:
        sets = [(torch.randn(m, k, device="cuda", dtype=dtype),
                 torch.randn(k, n, device="cuda", dtype=dtype)) for _ in range(4)]
        flop = 2 * m * n * k
        base = time_ms(torch.mm, sets)
        rows = [("torch.mm", base, "")]
        for name in candidates("gemm", sets[0], dtype):
            fn = lambda a, b, _n=name: xvendor.gemm(a, b, backend=_n)  # noqa: E731
            err = oracle.rel_error(fn(*sets[0]), oracle.gemm(*sets[0]))
            ok = err <= oracle.TOLERANCE[dtype]
            rows.append((name, time_ms(fn, sets) if ok else float("nan"), f"{err:.1e}"))
        for impl, ms, check in rows:
            records.append(dict(op="gemm", shape=[m, n, k], impl=impl, ms=ms, check=check,
                                tflops=flop / ms / 1e9, ratio=base / ms))
            print(f"{'gemm':10s} {str((m, n, k)):28s} {impl:10s} {ms:8.3f} {flop / ms / 1e9:8.1f} "
                  f"{base / ms:8.2f}  {check}")
    for tokens, experts, k, n in MOE_SHAPES:
        offs = ragged_offs(tokens, experts, gen)
        sets = [(torch.randn(tokens, k, device="cuda", dtype=dtype),
                 torch.randn(experts, n, k, device="cuda", dtype=dtype).transpose(-2, -1), offs)
                for _ in range(4)]
        flop = 2 * tokens * n * k
        base = time_ms(lambda a, b, o: torch._grouped_mm(a, b, o), sets)
        rows = [("torch", base, "")]
        for name in candidates("grouped_mm", sets[0], dtype):
            fn = lambda a, b, o, _n=name: xvendor.grouped_mm(a, b, o, backend=_n)  # noqa: E731
            small = (sets[0][0][:512], sets[0][1], ragged_offs(512, experts, gen))
            err = oracle.rel_error(fn(*small), oracle.grouped_mm(*small))
            ok = err <= oracle.TOLERANCE[dtype]
            rows.append((name, time_ms(fn, sets) if ok else float("nan"), f"{err:.1e}"))
        for impl, ms, check in rows:
            records.append(dict(op="grouped_mm", shape=[tokens, experts, k, n], impl=impl, ms=ms,
                                check=check, tflops=flop / ms / 1e9, ratio=base / ms))
            print(f"{'grouped_mm':10s} {str((tokens, experts, k, n)):28s} {impl:10s} {ms:8.3f} "
                  f"{flop / ms / 1e9:8.1f} {base / ms:8.2f}  {check}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
