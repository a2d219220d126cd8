"""SYCL kernels on the OpenCL CPU device against torch on the CPU, in one run.

- GEMM 1024^3 fp32: the SYCL kernel alone (operands already in USM), the whole
  ``xvendor.gemm(..., backend="sycl")`` call (dispatch + USM copies in and out), torch.mm.
- Grouped GEMM, an MoE forward (2D x 3D, ragged rows): ``xvendor.grouped_mm(backend="sycl")``
  against ``torch._grouped_mm`` on the CPU and the ``reference`` backend's per-group loop.
- RTC compile time per kernel source: cold (empty SYCL persistent cache, fresh process),
  warm (a second fresh process: served from the persistent cache), and in-process repeat;
  and the per-launch cost of finding the built program (``runtime.program``).
- topk, fp32: sampling over a vocabulary ((2, 100000) k=2000, (4, 131072) k=1024) and an MoE
  router ((4096, 64) k=2): ``xvendor.topk(backend="sycl")`` against ``torch.topk``, in
  milliseconds. ``--topk-before DIR`` also times the kernels in DIR (e.g. an older
  ``sycl_kernels/``) once per case, after a warm-up build, for a before/after figure.

Rounds are interleaved so that drift on a shared machine hits every candidate alike; each
figure is the median over rounds (min in brackets). Ratios are SYCL / torch of the medians.

    python bench/sycl_cpu.py [--size 1024] [--rounds 7] [--sources gemm,grouped_mm,rms_norm,topk]
                             [--sections compile,gemm,grouped,topk] [--topk-before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import xvendor
from xvendor.xpu import backend, runtime
from xvendor.xpu.tensors import Launch

_CHILD = """
import json, sys, time
from xvendor.xpu import runtime
q = runtime.cpu_queue()
out = {}
for name in sys.argv[1].split(","):
    t = time.perf_counter(); runtime.program(name, q); wall = time.perf_counter() - t
    t = time.perf_counter(); runtime.program(name, q); again = time.perf_counter() - t
    out[name] = {"wall": wall, "in_process_repeat": again}
out["stats"] = runtime.stats()
print(json.dumps(out))
"""


def compile_times(sources: str) -> dict:
    """Cold then warm RTC builds of each source, each run in a fresh process."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SYCL_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-c", _CHILD, sources], env=env,
                                  capture_output=True, text=True, timeout=1200, check=True)
            runs.append(json.loads(proc.stdout.splitlines()[-1]))
    return {"cold": runs[0], "warm": runs[1]}


def program_lookup_us(calls: int = 2000) -> float:
    """Mean cost of finding an already built program: paid by every kernel launch."""
    q = runtime.cpu_queue()
    runtime.program("topk", q)
    t0 = time.perf_counter()
    for _ in range(calls):
        runtime.program("topk", q)
    return (time.perf_counter() - t0) / calls * 1e6


