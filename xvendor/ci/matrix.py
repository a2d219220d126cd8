"""The CI matrix: load and validate ``ci/matrix.toml``, name cells, filter by changed paths,
and emit runner matrices for GitHub Actions, GitLab or plain JSON.

Cell names follow the kernel-builder variant style, plus what makes a cell unique here:
``torch215-cxx11-rocm72-x86_64-linux-gfx950-py311`` (the arch is left out for CPU cells).
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .. import devices

TIERS = ("l0", "l1", "l2")
HARDWARE_TIERS = frozenset({"l2"})
VENDORS = ("cpu", "amd", "nvidia", "intel")
TOOLCHAINS = ("triton", "flydsl", "oneapi")
_CELL_KEYS = {"vendor", "arch", "runtime", "runner", "tiers", "toolchains", "cross_compile",
              "tags", "torch", "python", "machine"}


class MatrixError(ValueError):
    """The matrix file breaks a rule; the message names the cell and the rule."""


@dataclass(frozen=True)
class Cell:
    vendor: str
    arch: str
    runtime: str
    runner: str
    tiers: tuple
    torch: str
    python: str
    machine: str = "x86_64"
    toolchains: dict = field(default_factory=dict, hash=False, compare=False)
    cross_compile: tuple = ()
    tags: tuple = ()

    @property
    def name(self) -> str:
        torch_tag = "torch" + "".join(self.torch.split(".")[:2])
        arch = "" if self.vendor == "cpu" else f"-{self.arch}"
        py = "py" + "".join(self.python.split(".")[:2])
        return f"{torch_tag}-cxx11-{self.runtime}-{self.machine}-linux{arch}-{py}"

    def as_dict(self) -> dict:
        return {"name": self.name, "vendor": self.vendor, "arch": self.arch,
                "runtime": self.runtime, "runner": self.runner, "tiers": list(self.tiers),
                "torch": self.torch, "python": self.python, "machine": self.machine,
                "toolchains": dict(self.toolchains), "cross_compile": list(self.cross_compile),
                "tags": list(self.tags)}


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

    def affected(self, changed: list[str]) -> list[Cell]:
        """The cells that the changed files affect (all cells when ``changed`` is None)."""
        chosen = set()
        for path in changed:
            rule = next((r for r in self.rules if r.matches(path)), None)
            chosen |= {c.name for c in self.cells if rule is None or rule.selects(c)}
        return [c for c in self.cells if c.name in chosen]


def _fail(where: str, rule: str):
    raise MatrixError(f"ci matrix: {where}: {rule}")


def _cell(i: int, raw: dict, defaults: dict) -> Cell:
    where = f"cell #{i + 1} ({raw.get('vendor', '?')}/{raw.get('arch', '?')})"
    unknown = set(raw) - _CELL_KEYS
    if unknown:
        _fail(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(_CELL_KEYS)}")
    for key in ("vendor", "arch", "runtime", "runner", "tiers"):
        if key not in raw:
            _fail(where, f"missing required key {key!r}")
    vendor, arch = raw["vendor"], raw["arch"]
    if vendor not in VENDORS:
        _fail(where, f"unknown vendor {vendor!r}; vendors are {list(VENDORS)}")
    if arch not in devices.ARCHS:
        _fail(where, f"unknown arch {arch!r}; known archs are {sorted(devices.ARCHS)}")
    if devices.ARCHS[arch].vendor != vendor:
        _fail(where, f"arch {arch} belongs to vendor {devices.ARCHS[arch].vendor}, not {vendor}")
    tiers = tuple(raw["tiers"])
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        _fail(where, f"tiers must be a non-empty subset of {list(TIERS)}, got {list(tiers)}")
    if vendor == "cpu" and HARDWARE_TIERS & set(tiers):
        _fail(where, f"tier l2 needs hardware and cannot run on a CPU runner ({raw['runner']})")
    toolchains = dict(raw.get("toolchains", {}))
    bad = sorted(set(toolchains) - set(TOOLCHAINS))
    if bad:
        _fail(where, f"unknown toolchains {bad}; toolchains are {list(TOOLCHAINS)}")
    targets = tuple(raw.get("cross_compile", ()))
    for t in targets:
        if t not in devices.ARCHS or t == "cpu":
            _fail(where, f"unknown cross-compile target {t!r}")
    return Cell(vendor, arch, raw["runtime"], raw["runner"], tiers,
                str(raw.get("torch", defaults.get("torch", ""))),
                str(raw.get("python", defaults.get("python", ""))),
                str(raw.get("machine", defaults.get("machine", "x86_64"))),
                toolchains, targets, tuple(raw.get("tags", ())))


def parse(text: str) -> Matrix:
    """Parse and validate the matrix TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"ci matrix: not valid TOML: {e}") from e
    defaults = data.get("defaults", {})
    raws = data.get("cell", [])
    if not raws:
        _fail("file", "defines no [[cell]]")
    cells = [_cell(i, raw, defaults) for i, raw in enumerate(raws)]
    seen: dict[str, int] = {}
    for i, c in enumerate(cells):
        if c.name in seen:
            _fail(f"cell #{i + 1}", f"duplicate cell {c.name} (same as cell #{seen[c.name] + 1})")
        seen[c.name] = i
    rules = []
    for j, raw in enumerate(data.get("rule", [])):
        affects = raw.get("affects")
        if affects != "none" and not (isinstance(affects, dict) and
                                      set(affects) <= {"vendor", "arch", "tags"}):
            _fail(f"rule #{j + 1}", 'affects must be "none" or a table of vendor/arch/tags lists')
        if not raw.get("paths"):
            _fail(f"rule #{j + 1}", "needs a non-empty paths list")
        rules.append(Rule(tuple(raw["paths"]), affects))
    return Matrix(tuple(cells), tuple(rules))


def load(path: str | Path = "ci/matrix.toml") -> Matrix:
    p = Path(path)
    if not p.is_file():
        raise MatrixError(f"ci matrix: no matrix file at {p} (pass --file PATH)")
    return parse(p.read_text())


def emit(cells: list[Cell], fmt: str) -> str:
    """The runner matrix in ``fmt``: github (fromJson include list), gitlab, or json."""
    rows = [c.as_dict() for c in cells]
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "github":  # consumed as ${{ fromJson(needs.matrix.outputs.matrix) }}
        include = [{"name": r["name"], "runner": r["runner"], "vendor": r["vendor"],
                    "arch": r["arch"], "python": r["python"], "torch": r["torch"],
                    "tiers": ",".join(r["tiers"])} for r in rows]
        return json.dumps({"include": include}, separators=(",", ":"))
    if fmt == "gitlab":  # a job template with parallel:matrix; JSON strings are valid YAML
        lines = ["xvendor-tests:", "  parallel:", "    matrix:"]
        for r in rows:
            lines.append(f"      - CELL: {json.dumps(r['name'])}")
            for key in ("runner", "vendor", "arch", "python", "torch"):
                lines.append(f"        {key.upper()}: {json.dumps(r[key])}")
            lines.append(f"        TIERS: {json.dumps(','.join(r['tiers']))}")
        lines.append('  tags: ["$RUNNER"]')
        lines.append('  script: ["make test TIERS=$TIERS"]')
        return "\n".join(lines)
    raise MatrixError(f"ci matrix: unknown format {fmt!r}; formats are github, gitlab, json")
