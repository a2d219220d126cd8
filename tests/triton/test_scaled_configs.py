"""Scaled config spaces as data, and the launch builders on meta tensors (l0: no compiler).

The launch builders are what the backend launches and what the cross-compiler specializes,
so their arguments are checked here without a kernel: grids, K in elements for packed fp4,
uint8 views of fp4 data and E8M0 scales, scale strides per recipe (TensorWise = stride 0),
the group layout of the grouped launch. Backend refusals on CPU without the interpreter too.
"""

from __future__ import annotations

import pytest
import torch

from xvendor import devices
from xvendor.triton import configs, scaled_configs, scaled_launch

pytestmark = pytest.mark.l0

E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
E8 = torch.float8_e8m0fnu
ARCHS = tuple(scaled_configs.SPACES)


def _m(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize("arch", ARCHS)
def test_spaces_respect_the_arch_and_hold_the_default(arch):
    spec = devices.ARCHS[arch]
    for template in scaled_configs.TEMPLATES:
        space = scaled_configs.SPACES[arch][template]
        assert space and len(set(space)) == len(space)
        assert scaled_configs.DEFAULTS[arch][template] == space[0]
        assert scaled_configs.candidates(arch, template, "default") == space[:1]
        for c in space:
            # two E8M0 scales per row per K step at least; 128 feeds the scaled MFMA/WMMA
            assert c.block_k % 64 == 0 and c.block_m % 64 == 0 and c.block_n % 64 == 0, c
            if arch != "sm_90":
                assert c.block_k == 128, f"{arch} {c.name}: the block-scaled ops take K=128"
            if spec.vendor == "nvidia":
                assert c.num_warps % 4 == 0, c.name
            if arch == "gfx950":
                assert c.matrix_instr_nonkdim in (16, 32), c.name
            else:
                assert c.matrix_instr_nonkdim == 0 and c.kpack == 1, c.name


def test_targets_and_instructions_cover_every_arch():
    archs = set(scaled_configs.SPACES)
    assert set(scaled_configs.TARGETS) == archs == set(scaled_configs.INSTRUCTIONS)
    for arch, (kind, _, warp) in scaled_configs.TARGETS.items():
        assert warp == devices.ARCHS[arch].wave_size
        assert kind == ("hip" if devices.ARCHS[arch].vendor == "amd" else "cuda")
        for variant in scaled_configs.VARIANTS:
            for c in scaled_configs.SPACES[arch][configs.base_template(variant)]:
                assert scaled_configs.instruction(arch, variant, c)


def test_instruction_per_variant():
    c16, c32 = scaled_configs.SPACES["gfx950"]["scaled_mm"][0], \
        scaled_configs.SPACES["gfx950"]["scaled_mm"][2]
    assert scaled_configs.instruction("gfx950", "scaled_mm:mxfp8", c16) == \
        "v_mfma_scale_f32_16x16x128_f8f6f4"
    assert scaled_configs.instruction("gfx950", "scaled_mm:mxfp8", c32) == \
        "v_mfma_scale_f32_32x32x64_f8f6f4"
    assert scaled_configs.instruction("gfx950", "scaled_mm:fp8_rowwise", c16) == \
        "v_mfma_f32_16x16x128_f8f6f4"
    any100 = scaled_configs.DEFAULTS["sm_100"]["scaled_mm"]
    assert "mxf4" in scaled_configs.instruction("sm_100", "scaled_mm:mxfp4", any100)
    assert "mxf8f6f4" in scaled_configs.instruction("sm_100", "scaled_mm:mxfp4_x_mxfp8", any100)


def test_unknown_arch_borrows_its_vendors_default_and_candidates_name_the_known():
    assert scaled_configs.default("gfx942", "scaled_mm", "amd") == \
        scaled_configs.DEFAULTS["gfx950"]["scaled_mm"]
    assert scaled_configs.default("sm_120", "scaled_grouped_mm:2Dx3D_mxfp8", "nvidia") == \
        scaled_configs.DEFAULTS["sm_90"]["scaled_grouped_mm"]
    with pytest.raises(KeyError, match="known"):
        scaled_configs.candidates("gfx942", "scaled_mm")


CFG = configs.Config(32, 32, 64, 2)


def _by_name(kernel, args):
    names = [p.name for p in kernel.params]
    return dict(zip(names, args))


@pytest.mark.parametrize("recipe,sa_shape,sb_shape,want", [
    (scaled_launch.TENSORWISE, (), (1, 1), (0, 0, 0, 0)),
    (scaled_launch.ROWWISE, (67, 1), (1, 45), (1, 0, 1, 0)),
])
def test_scaled_mm_launch_scale_strides(recipe, sa_shape, sb_shape, want):
    a, b, out = _m(67, 96, dtype=E4), _m(45, 96, dtype=E5).t(), _m(67, 45)
    sa, sb = _m(*sa_shape, dtype=torch.float32), _m(*sb_shape, dtype=torch.float32)
    kernel, grid, args, kw = scaled_launch.scaled_mm_launch(a, b, sa, recipe, sb, None, out,
                                                            CFG, None)
    p = _by_name(kernel, args)
    assert (p["stride_sam"], p["stride_sak"], p["stride_sbn"], p["stride_sbk"]) == want
    assert grid == (3 * 2,) and (p["M"], p["N"], p["K"]) == (67, 45, 96)
    assert (p["stride_bk"], p["stride_bn"]) == (1, 96)  # column-major b kept as is
    assert kw["MX"] is False and (kw["A_FMT"], kw["B_FMT"]) == ("e4m3", "e5m2")
    assert kw["HAS_BIAS"] is False and "num_warps" not in kw  # interpreter: no options


def test_scaled_mm_launch_mxfp4_is_bytes_with_k_in_elements():
    a, w, out = _m(33, 80, dtype=FP4), _m(70, 80, dtype=FP4), _m(33, 70, dtype=torch.float32)
    sa, sw = _m(33, 5, dtype=E8), _m(70, 5, dtype=E8)
    kernel, grid, args, kw = scaled_launch.scaled_mm_launch(a, w.t(), sa, scaled_launch.MX, sw,
                                                            _m(70), out, CFG, "hip")
    p = _by_name(kernel, args)
    assert p["K"] == 160 and p["a_ptr"].dtype == torch.uint8 and p["b_ptr"].dtype == torch.uint8
    assert p["sa_ptr"].dtype == torch.uint8 and p["sb_ptr"].dtype == torch.uint8
    assert (p["stride_sam"], p["stride_sak"], p["stride_sbn"], p["stride_sbk"]) == (5, 1, 5, 1)
    assert kw["MX"] is True and (kw["A_FMT"], kw["B_FMT"]) == ("e2m1", "e2m1")
    assert kw["HAS_BIAS"] is True and kw["matrix_instr_nonkdim"] == 0  # hip options passed


def test_grouped_launch_layouts():
    from xvendor.triton import scaled_kernels as k
    offs = _m(4, dtype=torch.int32)
    a, w = _m(99, 64, dtype=E4), _m(4, 37, 64, dtype=E4)
    sa, sw = _m(99, 2, dtype=E8), _m(4, 37, 2, dtype=E8)
    out = _m(*scaled_launch.scaled_grouped_out_shape(a, w.transpose(1, 2), offs))
    assert tuple(out.shape) == (99, 37)
    kernel, grid, args, kw = scaled_launch.scaled_grouped_mm_launch(
        a, w.transpose(1, 2), sa, scaled_launch.MX, sw, offs, out, CFG, None, programs=3)
    p = _by_name(kernel, args)
    assert kw["RAGGED"] == k.RAGGED_M and grid == (3,)
    assert (p["G"], p["M"], p["N"], p["K"]) == (4, 99, 37, 64)
    assert (p["stride_sbg"], p["stride_sbn"], p["stride_sbk"]) == (74, 2, 1)
    a2, b2 = _m(36, 160, dtype=E4), _m(160, 41, dtype=E4)
    out2 = _m(*scaled_launch.scaled_grouped_out_shape(a2, b2, offs))
    assert tuple(out2.shape) == (4, 36, 41)
    kernel, grid, args, kw = scaled_launch.scaled_grouped_mm_launch(
        a2, b2, _m(36, 5, dtype=E8), scaled_launch.MX, _m(41, 5, dtype=E8), offs, out2, CFG,
        None, programs=256)
    p = _by_name(kernel, args)
    assert kw["RAGGED"] == k.RAGGED_K and p["stride_bg"] == 0 and p["stride_cg"] == 36 * 41
    assert grid == (min(256, 4 * 2 * 2),)  # bounded by the tiles: no idle programs


def test_representative_launches_build_for_every_variant():
    for variant in scaled_configs.VARIANTS:
        for arch in ARCHS:
            cfg = scaled_configs.default(arch, variant)
            kernel, args, kw = scaled_launch.launch_for(variant, cfg,
                                                        scaled_configs.TARGETS[arch][0])
            assert kw["A_FMT"] == scaled_configs.VARIANTS[variant][0]
    with pytest.raises(KeyError, match="variants"):
        scaled_launch.launch_for("scaled_mm:nvfp4", CFG, "cuda")


def test_cpu_tensors_need_the_interpreter():
    if scaled_launch.interpreting():
        pytest.skip("TRITON_INTERPRET was set for this process: CPU tensors are served")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        scaled_launch.launch_setup(torch.device("cpu"), "scaled_mm")
