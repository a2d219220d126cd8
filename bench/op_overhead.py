"""Per-call cost of every xvendor op over torch's own, at sizes where the call overhead
dominates: inference calls and training calls (forward + backward), same process.

    python bench/op_overhead.py [--rounds 21] [--calls 400] [--threads 1] [--only OP]

For each row (gemm, grouped_mm 2Dx3D and 2Dx2D, rms_norm, topk, scaled_mm; fp32 and bf16;
small shapes, so the kernel itself takes a few microseconds), xvendor's public function
and torch's op run ``--calls`` times back to back per sample, the two alternating in a
rotating order, ``--rounds`` rounds. Each sample is timed two ways: wall clock
(``perf_counter``) and the calling thread's CPU time (``thread_time``: with one torch
thread every kernel runs on this thread, and time the thread spends descheduled on a
shared machine does not count, so it is the steadier figure of work done per call). The
table prints the medians and the difference, ours minus torch's, in microseconds per call
(training rows: one forward and one backward with every input requiring grad, gradients
cleared first, as an MoE training step calls them). The outputs are compared before
timing; a row that differs is marked. ``--heap steady`` (the default) holds glibc's heap
trimming off for both peers (``bench/steady_heap.py``), and the table prints the page faults
per call of each side.

This is the per-op companion of ``bench/dispatch_overhead.py`` (one op, gemm, against a
plain ``torch.library.custom_op`` wrapper too); the project's bar for the eager path is a
few microseconds over torch's op, and a decision that adds a kernel launch or a host read
shows up here as tens.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table
from torch.nn.functional import ScalingType

import steady_heap  # bench/, beside this script
import xvendor

F32, BF16 = torch.float32, torch.bfloat16


def _leaves(*ts):
    return [t.detach().clone().requires_grad_() for t in ts]


def _train(fn, leaves, grad):
    """One training call: gradients cleared, forward, backward; the first leaf's grad."""
    for t in leaves:
        t.grad = None
    out = fn(*leaves)
    (out[0] if isinstance(out, tuple) else out).backward(grad)
    return leaves[0].grad


def rows(dtype):
    """(op, label, ours, torch's) for one dtype."""
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    name = {F32: "fp32", BF16: "bf16"}[dtype]
    offs = torch.tensor([10, 10, 24, 40, 41, 52, 60, 64], dtype=torch.int32)  # one empty group
    a, b = r(64, 64), r(64, 64)
    x, w = r(64, 64), r(8, 64, 32)
    xt, dy = r(64, 64).t(), r(64, 32)
    n, nw = r(64, 256), r(256)
    lg = r(64, 64)
    out = [
        ("gemm", f"{name} 64x64x64", lambda: xvendor.gemm(a, b), lambda: torch.mm(a, b)),
        ("grouped_mm", f"{name} 2Dx3D E=8 M=64 K=64 N=32",
         lambda: xvendor.grouped_mm(x, w, offs), lambda: F.grouped_mm(x, w, offs=offs)),
        ("grouped_mm", f"{name} 2Dx2D (weight grad) E=8",
         lambda: xvendor.grouped_mm(xt, dy, offs), lambda: F.grouped_mm(xt, dy, offs=offs)),
        ("rms_norm", f"{name} 64x256", lambda: xvendor.rms_norm(n, nw, 1e-6),
         lambda: F.rms_norm(n, (256,), nw, 1e-6)),
        ("topk", f"{name} router 64x64 k=4", lambda: xvendor.topk(lg, 4),
         lambda: torch.topk(lg, 4)),
    ]
    # training calls: each side its own leaves, same values, same output gradient
    la, lb, ga = _leaves(a, b), _leaves(a, b), r(64, 64)
    out.append(("gemm", f"{name} fwd+bwd 64x64x64",
                lambda: _train(xvendor.gemm, la, ga), lambda: _train(torch.mm, lb, ga)))
    lx, ly, gy = _leaves(x, w), _leaves(x, w), r(64, 32)
    out.append(("grouped_mm", f"{name} fwd+bwd 2Dx3D E=8",
                lambda: _train(lambda p, q: xvendor.grouped_mm(p, q, offs), lx, gy),
                lambda: _train(lambda p, q: F.grouped_mm(p, q, offs=offs), ly, gy)))
    ln, lm, gn = _leaves(n, nw), _leaves(n, nw), r(64, 256)
    out.append(("rms_norm", f"{name} fwd+bwd 64x256",
                lambda: _train(lambda p, q: xvendor.rms_norm(p, q, 1e-6), ln, gn),
                lambda: _train(lambda p, q: F.rms_norm(p, (256,), q, 1e-6), lm, gn)))
    lt, lu, gt = _leaves(lg), _leaves(lg), r(64, 4)
    out.append(("topk", f"{name} fwd+bwd 64x64 k=4",
                lambda: _train(lambda p: xvendor.topk(p, 4), lt, gt),
                lambda: _train(lambda p: torch.topk(p, 4), lu, gt)))
    if dtype is BF16:
        e4 = torch.float8_e4m3fn
        a8, b8 = r(64, 128).float().to(e4), r(64, 128).float().to(e4).t()
        sa, sb = torch.tensor(0.5), torch.tensor(2.0)
        tw = ScalingType.TensorWise
        out.append(("scaled_mm", "e4m3 TensorWise 64x128x64 -> bf16",
                    lambda: xvendor.scaled_mm(a8, b8, sa, tw, sb, tw),
                    lambda: F.scaled_mm(a8, b8, sa, tw, sb, tw, output_dtype=BF16)))
    return out


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _same(ours, theirs) -> bool:
    o, t = _first(ours), _first(theirs)
    return o.shape == t.shape and torch.allclose(o.float(), t.float(), rtol=2e-2, atol=2e-2)