def rounds(candidates: dict, n: int) -> dict:
    """name -> list of seconds, candidates interleaved round by round (one warm-up)."""
    times = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()
    for _ in range(n):
        for name, fn in candidates.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def gemm_kernel_only(a, b, out):
    """The gemm kernel launch alone, operands already in USM (the wrapper's launch, reused)."""
    run = Launch(a.device)
    (m, k), n = a.shape, b.shape[1]
    pa, (sa_m, sa_k) = run.input("a", a, any_strides=True)
    pb, (sb_k, sb_n) = run.input("b", b, any_strides=True)
    pc = run.output("out", out)
    t = backend.TILE
    kern = runtime.program("gemm", run.queue).kernel("gemm_f32_f32")
    grid = (1, -(-m // backend.BM) * t["WM"], -(-n // backend.BN) * t["WN"])
    args = [(runtime.PTR, pa), (runtime.PTR, pb), (runtime.PTR, 0), (runtime.PTR, pc),
            (runtime.I64, m), (runtime.I64, n), (runtime.I64, k), (runtime.I64, sa_m),
            (runtime.I64, sa_k), (runtime.I64, sb_k), (runtime.I64, sb_n)]
    return lambda: runtime.launch(run.queue, kern, grid, (1, t["WM"], t["WN"]), args)


def report(title: str, flops: float, times: dict, peer: str) -> list[str]:
    lines = [f"{title}", f"  {'candidate':38s} {'GFLOP/s median [min-time]':>28s} {'ratio':>7s}"]
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, ts in times.items():
        lines.append(f"  {name:38s} {flops / med[name] / 1e9:14.1f} [{flops / min(ts) / 1e9:7.1f}]"
                     f" {med[peer] / med[name]:7.2f}")
    return lines


TOPK_CASES = [((2, 100_000), 2000), ((4, 131_072), 1024), ((4096, 64), 2)]


def topk_section(g, n_rounds: int, before: str | None) -> dict:
    """ms per call, ours against torch.topk (and, with ``before``, the kernels in that folder)."""
    print("topk fp32 (ms: median [min]; time ratio = ours / torch.topk, medians)")
    out = {}
    for shape, k in TOPK_CASES:
        x = torch.randn(*shape, generator=g)
        cands = {"xvendor.topk(backend='sycl')": lambda: xvendor.topk(x, k, backend="sycl"),
                 "torch.topk": lambda: torch.topk(x, k)}
        times = rounds(cands, n_rounds)
        (ours, ours_min), (ref, ref_min) = ((statistics.median(v), min(v)) for v in times.values())
        got, want = cands["xvendor.topk(backend='sycl')"](), torch.topk(x, k)
        same = torch.equal(got[0], want[0]) and torch.equal(x.gather(-1, got[1]), want[0])
        print(f"  {str(shape):14s} k={k:<5d} ours {ours * 1e3:8.2f} [{ours_min * 1e3:7.2f}]  "
              f"torch {ref * 1e3:7.2f} [{ref_min * 1e3:6.2f}]  ratio {ours / ref:5.2f}  "
              f"values equal: {same}")
        out[f"{shape} k={k}"] = times
        if before:
            out[f"{shape} k={k} before"] = old = _time_kernels_in(before, x, k)
            print(f"  {'':14s} {'':7s} before ({before}): {old * 1e3:9.1f} ms, "
                  f"{old / ours:.0f}x ours")
    return out


def _time_kernels_in(folder: str, x, k) -> float:
    """One call with the kernel sources in ``folder`` (built first on a small slice)."""
    old = os.environ.get("XVENDOR_SYCL_KERNELS_DIR")
    os.environ["XVENDOR_SYCL_KERNELS_DIR"] = folder
    try:
        backend.topk(x[:1, :64], 2)
        t0 = time.perf_counter()
        backend.topk(x, k)
        return time.perf_counter() - t0
    finally:
        if old is None:
            os.environ.pop("XVENDOR_SYCL_KERNELS_DIR")
        else:
            os.environ["XVENDOR_SYCL_KERNELS_DIR"] = old


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sources", default="gemm,grouped_mm,rms_norm,topk")
    p.add_argument("--sections", default="compile,gemm,grouped,topk")
    p.add_argument("--topk-before", metavar="DIR",
                   help="also time topk with the kernel sources in DIR (one call per case)")
    p.add_argument("--json", help="also write the raw figures here")
    args = p.parse_args()
    sections = set(args.sections.split(","))
    reason = backend.probe()
    if reason:
        sys.exit(f"sycl backend unusable: {reason}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads); "
          f"device {runtime.cpu_queue().device_key}")

    figures = {}
    if "compile" in sections:
        figures["compile"] = ct = compile_times(args.sources)
        print("RTC compile (seconds): source, cold (fresh cache, incl. priming), warm (next "
              "process), in-process repeat")
        for name in args.sources.split(","):
            print(f"  {name:12s} {ct['cold'][name]['wall']:7.2f} {ct['warm'][name]['wall']:7.2f} "
                  f"{ct['warm'][name]['in_process_repeat']:9.5f}")
        print(f"  warm process stats: {ct['warm']['stats']}")
        figures["program_lookup_us"] = us = program_lookup_us()
        print(f"  runtime.program() on a built source (once per launch): {us:.1f} us per call")

    g = torch.Generator().manual_seed(0)
    s = args.size
    if "gemm" in sections:
        a, b = torch.randn(s, s, generator=g), torch.randn(s, s, generator=g)
        out = torch.empty(s, s)
        figures["gemm"] = gemm_times = rounds(
            {"sycl kernel (operands in USM)": gemm_kernel_only(a, b, out),
             "xvendor.gemm(backend='sycl')": lambda: xvendor.gemm(a, b, backend="sycl"),
             "torch.mm": lambda: torch.mm(a, b)}, args.rounds)
        err = (xvendor.gemm(a, b, backend="sycl") - a @ b).abs().max().item()
        for line in report(f"GEMM {s}x{s}x{s} fp32 (max abs diff vs torch {err:.1e})", 2 * s ** 3,
                           gemm_times, "torch.mm"):
            print(line)

    if "grouped" in sections:
        # MoE forward: 2048 tokens x top-2 routed over 8 experts, hidden 1024 -> 512, skewed.
        sizes = [900, 700, 600, 500, 400, 300, 200, 496]
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
        x, w = torch.randn(sum(sizes), 1024, generator=g), torch.randn(8, 1024, 512, generator=g)
        moe = {"xvendor.grouped_mm(backend='sycl')":
               lambda: xvendor.grouped_mm(x, w, offs, backend="sycl"),
               "torch._grouped_mm": lambda: torch._grouped_mm(x, w, offs=offs),
               "xvendor aten backend (per-group mm)":
               lambda: xvendor.grouped_mm(x, w, offs, backend="reference")}
        figures["grouped"] = moe_times = rounds(moe, args.rounds)
        err = (moe["xvendor.grouped_mm(backend='sycl')"]()
               - moe["torch._grouped_mm"]()).abs().max().item()
        for line in report(f"grouped GEMM 2Dx3D fp32: tokens {sum(sizes)}, experts 8, K 1024, "
                           f"N 512 (max abs diff {err:.1e})", 2 * sum(sizes) * 1024 * 512,
                           moe_times, "torch._grouped_mm"):
            print(line)

    if "topk" in sections:
        figures["topk"] = topk_section(g, args.rounds, args.topk_before)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
