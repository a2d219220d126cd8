"""pytest plugin for multi-vendor kernel tests (registered through the ``pytest11`` entry
point, so any project with xvendor installed gets it).

Markers:
    l0 / l1 / l2                   tiers: logic, toolchains without a GPU, real hardware
    heavy                          minutes of wall time (whole trainers, chaos drills, full
                                   cross-compile sweeps): in its tier, selected by --xv-heavy
    requires_vendor("amd", ...)    a device of one of these vendors must be present
    requires_arch("gfx950", ...)   a device of one of these exact archs must be present
    requires_toolchain("triton")   these Python distributions must be importable
Fixture:
    device                         parametrised over cpu, cuda, rocm, xpu; the absent ones
                                   are skipped with the reason (like PyTorch's device-generic
                                   tests, but every skip is visible in the report)
Marker arguments are checked when a test is collected: a vendor, an arch (from the arch
table) or a toolchain (the list below, plus the project's own ``xv_toolchains`` ini lines
``name = dist, dist``) that does not exist is a collection error naming it, never a skip.
Options:
    --xv-tier l0,l1                run only these tiers (unmarked tests count as l0); a tier
                                   that selected tests and ran none of them (all skipped)
                                   fails the run, with the reasons
    --xv-heavy run|skip|only       with the heavy tests (the default), without them, or only
                                   them: a quick loop and a CI step that runs the rest
    --xv-arch gfx950               dry run: accelerators report this arch (XVENDOR_ARCH), and
                                   requires_arch is satisfied by it for tests below l2

Every skip says which capability is missing, so a matrix report can say what a cell needs.
"""

from __future__ import annotations

import collections
import importlib.metadata as md
import os

import pytest

from ..archs import ARCHS

TIER_MARKERS = {
    "l0": "tier 0: pure logic and CPU torch",
    "l1": "tier 1: real toolchains without a GPU (cross-compilers, interpreters, CPU SYCL, gloo)",
    "l2": "tier 2: needs the hardware; skipped with a reason where it is absent",
}
HEAVY_DOC = ("minutes of wall time (a whole trainer, a chaos drill, a full cross-compile "
             "sweep); selected by --xv-heavy run|skip|only")
# toolchain -> the distributions that provide it (any one is enough): torch's ROCm and XPU
# wheels depend on their own builds of Triton, which install the same `triton` module under
# another distribution name.
_TOOLCHAIN_DISTS = {"triton": ("triton", "pytorch-triton-rocm", "pytorch-triton-xpu",
                               "pytorch-triton"),
                    "flydsl": ("flydsl",), "oneapi": ("intel-sycl-rt",),
                    "sycl": ("intel-sycl-rt",), "dpctl": ("dpctl",), "ziglang": ("ziglang",)}
_DEVICE_PARAMS = ("cpu", "cuda", "rocm", "xpu")
GPU_VENDORS = ("amd", "nvidia", "intel")
GPU_ARCHS = tuple(sorted(a for a, spec in ARCHS.items() if spec.vendor != "cpu"))
_RAN = ("passed", "failed")  # what counts as a test that ran (xfail/xpass included)


def pytest_addoption(parser):
    group = parser.getgroup("xvendor", "multi-vendor test tiers (xvendor.testing)")
    group.addoption("--xv-tier", default=None,
                    help="comma-separated tiers to run (l0,l1,l2); unmarked tests count as l0")
    group.addoption("--xv-heavy", default="run", choices=("run", "skip", "only"),
                    help="tests marked heavy: run them with the rest (default), skip them "
                         "(deselected), or run only them")
    group.addoption("--xv-arch", default=None,
                    help="dry-run arch: accelerators report it and requires_arch accepts it "
                         "below tier l2")
    parser.addini("xv_toolchains", type="linelist", default=[],
                  help="the project's own toolchains for requires_toolchain: lines "
                       "'name = dist, dist' (any one distribution installed is enough)")


