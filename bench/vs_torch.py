"""xvendor's automatic choice against torch's own op, same inputs, same process.

    python bench/vs_torch.py                 # the whole table on this machine's devices
    python bench/vs_torch.py --device cuda   # the GPU half (bench/gpu_check.sh runs it)
    python bench/vs_torch.py --only grouped_mm --repeats 30

For every op that torch has (gemm, grouped_mm in its four layouts, rms_norm, topk,
scaled_mm) and a table of shapes (MoE 2Dx3D with 8, 64, 128 experts and empty groups,
decode-sized M, the 2Dx2D weight gradient, 3Dx2D, norms of 2k-8k hidden, router and
sampling top-k, FP8 RowWise/TensorWise), the two calls are timed in pairs of samples, each
sample a run of back-to-back calls lasting ~20 ms after warm-up (training rows: forward
and backward with the inputs requiring gradients, as in an MoE training step), on a
synchronized device,
three samples per round (ours, torch, torch once more) in an order that rotates through
all six, so a drift of a shared machine or a penalty for a position hits all alike. The
ratio of a row is the median over rounds of torch's time / ours within the round (>= 1:
we are at least as fast); beside it, torch's time / its own second sample, the same
statistic with nothing different: how far this machine's noise alone moves a ratio on
that row. The table also prints the medians and the backend xvendor chose. The outputs
are compared first: a row whose results differ is marked. The first row is a control:
torch's op against itself in both places.

``--heap steady`` (the default) holds glibc's heap trimming off for the whole process, both
peers alike, and each row prints the page faults per call of each side:
``bench/steady_heap.py`` says why (on this project's CPU machine the same fp32 call took
0.3 ms in one process and 5 ms in another, torch's and ours alike, from page faults).
``--heap default`` measures the process as it starts.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table
from torch.nn.functional import ScalingType

import steady_heap  # bench/, beside this script
import xvendor

BF16, F32 = torch.bfloat16, torch.float32


def _offs(counts, device):
    return torch.tensor(counts, dtype=torch.int32, device=device).cumsum(0).to(torch.int32)


def _moe_counts(tokens: int, experts: int, seed: int, empty: int = 0):
    """Token counts per expert from a real top-k routing draw (skewed), ``empty`` of them 0."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(tokens, experts, generator=g) + torch.linspace(0, 2, experts)
    counts = torch.bincount(logits.topk(2, dim=-1).indices.flatten(), minlength=experts)
    counts[:empty] = 0
    return counts.tolist()


