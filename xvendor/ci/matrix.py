"""The CI matrix: load and validate ``ci/matrix.toml``, name cells, filter by changed paths,
and emit runner matrices for GitHub Actions, GitLab or plain JSON.

Cell names follow the kernel-builder variant style, plus what makes a cell unique here:
``torch215-cxx11-rocm72-x86_64-linux-gfx950-py311`` (the arch is left out for CPU cells).

Every field of a cell is something its job does. The emitted matrix carries the cell's torch
pin and the wheel index of its runtime's build (``Cell.torch_pin``, ``Cell.torch_index``),
the pins of its toolchains (``Cell.toolchain_pins``, with the toolchain -> distribution
mapping in ``TOOLCHAIN_PACKAGES``) and its cross-compiles (``Cell.compile_jobs``, each one
``xvendor compile`` run). ``xvendor ci versions --cell NAME`` checks what got installed
against the cell; ``xvendor ci run`` does too when it is told its cell.

This module needs only the standard library: the matrix job of a CI emits the matrix
before, and without, installing torch.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# compile_cli imports only the standard library at module level; tests/ci checks that
# this module still loads without torch.
from ..archs import ARCHS
from ..tuning.compile_cli import BACKEND_TARGETS

TIERS = ("l0", "l1", "l2")
HARDWARE_TIERS = frozenset({"l2"})
VENDORS = ("cpu", "amd", "nvidia", "intel")
MACHINES = ("x86_64", "aarch64")



@dataclass(frozen=True)
class Runtime:
    """One torch build: where its wheels are and how their version says which build it is."""

    vendors: tuple  # the cell vendors it serves (a GPU build also runs on a CPU runner)
    index: str  # torch's wheel index for this build (PyPI's Linux x86_64 torch is CUDA's)
    local: str  # the local version label of those wheels: torch.__version__ "2.15.0+<local>"
    family: str  # which variant of a toolchain's packages goes with it


RUNTIMES = {
    "cpu": Runtime(("cpu",), "https://download.pytorch.org/whl/cpu", "cpu", "cpu"),
    "cu132": Runtime(("nvidia", "cpu"), "https://download.pytorch.org/whl/cu132", "cu132",
                     "cuda"),
    "rocm72": Runtime(("amd", "cpu"), "https://download.pytorch.org/whl/rocm7.2", "rocm7.2",
                      "rocm"),
    "xpu20262": Runtime(("intel", "cpu"), "https://download.pytorch.org/whl/xpu", "xpu", "xpu"),
}

# Toolchain -> the pip distributions that carry it, by runtime family ("default" for the
# rest). torch's ROCm and XPU wheels depend on their own Triton build; installing PyPI's
# `triton` beside one would overwrite the same `triton` module.
TOOLCHAIN_PACKAGES = {
    "triton": {"default": ("triton",), "rocm": ("pytorch-triton-rocm",),
               "xpu": ("pytorch-triton-xpu",)},
    "flydsl": {"default": ("flydsl",)},
    "oneapi": {"default": ("intel-sycl-rt", "intel-opencl-rt")},
}
TOOLCHAINS = tuple(TOOLCHAIN_PACKAGES)

_CELL_KEYS = {"vendor", "arch", "runtime", "runner", "tiers", "toolchains", "cross_compile",
              "tags", "torch", "python", "machine"}
_VERSION = re.compile(r"\d+(\.\d+)+")
_RELEASE = re.compile(r"(\d+(?:\.\d+)*)")
_PYTHON = re.compile(r"3\.\d+")


class MatrixError(ValueError):
    """The matrix file breaks a rule; the message names the cell and the rule."""


def packages(toolchain: str, runtime: str) -> tuple:
    """The pip distributions that carry ``toolchain`` next to torch's ``runtime`` build."""
    variants = TOOLCHAIN_PACKAGES[toolchain]
    return variants.get(RUNTIMES[runtime].family, variants["default"])


def pin(dist: str, version: str) -> str:
    """A requirement for ``version`` as the matrix writes it: two components name a release
    line (``3.9`` -> ``==3.9.*``), more name one release (``0.3.4.1`` -> ``==0.3.4.1``)."""
    return f"{dist}=={version}.*" if version.count(".") < 2 else f"{dist}=={version}"