def pytest_configure(config):
    for name, doc in TIER_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    config.addinivalue_line("markers", f"heavy: {HEAVY_DOC}")
    config.addinivalue_line("markers", "requires_vendor(*vendors): skip unless a device of "
                                       "one of these vendors (amd, nvidia, intel) is present")
    config.addinivalue_line("markers", "requires_arch(*archs): skip unless a device of one of "
                                       "these exact archs is present")
    config.addinivalue_line("markers", "requires_toolchain(*names): skip unless these "
                                       "toolchains are installed")
    arch = config.getoption("--xv-arch")
    if arch:
        if arch not in GPU_ARCHS:
            raise pytest.UsageError(f"--xv-arch: unknown arch {arch!r}; archs are "
                                    f"{', '.join(GPU_ARCHS)}")
        os.environ["XVENDOR_ARCH"] = arch
    config.stash[_TOOLCHAINS] = toolchain_table(config)
    config.pluginmanager.register(TierRuns(config), "xvendor-tier-runs")


_TOOLCHAINS = pytest.StashKey[dict]()


def toolchain_table(config) -> dict:
    """Toolchain -> distributions: xvendor's, then the project's ``xv_toolchains`` lines."""
    table = dict(_TOOLCHAIN_DISTS)
    for line in config.getini("xv_toolchains"):
        name, sep, dists = line.partition("=")
        names = tuple(d.strip() for d in dists.split(",") if d.strip())
        if not sep or not name.strip() or not names:
            raise pytest.UsageError(f"xv_toolchains: {line!r} must read 'name = dist, dist'")
        table[name.strip()] = names
    return table


def marker_problems(item, toolchains: dict) -> list[str]:
    """Arguments of ``item``'s requires_* markers that name no vendor, arch or toolchain."""
    problems = []
    known = {"requires_vendor": ("vendor", GPU_VENDORS), "requires_arch": ("arch", GPU_ARCHS),
             "requires_toolchain": ("toolchain", tuple(sorted(toolchains)))}
    for marker, (what, names) in known.items():
        for mark in item.iter_markers(marker):
            if not mark.args:
                problems.append(f"{marker}() names no {what}")
            for arg in mark.args:
                if arg not in names:
                    problems.append(f"{marker}({arg!r}): unknown {what} {arg!r}; "
                                    f"{what}s are {', '.join(names)}")
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """A typo in a marker argument fails the collection of its module, naming it: skipped,
    it would look like a missing GPU forever."""
    result = yield
    items = result if isinstance(result, list) else [result] if result is not None else []
    table = collector.config.stash.get(_TOOLCHAINS, _TOOLCHAIN_DISTS)
    for item in items:
        if isinstance(item, pytest.Item):
            problems = marker_problems(item, table)
            if problems:
                raise collector.CollectError(f"{item.nodeid}: " + "; ".join(problems))
    return result


def tier_of(item) -> str:
    for name in ("l2", "l1", "l0"):
        if item.get_closest_marker(name):
            return name
    return "l0"


