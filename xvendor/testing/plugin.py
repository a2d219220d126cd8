"""pytest plugin for multi-vendor kernel tests (registered through the ``pytest11`` entry
point, so any project with xvendor installed gets it).

Markers:
    l0 / l1 / l2                   tiers: logic, toolchains without a GPU, real hardware
    requires_vendor("amd", ...)    a device of one of these vendors must be present
    requires_arch("gfx950", ...)   a device of one of these exact archs must be present
    requires_toolchain("triton")   these Python distributions must be importable
Fixture:
    device                         parametrised over cpu, cuda, rocm, xpu; the absent ones
                                   are skipped with the reason (like PyTorch's device-generic
                                   tests, but every skip is visible in the report)
Options:
    --xv-tier l0,l1                run only these tiers (unmarked tests count as l0)
    --xv-arch gfx950               dry run: accelerators report this arch (XVENDOR_ARCH), and
                                   requires_arch is satisfied by it for tests below l2

Every skip says which capability is missing, so a matrix report can say what a cell needs.
"""

from __future__ import annotations

import importlib.metadata as md
import os

import pytest

TIER_MARKERS = {
    "l0": "tier 0: pure logic and CPU torch",
    "l1": "tier 1: real toolchains without a GPU (cross-compilers, interpreters, CPU SYCL, gloo)",
    "l2": "tier 2: needs the hardware; skipped with a reason where it is absent",
}
# toolchain -> the distributions that provide it (any one is enough): torch's ROCm and XPU
# wheels depend on their own builds of Triton, which install the same `triton` module under
# another distribution name.
_TOOLCHAIN_DISTS = {"triton": ("triton", "pytorch-triton-rocm", "pytorch-triton-xpu",
                               "pytorch-triton"),
                    "flydsl": ("flydsl",), "oneapi": ("intel-sycl-rt",),
                    "sycl": ("intel-sycl-rt",), "dpctl": ("dpctl",), "ziglang": ("ziglang",)}
_DEVICE_PARAMS = ("cpu", "cuda", "rocm", "xpu")


def pytest_addoption(parser):
    group = parser.getgroup("xvendor", "multi-vendor test tiers (xvendor.testing)")
    group.addoption("--xv-tier", default=None,
                    help="comma-separated tiers to run (l0,l1,l2); unmarked tests count as l0")
    group.addoption("--xv-arch", default=None,
                    help="dry-run arch: accelerators report it and requires_arch accepts it "
                         "below tier l2")


def pytest_configure(config):
    for name, doc in TIER_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    config.addinivalue_line("markers", "requires_vendor(*vendors): skip unless a device of "
                                       "one of these vendors (amd, nvidia, intel) is present")
    config.addinivalue_line("markers", "requires_arch(*archs): skip unless a device of one of "
                                       "these exact archs is present")
    config.addinivalue_line("markers", "requires_toolchain(*names): skip unless these "
                                       "toolchains are installed")
    arch = config.getoption("--xv-arch")
    if arch:
        os.environ["XVENDOR_ARCH"] = arch


def tier_of(item) -> str:
    for name in ("l2", "l1", "l0"):
        if item.get_closest_marker(name):
            return name
    return "l0"


def pytest_collection_modifyitems(config, items):
    for item in items:  # JUnit XML carries each test's tier, for the matrix report
        item.user_properties.append(("xv_tier", tier_of(item)))
    wanted = config.getoption("--xv-tier")
    if not wanted:
        return
    tiers = {t.strip() for t in wanted.split(",") if t.strip()}
    unknown = tiers - set(TIER_MARKERS)
    if unknown:
        raise pytest.UsageError(f"--xv-tier: unknown tiers {sorted(unknown)}; tiers are l0, l1, l2")
    keep, drop = [], []
    for item in items:
        (keep if tier_of(item) in tiers else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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


def toolchain_missing(names) -> list[str]:
    return [name for name in names
            if not any(_installed(d) for d in _TOOLCHAIN_DISTS.get(name, (name,)))]


def pytest_runtest_setup(item):
    for mark in item.iter_markers("requires_toolchain"):
        missing = toolchain_missing(mark.args)
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