def rows(device: str):
    """(op, label, xvendor call, torch call) for the table."""
    def r(*shape, dtype=BF16):
        return torch.randn(*shape, device=device, dtype=dtype)

    out = []
    x, w = r(4096, 256), r(8, 256, 128)
    offs = _offs(_moe_counts(2048, 8, 8), device)
    out.append(("control", "torch vs torch (A/A), bf16 2Dx3D E=8",
                lambda x=x, w=w, o=offs: F.grouped_mm(x, w, offs=o),
                lambda x=x, w=w, o=offs: F.grouped_mm(x, w, offs=o)))
    for dtype in (F32, BF16):
        name = "fp32" if dtype == F32 else "bf16"
        a, b, bias = r(512, 1024, dtype=dtype), r(1024, 512, dtype=dtype), r(512, dtype=dtype)
        out.append(("gemm", f"{name} 512x1024x512 +bias", lambda a=a, b=b, c=bias: xvendor.gemm(a, b, c),
                    lambda a=a, b=b, c=bias: torch.addmm(c, a, b)))
        x1, w1 = r(1, 2048, dtype=dtype), r(2048, 2048, dtype=dtype)
        out.append(("gemm", f"{name} decode 1x2048x2048", lambda a=x1, b=w1: xvendor.gemm(a, b),
                    lambda a=x1, b=w1: torch.mm(a, b)))
        for experts, tokens, empty in ((8, 2048, 0), (64, 2048, 4), (128, 4096, 16)):
            counts = _moe_counts(tokens, experts, experts, empty)
            m = sum(counts)
            x, w, offs = r(m, 256, dtype=dtype), r(experts, 256, 128, dtype=dtype), _offs(counts, device)
            label = f"{name} 2Dx3D E={experts} M={m} K=256 N=128" + (f", {empty} empty" if empty else "")
            out.append(("grouped_mm", label,
                        lambda x=x, w=w, o=offs: xvendor.grouped_mm(x, w, o),
                        lambda x=x, w=w, o=offs: F.grouped_mm(x, w, offs=o)))
        counts = _moe_counts(16, 64, 3)  # decode: a handful of tokens over many experts
        x, w, offs = r(sum(counts), 512, dtype=dtype), r(64, 512, 256, dtype=dtype), _offs(counts, device)
        out.append(("grouped_mm", f"{name} 2Dx3D decode M={sum(counts)} E=64",
                    lambda x=x, w=w, o=offs: xvendor.grouped_mm(x, w, o),
                    lambda x=x, w=w, o=offs: F.grouped_mm(x, w, offs=o)))
        counts = _moe_counts(1024, 8, 5)  # top-2 of 1024 tokens: K = 2048
        xt, gy, offs = r(2048, 256, dtype=dtype).t(), r(2048, 128, dtype=dtype), _offs(counts, device)
        out.append(("grouped_mm", f"{name} 2Dx2D wgrad E=8 K=2048",
                    lambda a=xt, b=gy, o=offs: xvendor.grouped_mm(a, b, o),
                    lambda a=xt, b=gy, o=offs: F.grouped_mm(a, b, offs=o)))
        a3, b2, offs = r(8, 256, 256, dtype=dtype), r(256, 1024, dtype=dtype), _offs([128] * 8, device)
        out.append(("grouped_mm", f"{name} 3Dx2D E=8 N=1024",
                    lambda a=a3, b=b2, o=offs: xvendor.grouped_mm(a, b, o),
                    lambda a=a3, b=b2, o=offs: F.grouped_mm(a, b, offs=o)))
        a3, b3 = r(8, 256, 256, dtype=dtype), r(8, 256, 256, dtype=dtype)
        out.append(("grouped_mm", f"{name} 3Dx3D G=8 256^3",
                    lambda a=a3, b=b3: xvendor.grouped_mm(a, b),
                    lambda a=a3, b=b3: F.grouped_mm(a, b)))
        for hidden in (2048, 8192):
            x, wt = r(256, hidden, dtype=dtype), r(hidden, dtype=dtype)
            out.append(("rms_norm", f"{name} 256x{hidden}",
                        lambda x=x, wt=wt: xvendor.rms_norm(x, wt, 1e-6),
                        lambda x=x, wt=wt, h=hidden: F.rms_norm(x, (h,), wt, 1e-6)))
        for label, shape, k in (("router 4096x64 k=8", (4096, 64), 8),
                                ("sampling 8x32000 k=50", (8, 32000), 50)):
            x = r(*shape, dtype=dtype)
            out.append(("topk", f"{name} {label}", lambda x=x, k=k: xvendor.topk(x, k),
                        lambda x=x, k=k: torch.topk(x, k)))
        out.extend(_training_rows(r, name, dtype, device))
    e4 = torch.float8_e4m3fn
    a8, b8 = r(512, 1024, dtype=F32).to(e4), r(512, 1024, dtype=F32).to(e4).t()
    for recipe, sa, sb in ((ScalingType.TensorWise, torch.tensor(0.5, device=device),
                            torch.tensor(2.0, device=device)),
                           (ScalingType.RowWise, torch.rand(512, 1, device=device),
                            torch.rand(1, 512, device=device))):
        out.append(("scaled_mm", f"e4m3 {recipe.name} 512x1024x512 -> bf16",
                    lambda sa=sa, sb=sb, rc=recipe: xvendor.scaled_mm(a8, b8, sa, rc, sb, rc),
                    lambda sa=sa, sb=sb, rc=recipe: F.scaled_mm(a8, b8, sa, rc, sb, rc,
                                                                output_dtype=BF16)))
    return out


def _step(fn, leaves, grad):
    """One training call: forward, backward of ``grad``; the first leaf's gradient (the
    compared result), every leaf's cleared first (no accumulation across calls)."""
    for t in leaves:
        t.grad = None
    fn(*leaves).backward(grad)
    return leaves[0].grad


def _training_rows(r, name, dtype, device):
    """Forward + backward, the inputs requiring gradients (an MoE training step's calls):
    each side gets its own leaves, the same values and the same output gradient."""
    def leaves(*ts):
        return [t.detach().clone().requires_grad_() for t in ts]
    out = []
    for experts, tokens in ((8, 2048), (64, 16)):
        counts = _moe_counts(tokens, experts, experts)
        m = sum(counts)
        x, w = r(m, 256, dtype=dtype), r(experts, 256, 128, dtype=dtype)
        offs, g = _offs(counts, device), r(m, 128, dtype=dtype)
        ours, theirs = leaves(x, w), leaves(x, w)
        out.append(("grouped_mm", f"{name} fwd+bwd 2Dx3D E={experts} M={m} K=256 N=128",
                    lambda l=ours, o=offs, g=g: _step(
                        lambda a, b: xvendor.grouped_mm(a, b, o), l, g),
                    lambda l=theirs, o=offs, g=g: _step(
                        lambda a, b: F.grouped_mm(a, b, offs=o), l, g)))
    a, b, g = r(512, 1024, dtype=dtype), r(1024, 512, dtype=dtype), r(512, 512, dtype=dtype)
    ours, theirs = leaves(a, b), leaves(a, b)
    out.append(("gemm", f"{name} fwd+bwd 512x1024x512",
                lambda l=ours, g=g: _step(xvendor.gemm, l, g),
                lambda l=theirs, g=g: _step(torch.mm, l, g)))
    x, wt, g = r(256, 2048, dtype=dtype), r(2048, dtype=dtype), r(256, 2048, dtype=dtype)
    ours, theirs = leaves(x, wt), leaves(x, wt)
    out.append(("rms_norm", f"{name} fwd+bwd 256x2048",
                lambda l=ours, g=g: _step(lambda a, b: xvendor.rms_norm(a, b, 1e-6), l, g),
                lambda l=theirs, g=g: _step(
                    lambda a, b: F.rms_norm(a, (2048,), b, 1e-6), l, g)))
    return out


