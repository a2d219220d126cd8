"""The correctness part of ``xvendor check``: every op, through the dispatch layer, on a
device, per dtype, against the fp64 oracle; one ``Result`` per (device, op, case, dtype).

Cases cover the paths a kernel gets wrong first: sizes off any tile grid, transposed
(non-contiguous) weights, bias and out_dtype epilogues, all four grouped_mm layouts with an
empty group and rows past ``offs[-1]``. Outputs are compared whole, so garbage in the
zero-filled tail counts as an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from . import ops, registry
from . import numerics as oracle

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass
class Result:
    device: str
    op: str
    case: str
    dtype: str
    backend: str
    rel_error: float
    tolerance: float
    ok: bool
    error: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _cases(device, dtype, gen):
    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(device, dtype)

    offs = oracle.random_offs([5, 0, 17, 9], device)  # an empty group; 31 of 33 rows used
    yield "gemm", "67x45x33 +bias", (r(67, 33), r(45, 33).t(), r(45)), {}, \
        lambda a, b, bias: oracle.gemm(a, b, bias)
    yield "gemm", "40x24x72 out=fp32", (r(40, 72), r(72, 24)), {"out_dtype": torch.float32}, \
        lambda a, b: oracle.gemm(a, b)
    yield "grouped_mm", "2Dx3D ragged +bias", (r(33, 40), r(4, 40, 24), offs, r(4, 24)), {}, \
        oracle.grouped_mm
    yield "grouped_mm", "3Dx2D ragged", (r(4, 12, 40), r(40, 33), offs), {}, oracle.grouped_mm
    yield "grouped_mm", "2Dx2D ragged K", (r(12, 33), r(33, 20), offs), {}, oracle.grouped_mm
    yield "grouped_mm", "3Dx3D +bias", (r(3, 9, 20), r(3, 20, 11), None, r(3, 11)), {}, \
        oracle.grouped_mm
    yield "rms_norm", "7x96", (r(7, 96), r(96), 1e-6), {}, oracle.rms_norm
    yield "topk", "9x50 k=8", (r(9, 50), 8), {}, \
        lambda x, k: oracle.topk_values(x, k)


def run(device: torch.device, dtypes=DTYPES, seed: int = 0) -> list[Result]:
    """Run every case on ``device`` for each dtype; never raises for a failing kernel."""
    gen = torch.Generator().manual_seed(seed)
    fns = {"gemm": ops.gemm, "grouped_mm": ops.grouped_mm, "rms_norm": ops.rms_norm,
           "topk": ops.topk}
    results = []
    for dtype in dtypes:
        for op, case, args, kwargs, ref_fn in _cases(device, dtype, gen):
            out_dtype = kwargs.get("out_dtype", dtype)
            tol = oracle.TOLERANCE[out_dtype]
            try:
                backend = registry.decide(op, torch.device(device), dtype).backend
            except Exception as e:
                backend = f"<{type(e).__name__}>"
            try:
                out = fns[op](*args, **kwargs)
                ref = ref_fn(*args)
                if op == "topk":
                    values, idx = out
                    picked = args[0].gather(-1, idx)  # indices must point at the values
                    err = max(oracle.rel_error(values, ref), oracle.rel_error(picked, values))
                else:
                    err = oracle.rel_error(out, ref) if out.dtype == out_dtype else float("inf")
                results.append(Result(str(device), op, case, str(dtype).removeprefix("torch."),
                                      backend, err, tol, err <= tol))
            except Exception as e:  # a crash is a failure to report, not to propagate
                results.append(Result(str(device), op, case, str(dtype).removeprefix("torch."),
                                      backend, float("inf"), tol, False,
                                      f"{type(e).__name__}: {e}"))
    return results
