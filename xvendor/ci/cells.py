"""One CI cell: what it installs (torch build, channel, toolchains), where it runs (runner,
container, env, timeout), whether it runs (status), and the commands its job runs; and the
validation of a ``[[cell]]`` table into a ``Cell``.

Standard library only (see ``xvendor.ci.matrix``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from ..archs import ARCHS
from ..tuning.compile_cli import BACKEND_TARGETS

TIERS = ("l0", "l1", "l2")
HARDWARE_TIERS = frozenset({"l2"})
VENDORS = ("cpu", "amd", "nvidia", "intel")
MACHINES = ("x86_64", "aarch64")
CHANNELS = ("stable", "nightly")
# ok: runs and gates; unstable: runs, its failure does not fail the pipeline (GitHub
# continue-on-error, GitLab allow_failure); disabled: left out of the emitted matrix.
STATUSES = ("ok", "unstable", "disabled")
NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly"
# What a job runs when the matrix does not say: install the project (which depends on
# xvendor), then `xvendor ci run`, which takes the cell and its tiers from the job's
# variables (XVENDOR_CI_CELL) and writes build/ci-report.
DEFAULT_INSTALL = "python -m pip install -e ."
DEFAULT_TEST = "xvendor ci run --report build/ci-report"


class MatrixError(ValueError):
    """The matrix file breaks a rule; the message names the cell and the rule."""


@dataclass(frozen=True)
class Runtime:
    """One torch build: where its wheels are and how their version says which build it is."""

    vendors: tuple  # the cell vendors it serves (a GPU build also runs on a CPU runner)
    index: str  # torch's wheel index for this build (PyPI's Linux x86_64 torch is CUDA's)
    local: str  # the local version label of those wheels: torch.__version__ "2.15.0+<local>"
    family: str  # which variant of a toolchain's packages goes with it

    @property
    def subdir(self) -> str:
        return self.index.rsplit("/", 1)[1]


_WHL = "https://download.pytorch.org/whl"
# Several builds per vendor, as torch publishes them for one release (a cell picks one; a
# cell whose runtime is a list becomes one cell per runtime).
RUNTIMES = {
    "cpu": Runtime(("cpu",), f"{_WHL}/cpu", "cpu", "cpu"),
    "cu128": Runtime(("nvidia", "cpu"), f"{_WHL}/cu128", "cu128", "cuda"),
    "cu130": Runtime(("nvidia", "cpu"), f"{_WHL}/cu130", "cu130", "cuda"),
    "cu132": Runtime(("nvidia", "cpu"), f"{_WHL}/cu132", "cu132", "cuda"),
    "rocm71": Runtime(("amd", "cpu"), f"{_WHL}/rocm7.1", "rocm7.1", "rocm"),
    "rocm72": Runtime(("amd", "cpu"), f"{_WHL}/rocm7.2", "rocm7.2", "rocm"),
    "xpu20262": Runtime(("intel", "cpu"), f"{_WHL}/xpu", "xpu", "xpu"),
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
# Which cell vendors can use a toolchain: FlyDSL emits AMD code objects only, the oneAPI
# runtime drives Intel devices; a CPU cell cross-compiles and runs SYCL on the CPU.
TOOLCHAIN_VENDORS = {"triton": frozenset(VENDORS), "flydsl": frozenset({"amd", "cpu"}),
                     "oneapi": frozenset({"intel", "cpu"})}

# Keys [defaults] may set for every cell; a cell's own value wins (env tables merge).
DEFAULT_KEYS = {"torch", "python", "machine", "channel", "container", "env", "timeout_minutes",
                "install", "test", "status", "compile_entry", "compile_templates"}
CELL_KEYS = DEFAULT_KEYS | {"vendor", "arch", "runtime", "runner", "tiers", "toolchains",
                            "cross_compile", "tags"}
_VERSION = re.compile(r"\d+(\.\d+)+")
_RELEASE = re.compile(r"(\d+(?:\.\d+)*)")
_PYTHON = re.compile(r"3\.\d+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENTRY = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


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
    local label (``+cu132``) is ignored; a release line takes any release in it (pre-, dev-
    and post-releases too: a nightly's ``2.16.0.dev20261201``), one release takes only
    itself. (Not ``packaging.specifiers``: this module runs with the standard library.)"""
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
    runner: tuple  # runner labels; all of them must match (GitHub runs-on, GitLab tags)
    tiers: tuple
    torch: str
    python: str
    machine: str = "x86_64"
    toolchains: dict = field(default_factory=dict, hash=False, compare=False)
    cross_compile: tuple = ()
    tags: tuple = ()
    channel: str = "stable"
    status: str = "ok"
    container: str = ""
    env: dict = field(default_factory=dict, hash=False, compare=False)
    timeout_minutes: int | None = None
    install: str = DEFAULT_INSTALL
    test: str = DEFAULT_TEST
    compile_entry: str = ""  # the project's own "module:function" that compiles its kernels
    compile_templates: bool = True  # also cross-compile xvendor's own templates

    @property
    def name(self) -> str:
        torch_tag = "torch" + "".join(self.torch.split(".")[:2])
        arch = "" if self.vendor == "cpu" else f"-{self.arch}"
        py = "py" + "".join(self.python.split(".")[:2])
        nightly = "-nightly" if self.channel == "nightly" else ""
        return f"{torch_tag}-cxx11-{self.runtime}-{self.machine}-linux{arch}-{py}{nightly}"

    @property
    def torch_index(self) -> str:
        spec = RUNTIMES[self.runtime]
        return f"{NIGHTLY_INDEX}/{spec.subdir}" if self.channel == "nightly" else spec.index

    @property
    def torch_pin(self) -> str:
        """The cell's torch, to install from ``torch_index`` alone: PyPI's torch of the same
        version is another build (CUDA), and a newer PyPI patch release would outrank it.
        A nightly's versions are dev releases, which pip takes with ``--pre`` only."""
        return pin("torch", self.torch)

    @property
    def pip_pre(self) -> str:
        return "--pre" if self.channel == "nightly" else ""

    @property
    def toolchain_index(self) -> str:
        """An extra index for the toolchain pins: a nightly torch's own Triton build is on
        the nightly index, not on PyPI."""
        return self.torch_index if self.channel == "nightly" else ""

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
        if not self.compile_templates:
            return []
        jobs = []
        for backend, known in BACKEND_TARGETS.items():
            targets = tuple(t for t in self.cross_compile if t in known)
            if backend in self.toolchains and targets:
                jobs.append((backend, targets))
        return jobs

    @property
    def cache_key(self) -> str:
        """A pip cache key that changes with what the cell installs (torch build, channel,
        toolchain pins, interpreter, image): cells never share a cache of other wheels."""
        parts = [self.python, self.machine, self.container, self.torch_index, self.torch_pin,
                 self.pip_pre, *self.toolchain_pins]
        digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
        return f"{self.runtime}-py{self.python}-{self.machine}-{digest}"

    def as_dict(self) -> dict:
        return {"name": self.name, "vendor": self.vendor, "arch": self.arch,
                "runtime": self.runtime, "runner": list(self.runner), "tiers": list(self.tiers),
                "torch": self.torch, "python": self.python, "machine": self.machine,
                "channel": self.channel, "status": self.status, "container": self.container,
                "env": dict(self.env), "timeout_minutes": self.timeout_minutes,
                "install": self.install, "test": self.test,
                "toolchains": dict(self.toolchains), "cross_compile": list(self.cross_compile),
                "tags": list(self.tags), "torch_index": self.torch_index,
                "torch_pin": self.torch_pin, "pip_pre": self.pip_pre,
                "toolchain_index": self.toolchain_index, "toolchain_pins": self.toolchain_pins,
                "compile": [{"backend": b, "targets": list(t)} for b, t in self.compile_jobs],
                "compile_entry": self.compile_entry, "cache_key": self.cache_key}


