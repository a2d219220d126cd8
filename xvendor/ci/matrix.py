"""The CI matrix: load and validate ``ci/matrix.toml``, name cells, filter by changed paths,
and emit runner matrices for GitHub Actions, GitLab or plain JSON.

Cell names follow the kernel-builder variant style, plus what makes a cell unique here:
``torch215-cxx11-rocm72-x86_64-linux-gfx950-py311`` (the arch is left out for CPU cells,
``-nightly`` added for the nightly channel).

Every field of a cell is something its job does (``xvendor.ci.cells``). The emitted matrix
carries the cell's torch pin and the wheel index of its runtime's build, the pins of its
toolchains, its cross-compiles, its runner labels, container, env, timeout, status and its
install and test commands (``xvendor.ci.emit``). ``xvendor ci versions --cell NAME``
checks what got installed against the cell; ``xvendor ci run`` does too when it is told
its cell.

This module needs only the standard library: the matrix job of a CI emits the matrix
before, and without, installing torch.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

# compile_cli imports only the standard library at module level; tests/ci checks that
# this module still loads without torch.
from ..tuning.compile_cli import BACKEND_TARGETS  # noqa: F401  (re-exported)
from .cells import (CELL_KEYS, CHANNELS, DEFAULT_KEYS, HARDWARE_TIERS, MACHINES,  # noqa: F401
                    RUNTIMES, STATUSES, TIERS, TOOLCHAIN_PACKAGES, TOOLCHAIN_VENDORS,
                    TOOLCHAINS, VENDORS, Cell, MatrixError, Runtime, fail, packages,
                    parse_cell, pin, version_matches)
from .emit import JOB_SCRIPT, SETUP_SCRIPT, emit, summary  # noqa: F401

# Files whose folder is a project's root (for `--changed` paths), nearest first.
_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_STATUS_RANK = {s: i for i, s in enumerate(STATUSES)}


@dataclass(frozen=True)
class Rule:
    paths: tuple
    affects: object  # "none" or {"vendor": [...], "arch": [...], "tags": [...]}

    def matches(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pat) or (pat.endswith("/**")
                                                   and path.startswith(pat[:-2]))
                   for pat in self.paths)

    def selects(self, cell: Cell) -> bool:
        if self.affects == "none":
            return False
        return (cell.vendor in self.affects.get("vendor", ())
                or cell.arch in self.affects.get("arch", ())
                or bool(set(cell.tags) & set(self.affects.get("tags", ()))))


@dataclass(frozen=True)
class Matrix:
    cells: tuple
    rules: tuple
    root: Path | None = None  # the project the matrix belongs to (for `--changed`)

    def affected(self, changed: list[str]) -> list[Cell]:
        """The cells that the changed files (relative to the project root) affect."""
        chosen = set()
        for path in changed:
            rule = next((r for r in self.rules if r.matches(path)), None)
            chosen |= {c.name for c in self.cells if rule is None or rule.selects(c)}
        return [c for c in self.cells if c.name in chosen]

    def cell(self, name: str) -> Cell:
        found = next((c for c in self.cells if c.name == name), None)
        if found is None:
            raise MatrixError(f"ci matrix: no cell named {name!r}; cells are "
                              f"{[c.name for c in self.cells]}")
        return found


def project_root(matrix_file: Path) -> Path:
    """The nearest folder at or above the matrix file's own that holds a pyproject.toml,
    setup.py, setup.cfg or .git; else the matrix file's folder."""
    start = matrix_file.resolve().parent
    for folder in (start, *start.parents):
        if any((folder / m).exists() for m in _ROOT_MARKERS):
            return folder
    return start


def normalise_changed(paths: list[str], root: Path, cwd: Path | None = None) -> list[str]:
    """Changed paths as the rules read them: relative to the project ``root``, ``/``-
    separated, without ``./``. A relative path is read from ``cwd`` (as git prints it from
    the repository's top, where a CI job starts); a path outside the project (another
    folder of a monorepo) affects none of its cells and is dropped."""
    cwd = (cwd or Path.cwd()).resolve()
    root = root.resolve()
    out = []
    for raw in paths:
        if not raw.strip():
            continue
        full = Path(os.path.normpath(cwd / raw))  # absolute paths stay as they are
        try:
            rel = full.relative_to(root)
        except ValueError:
            continue
        if rel.parts:
            out.append(rel.as_posix())
    return out


def _status(raw_status: dict, cell: Cell) -> Cell:
    """Apply the file's ``[status]`` table (a vendor or a cell name -> status): the most
    restrictive of the cell's own and the table's wins."""
    from dataclasses import replace
    worst = cell.status
    for key in (cell.vendor, cell.name):
        if key in raw_status and _STATUS_RANK[raw_status[key]] > _STATUS_RANK[worst]:
            worst = raw_status[key]
    return replace(cell, status=worst)


def _raw_cells(data: dict, defaults: dict):
    raws = data.get("cell", [])
    if not raws:
        fail("file", "defines no [[cell]]")
    for i, raw in enumerate(raws):
        where = f"cell #{i + 1} ({raw.get('vendor', '?')}/{raw.get('arch', '?')})"
        unknown = set(raw) - CELL_KEYS
        if unknown:
            fail(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(CELL_KEYS)}")
        for key in ("vendor", "arch", "runtime", "runner", "tiers"):
            if key not in raw:
                fail(where, f"missing required key {key!r}")
        runtimes = raw["runtime"] if isinstance(raw["runtime"], list) else [raw["runtime"]]
        if not runtimes:
            fail(where, "runtime must be a runtime or a non-empty list of them")
        for runtime in runtimes:
            yield i, parse_cell(where, raw, defaults, runtime)


def parse(text: str, root: Path | None = None) -> Matrix:
    """Parse and validate the matrix TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"ci matrix: not valid TOML: {e}") from e
    defaults = data.get("defaults", {})
    unknown = set(defaults) - DEFAULT_KEYS
    if unknown:
        fail("[defaults]", f"unknown keys {sorted(unknown)}; allowed: {sorted(DEFAULT_KEYS)}")
    raw_status = data.get("status", {})
    for key, value in raw_status.items():
        if value not in STATUSES:
            fail("[status]", f"{key} must be one of {list(STATUSES)}, got {value!r}")
    cells, seen = [], {}
    for i, c in _raw_cells(data, defaults):
        if c.name in seen:
            fail(f"cell #{i + 1}", f"duplicate cell {c.name} (same as cell #{seen[c.name] + 1})")
        seen[c.name] = i
        cells.append(c)
    names = {c.name for c in cells}
    stray = sorted(set(raw_status) - names - set(VENDORS))
    if stray:
        fail("[status]", f"{stray} name no vendor and no cell; vendors are {list(VENDORS)}")
    cells = [_status(raw_status, c) for c in cells]
    rules = []
    for j, raw in enumerate(data.get("rule", [])):
        affects = raw.get("affects")
        if affects != "none" and not (isinstance(affects, dict) and
                                      set(affects) <= {"vendor", "arch", "tags"}):
            fail(f"rule #{j + 1}", 'affects must be "none" or a table of vendor/arch/tags lists')
        if not raw.get("paths"):
            fail(f"rule #{j + 1}", "needs a non-empty paths list")
        rules.append(Rule(tuple(raw["paths"]), affects))
    return Matrix(tuple(cells), tuple(rules), root)


def load(path: str | Path = "ci/matrix.toml") -> Matrix:
    p = Path(path)
    if not p.is_file():
        raise MatrixError(f"ci matrix: no matrix file at {p} (pass --file PATH)")
    return parse(p.read_text(), project_root(p))
