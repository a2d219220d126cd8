"""Vendor and exact-arch detection, and the arch table.

``detect(device)`` answers "what exactly is this device?" with a frozen ``DeviceInfo``:
vendor (``amd`` / ``nvidia`` / ``intel`` / ``cpu``), exact arch (``gfx950``, ``gfx1250``,
``sm_90``, ``pvc``, ...), product name and compute-unit count. ``XVENDOR_ARCH`` overrides
the detected arch for dry runs (``XVENDOR_ARCH=gfx950 xvendor check`` on a laptop).

The arch table (``ARCHS``, ``arch_spec``) is data in ``xvendor.archs`` (no torch needed
there, so the CI matrix reads it too), re-exported here.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import torch

from .archs import ARCHS, ArchSpec, arch_spec

__all__ = ["ArchSpec", "DeviceInfo", "ARCHS", "arch_spec", "clear_cache", "detect",
           "hypothetical", "info", "present_devices"]


_VENDOR_OF_DEVICE_TYPE = {"cpu": "cpu", "xpu": "intel", "meta": "cpu"}


@dataclass(frozen=True)
class DeviceInfo:
    """What one torch device is, as far as kernel selection cares."""

    device: torch.device
    vendor: str
    arch: str
    product: str
    cu_count: int
    spec: ArchSpec

    @property
    def key(self) -> tuple:
        """Identity used in caches: (device type, vendor, arch, CU count)."""
        return (self.device.type, self.vendor, self.arch, self.cu_count)


def _strip_gcn_features(name: str) -> str:
    # gcnArchName looks like "gfx950:sramecc+:xnack-"; the target is what precedes the features.
    return name.split(":", 1)[0].strip()


_INTEL_NAME_TO_ARCH = (  # (regex on the device name, arch) — first match wins
    (re.compile(r"Max \d{4}|Ponte Vecchio|PVC", re.I), "pvc"),
    (re.compile(r"\bB\d{3}\b|Battlemage|BMG", re.I), "bmg"),
    (re.compile(r"\bA\d{3}|Alchemist|DG2", re.I), "dg2"),
    (re.compile(r"Lunar Lake|LNL", re.I), "lnl"),
)


def _detect_uncached(device: torch.device) -> DeviceInfo:
    kind = device.type
    if kind == "cuda":
        props = torch.cuda.get_device_properties(device)
        product, cus = props.name, props.multi_processor_count
        if torch.version.hip:
            vendor, arch = "amd", _strip_gcn_features(props.gcnArchName)
        else:
            vendor, arch = "nvidia", f"sm_{props.major}{props.minor}"
    elif kind == "xpu":
        props = torch.xpu.get_device_properties(device)
        product = props.name
        cus = int(getattr(props, "gpu_subslice_count", 0) or getattr(props, "max_compute_units", 0))
        vendor = "intel"
        arch = next((a for rx, a in _INTEL_NAME_TO_ARCH if rx.search(product)), "intel-gpu")
    else:
        vendor = _VENDOR_OF_DEVICE_TYPE.get(kind, kind)
        arch, product, cus = "cpu", ARCHS["cpu"].product, ARCHS["cpu"].cus
    override = os.environ.get("XVENDOR_ARCH")
    if override and kind != "cpu":  # dry runs: pretend an accelerator is another arch
        arch = override
        spec = arch_spec(arch)
        vendor = spec.vendor if spec.known else vendor
        product, cus = f"{spec.product} (XVENDOR_ARCH override)", spec.cus or cus
    spec = arch_spec(arch, vendor)
    if not cus:
        cus = spec.cus
    return DeviceInfo(device, vendor, arch, product, cus, spec)


@functools.lru_cache(maxsize=64)
def _detect_cached(device_type: str, index: int | None, override: str | None) -> DeviceInfo:
    return _detect_uncached(torch.device(device_type, index) if index is not None
                            else torch.device(device_type))


def detect(device: torch.device | str | int | None = None) -> DeviceInfo:
    """Describe ``device`` (default: the current accelerator, else the CPU)."""
    if device is None:
        device = _default_device()
    device = torch.device(device)
    if device.type in ("cuda", "xpu") and device.index is None:
        mod = getattr(torch, device.type)
        device = torch.device(device.type, mod.current_device())
    return _detect_cached(device.type, device.index, os.environ.get("XVENDOR_ARCH"))


_known: dict[torch.device, DeviceInfo] = {}


def info(device: torch.device) -> DeviceInfo:
    """``detect(device)`` remembered per torch.device: one dictionary lookup, for the paths
    that run on every call (a backend launching a kernel; ``detect`` reads the environment
    each time). ``clear_cache()`` forgets it."""
    found = _known.get(device)
    if found is None:
        found = _known[device] = detect(device)
    return found


def clear_cache() -> None:
    """Forget detected devices (``XVENDOR_ARCH`` is read again on the next ``detect``)."""
    _detect_cached.cache_clear()
    _known.clear()


def _default_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return torch.device("xpu", torch.xpu.current_device())
    return torch.device("cpu")


def present_devices() -> list[torch.device]:
    """Every device this process can run on: the CPU, then each CUDA/ROCm and XPU device."""
    found = [torch.device("cpu")]
    if torch.cuda.is_available():
        found += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        found += [torch.device("xpu", i) for i in range(torch.xpu.device_count())]
    return found


_DEVICE_TYPE_OF_VENDOR = {"amd": "cuda", "nvidia": "cuda", "intel": "xpu", "cpu": "cpu"}


def hypothetical(arch: str) -> DeviceInfo:
    """A device of ``arch`` that need not be present: for explain() and dry-run tables.

    ROCm devices are torch "cuda" devices, so amd and nvidia archs map to device type cuda.
    """
    spec = arch_spec(arch)
    kind = _DEVICE_TYPE_OF_VENDOR.get(spec.vendor, "cuda")
    return DeviceInfo(torch.device(kind, 0) if kind != "cpu" else torch.device("cpu"),
                      spec.vendor, arch, f"{spec.product} (hypothetical)", spec.cus, spec)
