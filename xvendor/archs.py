"""The arch table: limits and peaks of each exact GPU/CPU architecture, as data.

LDS/shared bytes, wave size, register budget, CUs, peak dense TFLOPS per dtype and memory
bandwidth, from public specs (vendor datasheets and launch material). Tuned configs key
on the exact arch plus CU count, never the family: gfx1250 and gfx1251 differ up to 4x in
matrix-instruction latency. An arch missing from the table gets a generic entry and one
warning, never a crash.

Standard library only: ``xvendor.devices`` (detection, torch) re-exports it, and the CI
matrix (``xvendor.ci``, run without torch) checks each cell's arch against it.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

__all__ = ["ArchSpec", "ARCHS", "arch_spec"]


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

    def peak(self, dtype) -> float:
        """Dense peak TFLOPS for ``dtype`` (0.0 when not published)."""
        return float(self.peak_tflops.get(str(dtype).removeprefix("torch."), 0.0))


def _spec(name, vendor, product, lds_kib, wave, regs, cus, peaks, bw, mma):
    return ArchSpec(name, vendor, product, lds_kib * 1024, wave, regs, cus, peaks, bw, mma)


def _fp8(fp8: float, fp4: float = 0.0) -> dict:
    """Dense FP8 (e4m3 and e5m2 alike) and MXFP4 peaks, TFLOPS; fp4 0 = no FP4 units."""
    peaks = {"float8_e4m3fn": fp8, "float8_e5m2": fp8}
    return peaks | ({"float4_e2m1fn_x2": fp4} if fp4 else {})


# NOTE [arch table]: figures from vendor datasheets and launch material (public specs),
# dense (no sparsity). FP8/FP4: MI300X 2.6 PF FP8 (no FP4 units: MXFP4 emulated); MI355X
# 5 PF FP8, 10 PF MXFP4; MI455X 20 PF FP8 and 40 PF FP4 (AMD's launch figures, before
# shipping); H100/H200 1.98 PF FP8; B200 4.5 PF FP8, 9 PF FP4.
# gfx1250's bf16 peak is not published (~10 PF if 2:1 from FP8): left at the FP8 half and
# marked with the guess in `product`. CU counts of 0 mean "not published".
ARCHS: dict[str, ArchSpec] = {
    s.name: s
    for s in (
        _spec("gfx942", "amd", "AMD Instinct MI300X", 64, 64, 512, 304,
              {"bfloat16": 1307, "float16": 1307, "float32": 163, **_fp8(2615)}, 5.3, "v_mfma"),
        _spec("gfx950", "amd", "AMD Instinct MI355X", 160, 64, 512, 256,
              {"bfloat16": 2500, "float16": 2500, "float32": 157, **_fp8(5000, 10000)}, 8.0, "v_mfma"),
        _spec("gfx1250", "amd", "AMD Instinct MI450/MI455X (bf16 peak estimated)", 320, 32,
              1024, 0, {"bfloat16": 10000, "float16": 10000, **_fp8(20000, 40000)}, 19.6, "v_wmma"),
        _spec("gfx1251", "amd", "AMD Instinct MI430X", 320, 32, 1024, 0, {}, 19.6, "v_wmma"),
        _spec("sm_80", "nvidia", "NVIDIA A100", 164, 32, 255, 108,
              {"bfloat16": 312, "float16": 312, "float32": 19.5}, 2.0, "mma.sync"),
        _spec("sm_90", "nvidia", "NVIDIA H100/H200", 227, 32, 255, 132,
              {"bfloat16": 989, "float16": 989, "float32": 67, **_fp8(1979)}, 4.8, "wgmma"),
        _spec("sm_100", "nvidia", "NVIDIA B200", 227, 32, 255, 148,
              {"bfloat16": 2250, "float16": 2250, "float32": 80, **_fp8(4500, 9000)}, 8.0, "tcgen05"),
        _spec("pvc", "intel", "Intel Data Center GPU Max 1550", 128, 16, 128, 128,
              {"bfloat16": 839, "float16": 839, "float32": 52}, 3.3, "dpas"),
        _spec("bmg", "intel", "Intel Arc B-series (Battlemage)", 128, 16, 128, 20,
              {}, 0.456, "dpas"),
        _spec("cpu", "cpu", "host CPU", 0, 1, 0, os.cpu_count() or 1, {}, 0.0, ""),
    )
}

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