def version_matches(installed: str, version: str) -> bool:
    """Whether an installed version satisfies ``pin(_, version)`` as PEP 440 reads it: the
    local label (``+cu132``) is ignored; a release line takes any release in it (pre- and
    post-releases too), one release takes only itself. (Not ``packaging.specifiers``: this
    module runs in a CI job with nothing but the standard library.)"""
    release = _RELEASE.match(installed.split("+", 1)[0])
    if release is None:
        return False
    have = [int(x) for x in release.group(1).split(".")]
    want = [int(x) for x in version.split(".")]
    if version.count(".") < 2:
        return have[:len(want)] == want
    if release.end() != len(installed.split("+", 1)[0]):
        return False
    width = max(len(have), len(want))
    return have + [0] * (width - len(have)) == want + [0] * (width - len(want))


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

    @property
    def torch_index(self) -> str:
        return RUNTIMES[self.runtime].index

    @property
    def torch_pin(self) -> str:
        """The cell's torch, to install from ``torch_index`` alone: PyPI's torch of the same
        version is another build (CUDA), and a newer PyPI patch release would outrank it."""
        return pin("torch", self.torch)

    @property
    def toolchain_pins(self) -> list[str]:
        """pip requirements for the cell's toolchains, installed after ``torch_pin`` (a
        toolchain that torch's build depends on, like ROCm's Triton, comes with it)."""
        return [pin(dist, version) for name, version in self.toolchains.items()
                for dist in packages(name, self.runtime)]

    @property
    def compile_jobs(self) -> list[tuple[str, tuple]]:
        """``(backend, targets)`` for each ``xvendor compile --backend B --targets T`` that
        covers the cell's cross-compile targets with the toolchains it pins."""
        jobs = []
        for backend, known in BACKEND_TARGETS.items():
            targets = tuple(t for t in self.cross_compile if t in known)
            if backend in self.toolchains and targets:
                jobs.append((backend, targets))
        return jobs

    def as_dict(self) -> dict:
        return {"name": self.name, "vendor": self.vendor, "arch": self.arch,
                "runtime": self.runtime, "runner": self.runner, "tiers": list(self.tiers),
                "torch": self.torch, "python": self.python, "machine": self.machine,
                "toolchains": dict(self.toolchains), "cross_compile": list(self.cross_compile),
                "tags": list(self.tags), "torch_index": self.torch_index,
                "torch_pin": self.torch_pin, "toolchain_pins": self.toolchain_pins,
                "compile": [{"backend": b, "targets": list(t)} for b, t in self.compile_jobs]}


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

    def cell(self, name: str) -> Cell:
        found = next((c for c in self.cells if c.name == name), None)
        if found is None:
            raise MatrixError(f"ci matrix: no cell named {name!r}; cells are "
                              f"{[c.name for c in self.cells]}")
        return found


def _fail(where: str, rule: str):
    raise MatrixError(f"ci matrix: {where}: {rule}")


def _version(where: str, key: str, value, example: str) -> str:
    if value is None:
        _fail(where, f"missing {key} (set it in the cell or in [defaults])")
    # A bare TOML number loses digits: torch = 2.10 reads as 2.1.
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        _fail(where, f"{key} must be a version string of two or more numbers like "
                     f"\"{example}\", got {value!r}")
    return value


