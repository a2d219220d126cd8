"""The correctness part of ``xvendor check``: every op, through the dispatch layer, on a
device, per dtype, against the fp64 oracle; one ``Result`` per (device, op, case, dtype).

The cases are the ops' own (``OpSpec.cases``): sizes off any tile grid, transposed
(non-contiguous) weights, bias and out_dtype epilogues, all four grouped_mm layouts with
an empty group and rows past ``offs[-1]``. Outputs are compared whole, so garbage in the
zero-filled tail counts as an error.

Each row names the backend that actually produced the output. When the decided backend
raised and the registry fell back, the row says so ("flydsl -> aten") and fails: an
automatic choice that does not work on this device is a defect ``check`` must report, even
though the call itself was served.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from . import numerics, ops, registry

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
    fell_back_from: str = ""  # the backend that was decided but failed, if any

    def as_dict(self) -> dict:
        return asdict(self)


def _ran(decided: str, before: int) -> tuple[str, list]:
    """(backend that produced the output, fallbacks of this call) after one call."""
    new = registry.fallback_count() - before
    events = registry.fallbacks()[-new:] if new > 0 else []
    return (events[-1].to if events else decided), events


def run_case(spec, case, device, dtype) -> Result:
    """One case through the public op; never raises for a failing kernel."""
    out_dtype = case.kwargs.get("out_dtype") or dtype
    tol = numerics.TOLERANCE[out_dtype]
    row = dict(device=str(device), op=spec.name, case=case.name,
               dtype=str(dtype).removeprefix("torch."), tolerance=tol)
    try:
        decided = registry.explain_request(
            spec.name, registry.device_info(torch.device(device)),
            spec.decision_dtype(case.args, case.kwargs),
            args=spec.positional(case.args, case.kwargs)).backend
    except Exception as e:
        decided = f"<{type(e).__name__}>"
    before = registry.fallback_count()
    try:
        out = spec.function(*case.args, **case.kwargs)
    except Exception as e:  # a crash is a failure to report, not to propagate
        return Result(backend=decided, rel_error=float("inf"), ok=False,
                      error=f"{type(e).__name__}: {e}", **row)
    backend, events = _ran(decided, before)
    expected = spec.oracle(*case.args, **case.kwargs)
    if spec.error is not None:  # the op's own comparison: dtypes, shapes and values
        err = spec.error(out, expected, case.args, case.kwargs)
    elif out.dtype != out_dtype:
        err = float("inf")
    else:
        err = numerics.rel_error(out, expected)
    error = "; ".join(f"{e.backend} failed ({e.error}), fell back to {e.to}" for e in events)
    return Result(backend=backend, rel_error=err, ok=err <= tol and not events, error=error,
                  fell_back_from=events[0].backend if events else "", **row)


def run(device: torch.device, dtypes=DTYPES, seed: int = 0, op_names=None) -> list[Result]:
    """Run every op's cases (or those of ``op_names``) on ``device`` for each dtype."""
    gen = torch.Generator().manual_seed(seed)
    results = []
    for dtype in dtypes:
        def rand(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float32).to(device, dtype)
        for spec in ops.SPECS.values():
            if op_names is not None and spec.name not in op_names:
                continue
            for case in spec.cases(rand, device):
                results.append(run_case(spec, case, device, dtype))
    return results
