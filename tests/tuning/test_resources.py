"""Resource parsing, occupancy and verdicts on hand-written compiler output (l0)."""

import pytest

from xvendor.tuning import resources

pytestmark = pytest.mark.l0

# The lines Triton's AMD asm carries (as seen in gfx950 output), with chosen numbers.
AMD_ASM = """
	v_mfma_f32_16x16x32_bf16 a[0:3], v[10:13], v[14:17], a[0:3]
	v_mfma_f32_16x16x32_bf16 a[4:7], v[10:13], v[18:21], a[4:7]
; NumVgprs: {vgpr}
; NumAgprs: {agpr}
; TotalNumVgprs: {total}
; ScratchSize: {scratch}
; Occupancy: 2
    .sgpr_count:     54
    .sgpr_spill_count: 0
    .vgpr_count:     {total}
    .vgpr_spill_count: {spills}
"""


def raw(vgpr=128, agpr=0, spills=0, scratch=0, shared=65536, num_warps=4, asm=None):
    text = asm if asm is not None else AMD_ASM.format(vgpr=vgpr, agpr=agpr, total=vgpr + agpr,
                                                      spills=spills, scratch=scratch)
    return {"vendor": "amd", "asm": text, "shared": shared, "num_warps": num_warps,
            "compile_s": 1.0}


def test_amd_fields_and_valid_verdict():
    r = resources.inspect("gfx950", raw(vgpr=120, agpr=64))
    assert r["ok"] and r["reason"] == ""
    assert (r["vgpr"], r["agpr"], r["sgpr"], r["spills"], r["scratch"]) == (120, 64, 54, 0, 0)
    assert r["lds_bytes"] == 65536 and r["asm_occupancy"] == 2
    assert r["mma_instr"] == "v_mfma_f32_16x16x32_bf16" and r["mma_count"] == 2
    # 184 VGPR+AGPR -> 2 waves/SIMD by registers; 160 KiB / 64 KiB -> 2 workgroups by LDS
    assert r["occupancy"] == 2


@pytest.mark.parametrize("kw, reason", [
    ({"spills": 12, "scratch": 36}, "spills (12 registers)"),
    ({"shared": 200 * 1024}, "needs 204800 bytes of LDS/shared, gfx950 has 163840"),
    ({"asm": "; NumVgprs: 64\n"}, "no v_mfma instruction"),
])
def test_amd_rejections_name_the_reason(kw, reason):
    r = resources.inspect("gfx950", raw(**kw))
    assert not r["ok"] and reason in r["reason"]


def test_the_same_code_is_judged_per_arch():
    r = raw(shared=100 * 1024)  # fits gfx950 (160 KiB), not gfx942 (64 KiB)
    assert resources.inspect("gfx950", r)["ok"]
    assert "gfx942 has 65536" in resources.inspect("gfx942", r)["reason"]
    assert "no v_wmma" in resources.inspect("gfx1250", r)["reason"]  # MFMA on a WMMA arch


def test_amd_occupancy_registers_lds_and_slots():
    # 256 VGPRs, 4 waves (1 per SIMD): 512 // 256 = 2 by registers
    assert resources.occupancy("gfx950", 256, 0, 4) == (2, 2, "registers")
    # 8 waves = 2 per SIMD: 512 // 96 = 5 waves -> 2 workgroups
    assert resources.occupancy("gfx950", 96, 0, 8) == (2, 4, "registers")
    # LDS binds: 64 KiB / 40 KiB
    assert resources.occupancy("gfx942", 64, 40 * 1024, 4) == (1, 1, "LDS")
    # granule of 8: 130 -> 136; 1024 // 136 = 7 on gfx1250
    assert resources.occupancy("gfx1250", 130, 0, 4)[0] == 7
    # few registers: the wave slots bind (8 per SIMD on gfx942)
    assert resources.occupancy("gfx942", 16, 0, 4) == (8, 8, "wave slots")


def test_nvidia_occupancy():
    # 128 regs x 32 lanes = 4096 per warp; 65536 // 4096 = 16 warps -> 2 blocks of 8 warps
    assert resources.occupancy("sm_90", 128, 0, 8) == (2, 4, "registers")
    # shared binds: (227 KiB + 1 KiB) // (100 KiB + 1 KiB) = 2
    assert resources.occupancy("sm_90", 64, 100 * 1024, 4) == (2, 2, "shared")


# FlyDSL's ISA text has no "; NumVgprs:" comments: the inspection reads .amdgpu_metadata.
_FLYDSL_LIKE = """\
\tv_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]
\t\t.amdhsa_accum_offset 160
\t.amdgpu_metadata
amdhsa.kernels:
  - .agpr_count:     {agpr}
    .group_segment_fixed_size: {static_lds}
    .private_segment_fixed_size: {scratch}
    .sgpr_count:     38
    .sgpr_spill_count: 0
    .vgpr_count:     158
    .vgpr_spill_count: {spills}
\t.end_amdgpu_metadata
"""


def test_metadata_only_asm_is_read_and_judged():
    raw = {"vendor": "amd", "num_warps": 4, "shared": 65536, "compile_s": 1.0,
           "asm": _FLYDSL_LIKE.format(agpr=0, static_lds=0, scratch=0, spills=0)}
    rec = resources.inspect("gfx950", raw)
    assert rec["ok"] and (rec["vgpr"], rec["agpr"], rec["sgpr"]) == (158, 0, 38)
    assert rec["lds_bytes"] == 65536 and rec["occupancy"] == 2
    bad = dict(raw, asm=_FLYDSL_LIKE.format(agpr=64, static_lds=1024, scratch=16, spills=3),
               require=["tensor_load_to_lds"])
    rec = resources.inspect("gfx950", bad)
    assert not rec["ok"] and rec["lds_bytes"] == 65536 + 1024
    assert rec["spills"] == 3 and rec["scratch"] == 16 and rec["agpr"] == 64
    assert "no tensor_load_to_lds" in rec["reason"]