def _cell(i: int, raw: dict, defaults: dict) -> Cell:
    where = f"cell #{i + 1} ({raw.get('vendor', '?')}/{raw.get('arch', '?')})"
    unknown = set(raw) - _CELL_KEYS
    if unknown:
        _fail(where, f"unknown keys {sorted(unknown)}; allowed: {sorted(_CELL_KEYS)}")
    for key in ("vendor", "arch", "runtime", "runner", "tiers"):
        if key not in raw:
            _fail(where, f"missing required key {key!r}")
    vendor, arch, runtime = raw["vendor"], raw["arch"], raw["runtime"]
    if vendor not in VENDORS:
        _fail(where, f"unknown vendor {vendor!r}; vendors are {list(VENDORS)}")
    if arch not in ARCHS:
        _fail(where, f"unknown arch {arch!r}; known archs are {sorted(ARCHS)}")
    if ARCHS[arch].vendor != vendor:
        _fail(where, f"arch {arch} belongs to vendor {ARCHS[arch].vendor}, not {vendor}")
    if runtime not in RUNTIMES:
        _fail(where, f"unknown runtime {runtime!r}; runtimes (torch builds) are "
                     f"{list(RUNTIMES)}")
    if vendor not in RUNTIMES[runtime].vendors:
        fits = [r for r, spec in RUNTIMES.items() if vendor in spec.vendors]
        _fail(where, f"runtime {runtime} is a torch build for {RUNTIMES[runtime].vendors[0]}; "
                     f"a {vendor} cell needs one of {fits}")
    tiers = tuple(raw["tiers"])
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        _fail(where, f"tiers must be a non-empty subset of {list(TIERS)}, got {list(tiers)}")
    if vendor == "cpu" and HARDWARE_TIERS & set(tiers):
        _fail(where, f"tier l2 needs hardware and cannot run on a CPU runner ({raw['runner']})")
    torch = _version(where, "torch", raw.get("torch", defaults.get("torch")), "2.15")
    python = raw.get("python", defaults.get("python"))
    if python is None:
        _fail(where, "missing python (set it in the cell or in [defaults])")
    if not isinstance(python, str) or not _PYTHON.fullmatch(python):
        _fail(where, f"python must be a string like \"3.11\", got {python!r}")
    machine = raw.get("machine", defaults.get("machine", "x86_64"))
    if machine not in MACHINES:
        _fail(where, f"unknown machine {machine!r}; machines are {list(MACHINES)}")
    toolchains = dict(raw.get("toolchains", {}))
    bad = sorted(set(toolchains) - set(TOOLCHAINS))
    if bad:
        _fail(where, f"unknown toolchains {bad}; toolchains are {list(TOOLCHAINS)}")
    for name, version in toolchains.items():
        _version(where, f"toolchains.{name}", version, "3.9")
    targets = tuple(raw.get("cross_compile", ()))
    known = sorted({t for ts in BACKEND_TARGETS.values() for t in ts})
    for t in targets:
        if t not in known:
            _fail(where, f"unknown cross-compile target {t!r}; `xvendor compile` targets "
                         f"are {known}")
        if targets.count(t) > 1:
            _fail(where, f"cross_compile lists {t} twice")
        able = [b for b, ts in BACKEND_TARGETS.items() if t in ts]
        if not set(able) & set(toolchains):
            _fail(where, f"cross-compile target {t} needs toolchain {' or '.join(able)} "
                         f"(the `xvendor compile` backends for it) in toolchains")
    return Cell(vendor, arch, runtime, raw["runner"], tiers, torch, python, machine,
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


# The steps of one cell's job, for runners that the emitted matrix alone configures (GitLab).
# .github/workflows/ci.yml spells out the same steps; tests/ci holds the two together.
JOB_SCRIPT = (
    'python$PYTHON -m venv .venv',
    '.venv/bin/python -m pip install --upgrade pip',
    '.venv/bin/python -m pip install --index-url "$TORCH_INDEX" "$TORCH_PIN"',
    '(set -f; .venv/bin/python -m pip install "$TORCH_PIN" $TOOLCHAIN_PINS)',  # pins hold '*'
    'make install',
    '.venv/bin/xvendor ci versions --cell "$CELL"',
    'mkdir -p build/ci-report; for job in $COMPILE; do .venv/bin/xvendor compile '
    '--backend "${job%%:*}" --targets "${job#*:}" --configs all '
    '--json "build/ci-report/compile-${job%%:*}.json" || exit 1; done',
    'XVENDOR_CI_CELL="$CELL" make test TIERS=$TIERS',
)


# What a job reads from a github/gitlab row, in order; list fields become one-line strings
# for shell variables (see _strings).
_ROW_KEYS = ("name", "runner", "vendor", "arch", "runtime", "python", "torch", "tiers",
             "torch_index", "torch_pin", "toolchain_pins", "compile")


def _strings(row: dict) -> dict:
    """``row`` with tiers comma-separated, pins space-separated and each compile job as
    ``backend:target,target``, space-separated."""
    flat = dict(row, tiers=",".join(row["tiers"]), toolchain_pins=" ".join(row["toolchain_pins"]),
                compile=" ".join(f"{j['backend']}:{','.join(j['targets'])}"
                                 for j in row["compile"]))
    return {k: flat[k] for k in _ROW_KEYS}


def emit(cells: list[Cell], fmt: str) -> str:
    """The runner matrix in ``fmt``: github (fromJson include list), gitlab, or json."""
    rows = [c.as_dict() for c in cells]
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "github":  # consumed as ${{ fromJson(needs.matrix.outputs.matrix) }}
        return json.dumps({"include": [_strings(r) for r in rows]}, separators=(",", ":"))
    if fmt == "gitlab":  # a job template with parallel:matrix; JSON strings are valid YAML
        lines = ["xvendor-tests:", "  parallel:", "    matrix:"]
        for r in rows:
            values = _strings(r)
            lines.append(f"      - CELL: {json.dumps(values.pop('name'))}")
            lines += [f"        {k.upper()}: {json.dumps(v)}" for k, v in values.items()]
        lines.append('  tags: ["$RUNNER"]')
        lines.append("  script:")
        lines += [f"    - {json.dumps(step)}" for step in JOB_SCRIPT]
        lines += ["  artifacts:", "    when: always", '    paths: ["build/ci-report/"]']
        return "\n".join(lines)
    raise MatrixError(f"ci matrix: unknown format {fmt!r}; formats are github, gitlab, json")
