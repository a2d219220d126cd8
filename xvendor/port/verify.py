"""Prove a port: run each kernel over a block-size sweep on NaN-poisoned outputs against a
reference written by the porter, and report per (kernel, block size).

    from xvendor.port import Case, check
    cases = [Case("row_sum", make=lambda: (x, torch.empty(rows), cols), outputs=(1,),
                  grid=lambda block: rows, blocks=(32, 128, 1024))]
    rows = check(mod, {"row_sum": lambda x, out, cols: x.double().sum(1)}, cases)

``reference[kernel](*args)`` gets the inputs (outputs still poisoned) and returns the
expected value of each output (one tensor, or a tuple in ``outputs`` order); it should
compute in float64. ``xvendor port FILE.cu --check REF.py`` imports REF.py and uses its
``REFERENCE`` (a dict, else REF.py's functions named like the kernels) and ``CASES``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

__all__ = ["Case", "CheckRow", "check", "load_reference", "print_table"]


@dataclass
class Case:
    kernel: str  # a kernel name, or "name<args>" for an instantiation
    make: Callable  # () -> the argument tuple (fresh random inputs)
    outputs: tuple  # indices of the arguments the kernel writes (poisoned first)
    grid: Callable  # block size -> grid (int or tuple)
    blocks: tuple = (32, 64, 128, 256)
    shared_bytes: Callable | None = None  # block size -> dynamic shared bytes
    atol: float = 1e-5
    rtol: float = 1e-4


@dataclass
class CheckRow:
    kernel: str
    block: int
    ok: bool
    max_abs_err: float
    detail: str = ""


def _poison(t):
    t.fill_(float("nan") if t.is_floating_point() else -1)


def check(mod, reference, cases, *, progress: Callable | None = None) -> list:
    """Run every case over its block sizes; a list of ``CheckRow`` (never raises for a
    kernel's failure: the row says what happened)."""
    import torch
    rows = []
    for case in cases:
        ref = reference[case.kernel] if isinstance(reference, dict) else getattr(reference, case.kernel.split("<")[0])
        for block in case.blocks:
            args = list(case.make())
            for i in case.outputs:
                _poison(args[i])
            want = ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
            want = want if isinstance(want, (tuple, list)) else (want,)
            try:
                cfg = (case.grid(block), block) + ((case.shared_bytes(block),) if case.shared_bytes else ())
                mod[case.kernel][cfg](*args)
                err, ok = 0.0, True
                for i, w in zip(case.outputs, want):
                    got = args[i].double()
                    w = torch.as_tensor(w).double()
                    e = (got - w).abs()
                    err = max(err, float(e.max()) if e.numel() else 0.0)
                    ok = ok and bool(torch.allclose(got, w, atol=case.atol, rtol=case.rtol))
                rows.append(CheckRow(case.kernel, block, ok, err))
            except Exception as e:  # a launch error is this row's verdict, not the sweep's end
                rows.append(CheckRow(case.kernel, block, False, float("nan"), f"{type(e).__name__}: {e}"))
            if progress:
                progress()
    return rows


def load_reference(path):
    """(REFERENCE, CASES) from a Python file (see the module docstring)."""
    spec = importlib.util.spec_from_file_location("xvendor_port_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = getattr(mod, "CASES", None)
    if cases is None:
        raise ValueError(f"{path}: defines no CASES (a list of xvendor.port.Case)")
    return getattr(mod, "REFERENCE", mod), list(cases() if callable(cases) else cases)


def print_table(rows, console) -> None:
    from rich.table import Table
    table = Table("kernel", "block", "result", "max |err|", "detail")
    for r in rows:
        table.add_row(r.kernel, str(r.block), "[green]ok[/]" if r.ok else "[red]MISMATCH[/]",
                      f"{r.max_abs_err:.3g}", r.detail[:80])
    console.print(table)
