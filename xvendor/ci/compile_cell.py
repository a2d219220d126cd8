"""``xvendor ci compile --cell NAME``: a cell's cross-compiles. xvendor's own templates go
through ``xvendor compile`` (one run per backend the cell pins); the project's own kernels
through its ``compile_entry``, a ``module:function`` called as
``function(targets=[...], out_dir=Path)`` that compiles them for the cell's
``cross_compile`` targets and returns a JSON-serialisable report (an exception fails the
step). Reports land in the report folder as ``compile-<backend>.json`` and
``compile-entry.json``.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import traceback
from pathlib import Path

from .cells import Cell


def _entry_function(spec: str):
    module, _, name = spec.partition(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the project's own modules, from its root
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"ci compile: compile_entry {spec!r}: {module} has no function {name!r}")
    return fn


def run_entry(cell: Cell, out: Path) -> int:
    where = out / "compile-entry"
    where.mkdir(parents=True, exist_ok=True)
    record = {"entry": cell.compile_entry, "targets": list(cell.cross_compile)}
    try:
        result = _entry_function(cell.compile_entry)(targets=list(cell.cross_compile),
                                                     out_dir=where)
        record.update(ok=True, result=result)
        rc = 0
    except Exception as e:  # the project's code: report it, fail the step
        record.update(ok=False, error=f"{type(e).__name__}: {e}",
                      traceback=traceback.format_exc())
        print(f"xvendor ci compile: {cell.compile_entry} failed:\n{record['traceback']}",
              file=sys.stderr)
        rc = 1
    (out / "compile-entry.json").write_text(json.dumps(record, indent=1, default=str))
    return rc


def compile_cell(cell: Cell, report_dir: str) -> int:
    """Every cross-compile of ``cell``; non-zero when any of them failed."""
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    rc = 0
    for backend, targets in cell.compile_jobs:
        cmd = [sys.executable, "-m", "xvendor.cli", "compile", "--backend", backend,
               "--targets", ",".join(targets), "--configs", "all",
               "--json", str(out / f"compile-{backend}.json")]
        print(f"xvendor ci compile: {' '.join(cmd)}", flush=True)
        rc = subprocess.call(cmd) or rc
    if cell.compile_entry:
        print(f"xvendor ci compile: {cell.compile_entry}(targets={list(cell.cross_compile)})",
              flush=True)
        rc = run_entry(cell, out) or rc
    if not cell.compile_jobs and not cell.compile_entry:
        print(f"xvendor ci compile: cell {cell.name} has nothing to cross-compile")
    return rc
