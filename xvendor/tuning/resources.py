"""Read a compiled kernel's resources, compute its occupancy, and judge it against the arch.

Toolchain-neutral: it takes the raw artifacts of a cross-compile (``asm`` text, LDS/shared
bytes the launch will request, ``num_warps``, and for NVIDIA the ``cubin``) and returns one
record. FlyDSL code objects carry the same ``.amdgpu_metadata`` and can reuse ``inspect``.

- AMD: VGPR/AGPR/SGPR counts, spills, scratch and the compiler's own register-only
  ``; Occupancy`` come from the asm text; LDS is what the launch allocates (``shared``,
  the asm says 0 because Triton sizes LDS at launch).
  Code objects whose asm carries no comment lines (FlyDSL's ISA text) are read from the
  ``.amdgpu_metadata`` block instead: ``.vgpr_count``/``.agpr_count``/``.sgpr_count``,
  spill counts, ``.private_segment_fixed_size`` (scratch) and
  ``.group_segment_fixed_size`` (static LDS, added to what the launch allocates).
- NVIDIA: registers, stack frame (where spills live), static shared and local memory from
  the bundled ``cuobjdump --dump-resource-usage`` on the cubin; spills = stack + local bytes.
- Occupancy = resident workgroups per CU (SM), the minimum of what registers, LDS and the
  wave slots allow, with ``xvendor.devices.ARCHS`` limits (``vgprs_per_simd_lane``,
  ``lds_bytes``); ``waves_per_simd`` is the same figure in waves per SIMD (warps per SM
  sub-partition on NVIDIA).
- Verdict: rejected when it spills, uses scratch, exceeds the LDS/shared limit, fits zero
  workgroups, or lacks the arch's matrix instruction (``ArchSpec.mma_instr``) or an
  instruction the toolchain says its template must contain (``raw["require"]``, e.g.
  ``tensor_load_to_lds`` for the gfx1250 Tensor Data Mover templates).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter

from .. import devices

# Per-arch facts the occupancy needs beyond ARCHS. AMD: 4 SIMDs per CU (WGP on gfx1250),
# VGPRs allocated in granules of 8. gfx1250's wave-slot count is not published; 16 per
# SIMD is assumed (wave32 SIMDs); registers bind long before that for GEMM tiles.
_AMD_MAX_WAVES = {"gfx942": 8, "gfx950": 8, "gfx1250": 16, "gfx1251": 16}
_AMD_SIMDS, _AMD_VGPR_GRANULE = 4, 8
# NVIDIA sm_90: 64K 32-bit registers per SM, allocated per warp in units of 256; 64 warps
# and 32 blocks per SM; 1 KiB of shared memory reserved per block (CUDA guide, CC 9.0).
_NV = {"regfile": 65536, "reg_unit": 256, "max_warps": 64, "max_blocks": 32,
       "smem_reserved": 1024, "subpartitions": 4}

_AMD_INT = {
    "vgpr": re.compile(r"^\s*; NumVgprs:\s*(\d+)", re.M),
    "agpr": re.compile(r"^\s*; NumAgprs:\s*(\d+)", re.M),
    "total_vgpr": re.compile(r"^\s*; TotalNumVgprs:\s*(\d+)", re.M),
    "sgpr": re.compile(r"^\s*\.sgpr_count:\s*(\d+)", re.M),
    "scratch": re.compile(r"^\s*; ScratchSize:\s*(\d+)", re.M),
    "asm_occupancy": re.compile(r"^\s*; Occupancy:\s*(\d+)", re.M),
    "vgpr_spills": re.compile(r"^\s*\.vgpr_spill_count:\s*(\d+)", re.M),
    "sgpr_spills": re.compile(r"^\s*\.sgpr_spill_count:\s*(\d+)", re.M),
}
_MMA = {
    "v_mfma": re.compile(r"\b(v_mfma\w+)"),
    "v_wmma": re.compile(r"\b(v_wmma\w+|v_swmmac\w+)"),
    "wgmma": re.compile(r"\b(wgmma\.mma_async[\w.]*)"),
    "mma.sync": re.compile(r"\b(mma\.sync[\w.]*)"),
    "tcgen05": re.compile(r"\b(tcgen05\.mma[\w.:]*)"),
}
_CUOBJDUMP_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def _first_int(rx, text, default=0) -> int:
    m = rx.search(text)
    return int(m.group(1)) if m else default


def _mma(asm: str, family: str) -> tuple[str | None, int]:
    """The most frequent instruction of ``family`` in ``asm`` and its count."""
    rx = _MMA.get(family)
    found = Counter(rx.findall(asm)) if rx else Counter()
    if not found:
        return None, 0
    name, _ = found.most_common(1)[0]
    return name, sum(found.values())


_AMD_META = {
    "vgpr": re.compile(r"^\s*(?:- )?\.vgpr_count:\s*(\d+)", re.M),
    "agpr": re.compile(r"^\s*(?:- )?\.agpr_count:\s*(\d+)", re.M),
    "scratch": re.compile(r"^\s*(?:- )?\.private_segment_fixed_size:\s*(\d+)", re.M),
    "static_shared": re.compile(r"^\s*(?:- )?\.group_segment_fixed_size:\s*(\d+)", re.M),
}
_ACCUM_OFFSET = re.compile(r"^\s*\.amdhsa_accum_offset\s+(\d+)", re.M)


def _amd_resources(asm: str) -> dict:
    r = {k: _first_int(rx, asm) for k, rx in _AMD_INT.items()}
    if _AMD_INT["vgpr"].search(asm) is None:  # no comment lines: read the metadata
        r.update({k: _first_int(rx, asm) for k, rx in _AMD_META.items()})
        if r["agpr"]:  # AGPRs are allocated after the arch VGPRs, at accum_offset
            r["total_vgpr"] = _first_int(_ACCUM_OFFSET, asm, r["vgpr"]) + r["agpr"]
    r["total_vgpr"] = r["total_vgpr"] or r["vgpr"] + r["agpr"]
    r["spills"] = r.pop("vgpr_spills") + r.pop("sgpr_spills")
    return r


def _cuobjdump() -> str:
    import triton.backends.nvidia as nv
    return os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump")


def _nvidia_resources(cubin: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([_cuobjdump(), "--dump-resource-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    m = _CUOBJDUMP_RES.search(out)
    if m is None:
        raise RuntimeError(f"cuobjdump printed no resource usage: {out[-300:]!r}")
    reg, stack, shared, local = map(int, m.groups())
    return {"vgpr": reg, "agpr": 0, "total_vgpr": reg, "sgpr": None, "scratch": local,
            "spills": stack + local, "static_shared": shared, "asm_occupancy": None}


def occupancy(arch: str, regs: int, lds_bytes: int, num_warps: int) -> tuple[int, int, str]:
    """(workgroups per CU/SM, waves per SIMD, limiting resource) for one kernel."""
    spec = devices.ARCHS[arch]
    if spec.vendor == "amd":
        waves_per_simd_per_wg = -(-num_warps // _AMD_SIMDS)
        alloc = -(-max(regs, 1) // _AMD_VGPR_GRANULE) * _AMD_VGPR_GRANULE
        max_waves = _AMD_MAX_WAVES.get(arch, 8)
        by = {"registers": (spec.vgprs_per_simd_lane // alloc) // waves_per_simd_per_wg,
              "wave slots": max_waves // waves_per_simd_per_wg}
        if lds_bytes:
            by["LDS"] = spec.lds_bytes // lds_bytes
        limit = min(by, key=by.get)
        return by[limit], by[limit] * waves_per_simd_per_wg, limit
    per_warp = -(-max(regs, 1) * spec.wave_size // _NV["reg_unit"]) * _NV["reg_unit"]
    by = {"registers": (_NV["regfile"] // per_warp) // num_warps,
          "warp slots": _NV["max_warps"] // num_warps, "block slots": _NV["max_blocks"]}
    if lds_bytes:
        by["shared"] = (spec.lds_bytes + _NV["smem_reserved"]) // (lds_bytes + _NV["smem_reserved"])
    limit = min(by, key=by.get)
    return by[limit], by[limit] * num_warps // _NV["subpartitions"], limit


def inspect(arch: str, raw: dict) -> dict:
    """Resources, occupancy and verdict of one compiled kernel (see the module docstring)."""
    spec = devices.ARCHS[arch]
    res = _amd_resources(raw["asm"]) if raw["vendor"] == "amd" else _nvidia_resources(raw["cubin"])
    lds = int(raw["shared"]) + int(res.pop("static_shared", 0))
    occ, waves, limit = occupancy(arch, res["total_vgpr"], lds, raw["num_warps"])
    mma, mma_count = _mma(raw["asm"], spec.mma_instr)
    reasons = []
    if res["spills"]:
        reasons.append(f"spills ({res['spills']} {'registers' if spec.vendor == 'amd' else 'bytes'})")
    if res["scratch"]:
        reasons.append(f"uses {res['scratch']} bytes of scratch/local memory")
    if lds > spec.lds_bytes:
        reasons.append(f"needs {lds} bytes of LDS/shared, {arch} has {spec.lds_bytes}")
    elif occ < 1:
        reasons.append(f"no workgroup fits a CU (limited by {limit})")
    if mma is None and raw.get("expects_mma", True):  # a norm kernel has no matrix math
        reasons.append(f"no {spec.mma_instr} instruction in the code (expected on {arch})")
    missing = [i for i in raw.get("require", ()) if not re.search(rf"\b{re.escape(i)}\b", raw["asm"])]
    if missing:
        reasons.append(f"no {', '.join(missing)} in the code (the template issues it)")
    return {
        "ok": not reasons, "reason": "; ".join(reasons),
        "vgpr": res["vgpr"], "agpr": res["agpr"], "sgpr": res["sgpr"],
        "spills": res["spills"], "scratch": res["scratch"], "lds_bytes": lds,
        "occupancy": occ, "waves_per_simd": waves, "occupancy_limit": limit,
        "asm_occupancy": res["asm_occupancy"], "mma_instr": mma, "mma_count": mma_count,
        "compile_s": round(raw["compile_s"], 3),
        **{k: raw[k] for k in ("code_object_bytes", "code_object_sha256") if k in raw},
        **({"required": {i: len(re.findall(rf"\b{re.escape(i)}\b", raw["asm"]))
                         for i in raw["require"]}} if raw.get("require") else {}),
    }