# the rotation of one round's three samples (ours, torch, torch's second sample)
_ORDERS = (("ours", "torch", "torch2"), ("torch", "torch2", "ours"), ("torch2", "ours", "torch"),
           ("ours", "torch2", "torch"), ("torch2", "torch", "ours"), ("torch", "ours", "torch2"))


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time(fn, device, calls: int, faults: list | None = None) -> float:
    """Seconds per call over ``calls`` back-to-back calls (one sample); appends the page
    faults per call to ``faults`` when given."""
    _sync(device)
    f0, t0 = steady_heap.faults(), time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(device)
    t1 = time.perf_counter()
    if faults is not None:
        faults.append((steady_heap.faults() - f0) / calls)
    return (t1 - t0) / calls


def _calls_per_sample(fn, device, target_s: float = 0.02) -> int:
    """Enough calls that one sample lasts ~``target_s`` (timer and scheduler noise of a
    single short call would otherwise swamp the difference being measured)."""
    once = _time(fn, device, 1)
    return max(1, min(1000, int(target_s / max(once, 1e-7))))


def _same(x, y) -> bool:
    x = x[0] if isinstance(x, tuple) else x
    y = y[0] if isinstance(y, tuple) else y
    if x.shape != y.shape:
        return False
    return torch.allclose(x.float(), y.float(), rtol=2e-2, atol=2e-2)


def _chosen(op: str) -> str:
    d = [f for f in xvendor.registry.fallbacks() if f.op == op]
    return d[-1].to if d else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=24, help="rounds (of three samples) per row")
    ap.add_argument("--only", default="", help="comma-separated ops")
    ap.add_argument("--heap", default="steady", choices=steady_heap.MODES,
                    help="glibc heap trimming held off for both peers (steady, the default) "
                         "or as the process starts (default); see bench/steady_heap.py")
    args = ap.parse_args(argv)
    heap = steady_heap.ensure(args.heap, __file__)
    only = set(filter(None, args.only.split(",")))
    console = Console(width=max(Console().width, 160))
    table = Table(title=f"xvendor's automatic choice vs torch on {args.device} "
                        f"(torch {torch.__version__}, {torch.get_num_threads()} threads, "
                        f"{heap})")
    for col in ("op", "case", "backend", "xvendor ms", "torch ms", "torch/xvendor",
                "torch/torch", "faults/call ours, torch", "same"):
        table.add_column(col, justify="right" if "ms" in col or "/" in col else "left")
    ratios = []
    for op, label, ours, theirs in rows(args.device):
        if only and op not in only and op != "control":
            continue
        seen = len(xvendor.registry.fallbacks())
        same = _same(ours(), theirs())  # also the warm-up
        for _ in range(2):
            ours(), theirs()
        t_ours, t_torch, pair, noise = [], [], [], []
        faults = {"ours": [], "torch": [], "torch2": []}
        calls = _calls_per_sample(theirs, args.device)
        for i in range(args.repeats):
            # three samples per round: ours, torch, torch again, in a rotating order (each
            # takes every position equally often); torch/torch is the row's own noise
            times = {}
            for who in _ORDERS[i % len(_ORDERS)]:
                times[who] = _time(ours if who == "ours" else theirs, args.device, calls,
                                   faults[who])
            t_ours.append(times["ours"])
            t_torch.append(times["torch"])
            pair.append(times["torch"] / times["ours"])
            noise.append(times["torch"] / times["torch2"])
        mo, mt, ratio = (statistics.median(t_ours), statistics.median(t_torch),
                         statistics.median(pair))
        aa = statistics.median(noise)
        if op != "control":
            ratios.append(ratio)
        dtype = F32 if label.startswith("fp32") else BF16
        backend = ("torch" if op == "control" else
                   xvendor.registry.decide(op, torch.device(args.device), dtype).backend)
        fell = xvendor.registry.fallbacks()[seen:]  # a backend that failed during the row
        if fell:
            backend = f"[red]{fell[0].backend} failed -> {fell[-1].to}[/red]"
        style = "green" if ratio >= 0.95 else "red"
        table.add_row(op, label, backend, f"{mo * 1e3:.3f}", f"{mt * 1e3:.3f}",
                      f"[{style}]{ratio:.2f}x[/{style}]", f"{aa:.2f}x",
                      f"{statistics.median(faults['ours']):.0f}, "
                      f"{statistics.median(faults['torch']):.0f}",
                      "yes" if same else "[red]NO[/red]")
        console.print(f"  {op} {label}: {ratio:.2f}x (torch/torch {aa:.2f}x)", highlight=False)
    console.print(table)
    worst = min(ratios) if ratios else 0.0
    console.print(f"rows: {len(ratios)} (the control not counted), geomean torch/xvendor "
                  f"{statistics.geometric_mean(ratios):.3f}x, worst {worst:.2f}x, "
                  f"below 0.95x: {sum(r < 0.95 for r in ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