def sample(fn, calls: int) -> tuple[float, float, float]:
    """(wall us, thread-CPU us, page faults) per call over ``calls`` back-to-back calls."""
    f0, w0, c0 = steady_heap.faults(), time.perf_counter_ns(), time.thread_time_ns()
    for _ in range(calls):
        fn()
    c1, w1, f1 = time.thread_time_ns(), time.perf_counter_ns(), steady_heap.faults()
    return (w1 - w0) / calls / 1e3, (c1 - c0) / calls / 1e3, (f1 - f0) / calls


def measure(ours, theirs, rounds: int, calls: int):
    for fn in (ours, theirs):  # warm-up: decisions, allocator, autograd graph types
        for _ in range(max(20, calls // 4)):
            fn()
    got = {"ours": [], "torch": []}
    for i in range(rounds):
        order = (("ours", ours), ("torch", theirs)) if i % 2 == 0 else \
            (("torch", theirs), ("ours", ours))
        for key, fn in order:
            got[key].append(sample(fn, calls))
    med = {k: tuple(statistics.median(s[i] for s in v) for i in range(3))
           for k, v in got.items()}
    return med["ours"], med["torch"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: every kernel runs on the timed thread)")
    p.add_argument("--only", default=None, help="one op's rows (gemm, grouped_mm, ...)")
    p.add_argument("--heap", default="steady", choices=steady_heap.MODES,
                   help="glibc heap trimming held off for both peers (steady) or as the "
                        "process starts (default); see bench/steady_heap.py")
    args = p.parse_args()
    heap = steady_heap.ensure(args.heap, __file__)
    torch.set_num_threads(args.threads)
    console = Console(width=max(Console().width, 150))
    table = Table(title=f"xvendor vs torch, per call (us), CPU, torch {torch.__version__}, "
                        f"{platform.machine()}, threads={torch.get_num_threads()}, "
                        f"{args.rounds} rounds x {args.calls} calls, {heap}")
    for col in ("op", "row", "torch wall", "ours wall", "+wall", "torch cpu", "ours cpu",
                "+cpu", "faults ours, torch", "backend"):
        table.add_column(col, justify="left" if col in ("op", "row", "backend") else "right")
    added = []
    with console.status("timing") as status:
        for dtype in (F32, BF16):
            for op, label, ours, theirs in rows(dtype):
                if args.only and op != args.only:
                    continue
                status.update(f"timing {op} {label}")
                same = _same(ours(), theirs())
                (ow, oc, of), (tw, tc, tf) = measure(ours, theirs, args.rounds, args.calls)
                added.append(oc - tc)
                backend = xvendor.registry.decide(op, torch.device("cpu"),
                                                  BF16 if op == "scaled_mm" else dtype).backend
                table.add_row(op, label + ("" if same else "  [RESULTS DIFFER]"),
                              f"{tw:.1f}", f"{ow:.1f}", f"{ow - tw:+.1f}", f"{tc:.1f}",
                              f"{oc:.1f}", f"{oc - tc:+.1f}", f"{of:.1f}, {tf:.1f}", backend)
    console.print(table)
    if added:
        console.print(f"added thread-CPU time per call: median {statistics.median(added):+.2f} us,"
                      f" max {max(added):+.2f} us over {len(added)} rows")


if __name__ == "__main__":
    main()
