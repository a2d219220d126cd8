"""Vendor and exact-arch detection, and the arch table.

``detect(device)`` answers "what exactly is this device?" with a frozen ``DeviceInfo``:
vendor (``amd`` / ``nvidia`` / ``intel`` / ``cpu``), exact arch (``gfx950``, ``gfx1250``,
``sm_90``, ``pvc``, ...), product name and compute-unit count. ``XVENDOR_ARCH`` overrides
the detected arch for dry runs (``XVENDOR_ARCH=gfx950 xvendor check`` on a laptop).

The arch table (``ARCHS``) is data: LDS/shared bytes, wave size, register budget, CUs,
peak dense TFLOPS per dtype and memory bandwidth, from public specs (vendor
datasheets and launch material). Tuned configs key on the exact arch plus CU count, never the
family: gfx1250 and gfx1251 differ up to 4x in matrix-instruction latency.

An arch missing from the table gets a generic entry and one warning, never a crash.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from dataclasses import dataclass, field

import torch

__all__ = ["ArchSpec", "DeviceInfo", "ARCHS", "arch_spec", "clear_cache", "detect",
           "hypothetical", "info", "present_devices"]


@dataclass(frozen=True)
class ArchSpec:
    """Limits and peaks of one exact GPU/CPU architecture (public figures)."""

    name: str
    vendor: str  # "amd" | "nvidia" | "intel" | "cpu"
    product: str
    lds_bytes: int  # LDS (AMD) / shared memory (NVIDIA) / SLM (Intel) per CU, per block max
    wave_size: int  # wavefront / warp / sub-group width the kernels are written for
    vgprs_per_simd_lane: int  # register budget per lane (AMD: VGPR+AGPR; NVIDIA: 255 max)
    cus: int  # compute units / SMs / Xe-cores (0 = not published)
    peak_tflops: dict = field(default_factory=dict, hash=False, compare=False)
    hbm_tbps: float = 0.0
    mma_instr: str = ""  # the matrix instruction family a GEMM kernel must contain
    known: bool = True  # False for the generic stand-in of an unknown arch

    def peak(self, dtype: torch.dtype) -> float:
        """Dense peak TFLOPS for ``dtype`` (0.0 when not published)."""
        return float(self.peak_tflops.get(str(dtype).removeprefix("torch."), 0.0))


def _spec(name, vendor, product, lds_kib, wave, regs, cus, peaks, bw, mma):
    return ArchSpec(name, vendor, product, lds_kib * 1024, wave, regs, cus, peaks, bw, mma)


# NOTE [arch table]: figures from vendor datasheets and launch material (public specs).
# gfx1250's bf16 peak is not published (~10 PF if 2:1 from FP8): left at the FP8 half and
# marked with the guess in `product`. CU counts of 0 mean "not published".
ARCHS: dict[str, ArchSpec] = {
    s.name: s
    for s in (
        _spec("gfx942", "amd", "AMD Instinct MI300X", 64, 64, 512, 304,
              {"bfloat16": 1307, "float16": 1307, "float32": 163}, 5.3, "v_mfma"),
        _spec("gfx950", "amd", "AMD Instinct MI355X", 160, 64, 512, 256,
              {"bfloat16": 2500, "float16": 2500, "float32": 157}, 8.0, "v_mfma"),
        _spec("gfx1250", "amd", "AMD Instinct MI450/MI455X (bf16 peak estimated)", 320, 32,
              1024, 0, {"bfloat16": 10000, "float16": 10000}, 19.6, "v_wmma"),
        _spec("gfx1251", "amd", "AMD Instinct MI430X", 320, 32, 1024, 0, {}, 19.6, "v_wmma"),
        _spec("sm_80", "nvidia", "NVIDIA A100", 164, 32, 255, 108,
              {"bfloat16": 312, "float16": 312, "float32": 19.5}, 2.0, "mma.sync"),
        _spec("sm_90", "nvidia", "NVIDIA H100/H200", 227, 32, 255, 132,
              {"bfloat16": 989, "float16": 989, "float32": 67}, 4.8, "wgmma"),
        _spec("sm_100", "nvidia", "NVIDIA B200", 227, 32, 255, 148,
              {"bfloat16": 2250, "float16": 2250, "float32": 80}, 8.0, "tcgen05"),
        _spec("pvc", "intel", "Intel Data Center GPU Max 1550", 128, 16, 128, 128,
              {"bfloat16": 839, "float16": 839, "float32": 52}, 3.3, "dpas"),
        _spec("bmg", "intel", "Intel Arc B-series (Battlemage)", 128, 16, 128, 20,
              {}, 0.456, "dpas"),
        _spec("cpu", "cpu", "host CPU", 0, 1, 0, os.cpu_count() or 1, {}, 0.0, ""),
    )
}

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


_warned_unknown: set[str] = set()


def arch_spec(arch: str, vendor: str = "") -> ArchSpec:
    """The table entry for ``arch``; an unknown arch gets a generic entry and one warning."""
    spec = ARCHS.get(arch)
    if spec is not None:
        return spec
    if arch not in _warned_unknown:
        _warned_unknown.add(arch)
        warnings.warn(
            f"xvendor: arch {arch!r} is not in the arch table (known: {sorted(ARCHS)}); "
            "using a generic entry with no limits or peaks. Tuning and pruning are off for it.",
            stacklevel=2,
        )
    return ArchSpec(arch, vendor or "unknown", f"unknown ({arch})", 0, 1, 0, 0, {}, 0.0, "",
                    known=False)


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