def pytest_collection_modifyitems(config, items):
    for item in items:  # JUnit XML carries each test's tier, for the matrix report
        item.user_properties.append(("xv_tier", tier_of(item)))
    wanted = config.getoption("--xv-tier")
    heavy = config.getoption("--xv-heavy")
    if not wanted and heavy == "run":
        return
    tiers = {t.strip() for t in wanted.split(",") if t.strip()} if wanted else set(TIER_MARKERS)
    unknown = tiers - set(TIER_MARKERS)
    if unknown:
        raise pytest.UsageError(f"--xv-tier: unknown tiers {sorted(unknown)}; tiers are l0, l1, l2")
    keep, drop = [], []
    for item in items:
        is_heavy = item.get_closest_marker("heavy") is not None
        wanted_heavy = heavy == "run" or (heavy == "only") == is_heavy
        (keep if tier_of(item) in tiers and wanted_heavy else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class TierRuns:
    """Per tier: which tests ran and why the others were skipped; with --xv-tier, a tier
    that selected tests and ran none of them (all skipped) fails the run."""

    def __init__(self, config):
        self.config = config
        self.runs = collections.defaultdict(collections.Counter)
        self.not_run = []

    def pytest_runtest_logreport(self, report):
        tier = dict(report.user_properties).get("xv_tier")
        if tier is None or not (report.when == "call" or
                                (report.when == "setup" and not report.passed)):
            return
        counts = self.runs[tier]
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(
                report.longrepr)
            counts["skipped"] += 1
            counts["why: " + reason.removeprefix("Skipped: ")] += 1
        else:
            counts["failed" if report.failed else "passed"] += 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        if not self.config.getoption("--xv-tier"):
            return
        for tier in sorted(self.runs):
            counts = self.runs[tier]
            if counts["skipped"] and not any(counts[k] for k in _RAN):
                reasons = [(k.removeprefix("why: "), n) for k, n in counts.most_common()
                           if k.startswith("why: ")]
                self.not_run.append((tier, counts["skipped"], reasons))
        if self.not_run and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        for tier, skipped, reasons in self.not_run:
            terminalreporter.section(f"xvendor: tier {tier} ran no test", sep="=", red=True)
            terminalreporter.line(f"tier {tier}: {skipped} selected, all skipped; a tier "
                                  f"that runs nothing is a failure. The skips:")
            for why, n in reasons:
                terminalreporter.line(f"  {n} x {why}")


def _present():
    """(vendor, arch, torch device type) of each accelerator present; imported lazily."""
    from .. import devices
    return [(i.vendor, i.arch, i.device.type)
            for i in (devices.detect(d) for d in devices.present_devices()) if i.vendor != "cpu"]


def _installed(dist: str) -> bool:
    try:
        md.version(dist)
        return True
    except md.PackageNotFoundError:
        return False


def toolchain_missing(names, table=None) -> list[str]:
    table = _TOOLCHAIN_DISTS if table is None else table
    return [name for name in names if not any(_installed(d) for d in table.get(name, (name,)))]


def pytest_runtest_setup(item):
    table = item.config.stash.get(_TOOLCHAINS, _TOOLCHAIN_DISTS)
    for mark in item.iter_markers("requires_toolchain"):
        missing = toolchain_missing(mark.args, table)
        if missing:
            pytest.skip(f"needs toolchain {', '.join(missing)} (not installed)")
    vendors = [v for m in item.iter_markers("requires_vendor") for v in m.args]
    archs = [a for m in item.iter_markers("requires_arch") for a in m.args]
    if not (vendors or archs):
        return
    present = _present()
    if vendors and not any(v in vendors for v, _, _ in present):
        have = ", ".join(sorted({v for v, _, _ in present})) or "no accelerator"
        pytest.skip(f"needs a {' or '.join(vendors)} GPU; present: {have}")
    if archs:
        dry = item.config.getoption("--xv-arch")
        if dry and tier_of(item) != "l2" and dry in archs:
            return
        if not any(a in archs for _, a, _ in present):
            have = ", ".join(sorted({a for _, a, _ in present})) or "no accelerator"
            pytest.skip(f"needs a device of arch {' or '.join(archs)}; present: {have}")


def _device_param_problem(kind: str) -> str | None:
    import torch
    if kind == "cpu":
        return None
    if kind in ("cuda", "rocm"):
        flavour = "ROCm" if kind == "rocm" else "CUDA"
        built = torch.version.hip if kind == "rocm" else torch.version.cuda
        if not built:
            return f"needs a {flavour} build of torch (this one: {torch.__version__})"
        if not torch.cuda.is_available():
            return f"needs a {flavour} GPU (torch.cuda.is_available() is False)"
        return None
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        return "needs an Intel XPU device (torch.xpu.is_available() is False)"
    return None


@pytest.fixture(params=_DEVICE_PARAMS)
def device(request):
    """A torch device per vendor family; absent ones are skipped with what is missing."""
    why = _device_param_problem(request.param)
    if why:
        pytest.skip(why)
    import torch
    return torch.device("cpu" if request.param == "cpu" else
                        "xpu" if request.param == "xpu" else "cuda")
