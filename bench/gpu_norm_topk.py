"""RMSNorm (forward, backward) and topk on a CUDA/ROCm GPU: every xvendor backend that can
serve the call against torch on the same shapes, in the same run, next to the memory-bound
floor (bytes over the arch table's HBM bandwidth).

On gfx950/gfx1250 this times the FlyDSL kernels (``backend="flydsl"``) against torch's
``F.rms_norm`` / autograd backward / ``torch.topk``; elsewhere (an NVIDIA GPU) it times the
backends that run there (aten: the dispatch layer's own cost over torch). Each backend is
first checked against the fp64 oracle (``xvendor.numerics``) on that shape: a wrong one is
reported, not timed. Timing as ``bench/gpu_gemm.py`` (CUDA events, median of 50 calls,
inputs rotated over 4 buffer sets). ``--json PATH`` writes the records.

    python bench/gpu_norm_topk.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json

import torch

import xvendor
from gpu_gemm import candidates, time_ms  # same folder: the same timing and backend list
from xvendor import devices
from xvendor import numerics as oracle
from xvendor.ops import rms_norm_backward
from xvendor.ops.rms_norm import backward_oracle

NORM_SHAPES = [(4096, 4096), (16384, 8192), (16384, 7168), (16384, 1024)]  # tokens x hidden
TOPK_SHAPES = [(16384, 256, 8), (16384, 64, 6), (256, 128256, 1024), (64, 262144, 1024)]


def _bwd_ref(grad, x, w):
    """torch's own backward of F.rms_norm (the peer)."""
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    torch.nn.functional.rms_norm(xr, (x.shape[-1],), wr).backward(grad)
    return xr.grad, wr.grad


def _row(records, op, shape, impl, ms, base, floor_us, check):
    records.append(dict(op=op, shape=list(shape), impl=impl, ms=ms, ratio=base / ms,
                        floor_us=floor_us, check=check))
    print(f"{op:18s} {str(shape):22s} {impl:8s} {ms * 1e3:9.1f} {base / ms:8.2f} "
          f"{floor_us:9.1f}  {check}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/gpu_norm_topk.py needs a CUDA or ROCm GPU")
    info = devices.info(torch.device("cuda"))
    bw = devices.ARCHS[info.arch].hbm_tbps * 1e12 if info.arch in devices.ARCHS else 0.0
    floor = (lambda nbytes: nbytes / bw * 1e6) if bw else (lambda nbytes: float("nan"))
    dt, records = torch.bfloat16, []
    print(f"{torch.cuda.get_device_name()} ({info.arch})  torch {torch.__version__}")
    print(f"{'op':18s} {'shape':22s} {'impl':8s} {'µs':>9s} {'vs torch':>8s} {'floor µs':>9s}  check")
    for r, h in NORM_SHAPES:
        sets = [(torch.randn(r, h, device="cuda", dtype=dt), torch.randn(h, device="cuda", dtype=dt))
                for _ in range(4)]
        want = oracle.rms_norm(*sets[0])
        base = time_ms(lambda x, w: torch.nn.functional.rms_norm(x, (h,), w), sets)
        _row(records, "rms_norm", (r, h), "torch", base, base, floor(2 * r * h * 2), "")
        for name in candidates("rms_norm", sets[0], dt):
            fn = lambda x, w, _n=name: xvendor.rms_norm(x, w, backend=_n)  # noqa: E731
            err = oracle.rel_error(fn(*sets[0]), want)
            ok = err <= oracle.TOLERANCE[dt]
            _row(records, "rms_norm", (r, h), name, time_ms(fn, sets) if ok else float("nan"),
                 base, floor(2 * r * h * 2), f"{err:.1e}")
        bsets = [(torch.randn(r, h, device="cuda", dtype=dt),) + s for s in sets]
        want_dx, _ = backward_oracle(*bsets[0])
        base = time_ms(_bwd_ref, bsets)
        nbytes = 3 * r * h * 2 + r * h * 2  # read x, dy (and w), write dx; partials excluded
        _row(records, "rms_norm_backward", (r, h), "torch", base, base, floor(nbytes), "")
        for name in candidates("rms_norm_backward", bsets[0], dt):
            fn = lambda g, x, w, _n=name: rms_norm_backward(g, x, w, backend=_n)  # noqa: E731
            err = oracle.rel_error(fn(*bsets[0])[0], want_dx)
            ok = err <= oracle.TOLERANCE[dt]
            _row(records, "rms_norm_backward", (r, h), name,
                 time_ms(fn, bsets) if ok else float("nan"), base, floor(nbytes), f"{err:.1e}")
    for r, n, k in TOPK_SHAPES:
        sets = [(torch.randn(r, n, device="cuda", dtype=torch.float32), k) for _ in range(4)]
        want = oracle.topk_values(sets[0][0], k)
        base = time_ms(lambda x, kk: torch.topk(x, kk), sets)
        nbytes = r * n * 4 + r * k * 12
        _row(records, "topk", (r, n, k), "torch", base, base, floor(nbytes), "")
        for name in candidates("topk", sets[0], torch.float32):
            fn = lambda x, kk, _n=name: xvendor.topk(x, kk, backend=_n)  # noqa: E731
            values, _ = fn(*sets[0])
            exact = torch.equal(values.double(), want.to(values.device))
            _row(records, "topk", (r, n, k), name, time_ms(fn, sets) if exact else float("nan"),
                 base, floor(nbytes), "exact" if exact else "WRONG")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