def fail(where: str, rule: str):
    raise MatrixError(f"ci matrix: {where}: {rule}")


def _version(where: str, key: str, value, example: str) -> str:
    if value is None:
        fail(where, f"missing {key} (set it in the cell or in [defaults])")
    # A bare TOML number loses digits: torch = 2.10 reads as 2.1.
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        fail(where, f"{key} must be a version string of two or more numbers like "
                    f"\"{example}\", got {value!r}")
    return value


def _choice(where: str, key: str, value, allowed) -> str:
    if value not in allowed:
        fail(where, f"{key} must be one of {list(allowed)}, got {value!r}")
    return value


def _command(where: str, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        fail(where, f"{key} must be a one-line shell command, got {value!r}")
    return value


def _runner(where: str, value) -> tuple:
    labels = [value] if isinstance(value, str) else value
    if not isinstance(labels, list) or not labels or \
            any(not isinstance(x, str) or not x.strip() for x in labels):
        fail(where, f"runner must be a non-empty label or a non-empty list of non-empty "
                    f"labels, got {value!r}")
    return tuple(labels)


def _env(where: str, value) -> dict:
    if not isinstance(value, dict):
        fail(where, f"env must be a table of NAME = \"value\", got {value!r}")
    for k, v in value.items():
        if not _ENV_NAME.fullmatch(k):
            fail(where, f"env name {k!r} is not a shell variable name")
        if not isinstance(v, str) or "\n" in v:
            fail(where, f"env.{k} must be a one-line string, got {v!r}")
    return dict(value)


def _toolchains(where: str, vendor: str, raw) -> dict:
    toolchains = dict(raw)
    bad = sorted(set(toolchains) - set(TOOLCHAINS))
    if bad:
        fail(where, f"unknown toolchains {bad}; toolchains are {list(TOOLCHAINS)}")
    for name, version in toolchains.items():
        _version(where, f"toolchains.{name}", version, "3.9")
        if vendor not in TOOLCHAIN_VENDORS[name]:
            fail(where, f"toolchain {name} cannot be used on a {vendor} cell (it serves "
                        f"{sorted(TOOLCHAIN_VENDORS[name])} cells)")
    return toolchains


def _targets(where: str, raw, toolchains: dict, entry: str) -> tuple:
    targets = tuple(raw)
    known = sorted({t for ts in BACKEND_TARGETS.values() for t in ts})
    for t in targets:
        if targets.count(t) > 1:
            fail(where, f"cross_compile lists {t} twice")
        if entry:  # the project's own compile entry takes any arch of the table
            if t not in ARCHS or ARCHS[t].vendor == "cpu":
                fail(where, f"unknown cross-compile target {t!r}; GPU archs are "
                            f"{sorted(a for a, s in ARCHS.items() if s.vendor != 'cpu')}")
            continue
        if t not in known:
            fail(where, f"unknown cross-compile target {t!r}; `xvendor compile` targets "
                        f"are {known}")
        able = [b for b, ts in BACKEND_TARGETS.items() if t in ts]
        if not set(able) & set(toolchains):
            fail(where, f"cross-compile target {t} needs toolchain {' or '.join(able)} "
                        f"(the `xvendor compile` backends for it) in toolchains")
    return targets


def parse_cell(where: str, raw: dict, defaults: dict, runtime: str) -> Cell:
    """One ``[[cell]]`` table (with one runtime of its list) as a validated ``Cell``."""
    get = lambda key, default=None: raw.get(key, defaults.get(key, default))  # noqa: E731
    vendor, arch = raw["vendor"], raw["arch"]
    if vendor not in VENDORS:
        fail(where, f"unknown vendor {vendor!r}; vendors are {list(VENDORS)}")
    if arch not in ARCHS:
        fail(where, f"unknown arch {arch!r}; known archs are {sorted(ARCHS)}")
    if ARCHS[arch].vendor != vendor:
        fail(where, f"arch {arch} belongs to vendor {ARCHS[arch].vendor}, not {vendor}")
    if runtime not in RUNTIMES:
        fail(where, f"unknown runtime {runtime!r}; runtimes (torch builds) are "
                    f"{list(RUNTIMES)}")
    if vendor not in RUNTIMES[runtime].vendors:
        fits = [r for r, spec in RUNTIMES.items() if vendor in spec.vendors]
        fail(where, f"runtime {runtime} is a torch build for {RUNTIMES[runtime].vendors[0]}; "
                    f"a {vendor} cell needs one of {fits}")
    runner = _runner(where, raw["runner"])
    tiers = tuple(raw["tiers"])
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        fail(where, f"tiers must be a non-empty subset of {list(TIERS)}, got {list(tiers)}")
    if vendor == "cpu" and HARDWARE_TIERS & set(tiers):
        fail(where, f"tier l2 needs hardware and cannot run on a CPU runner ({raw['runner']})")
    torch = _version(where, "torch", get("torch"), "2.15")
    python = get("python")
    if python is None:
        fail(where, "missing python (set it in the cell or in [defaults])")
    if not isinstance(python, str) or not _PYTHON.fullmatch(python):
        fail(where, f"python must be a string like \"3.11\", got {python!r}")
    machine = get("machine", "x86_64")
    if machine not in MACHINES:
        fail(where, f"unknown machine {machine!r}; machines are {list(MACHINES)}")
    timeout = get("timeout_minutes")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)
                                or timeout <= 0):
        fail(where, f"timeout_minutes must be a positive whole number, got {timeout!r}")
    container = get("container", "")
    if not isinstance(container, str) or container != container.strip():
        fail(where, f"container must be an image name like \"rocm/dev-ubuntu-24.04:7.2\", "
                    f"got {container!r}")
    entry = get("compile_entry", "")
    if entry and (not isinstance(entry, str) or not _ENTRY.fullmatch(entry)):
        fail(where, f"compile_entry must be \"module:function\", got {entry!r}")
    templates = get("compile_templates", True)
    if not isinstance(templates, bool):
        fail(where, f"compile_templates must be true or false, got {templates!r}")
    toolchains = _toolchains(where, vendor, raw.get("toolchains", {}))
    return Cell(vendor, arch, runtime, runner, tiers, torch, python, machine, toolchains,
                _targets(where, raw.get("cross_compile", ()), toolchains, entry),
                tuple(raw.get("tags", ())),
                channel=_choice(where, "channel", get("channel", "stable"), CHANNELS),
                status=_choice(where, "status", get("status", "ok"), STATUSES),
                container=container,
                env={**_env(where, defaults.get("env", {})), **_env(where, raw.get("env", {}))},
                timeout_minutes=timeout,
                install=_command(where, "install", get("install", DEFAULT_INSTALL)),
                test=_command(where, "test", get("test", DEFAULT_TEST)),
                compile_entry=entry, compile_templates=templates)

