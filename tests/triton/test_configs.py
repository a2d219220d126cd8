"""Config spaces as data: sizes, defaults, the options each vendor gets (l0: no compiler)."""

import pytest

from xvendor import devices
from xvendor.triton import configs

pytestmark = pytest.mark.l0

ARCHS = ("gfx942", "gfx950", "gfx1250", "sm_90")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("template", configs.TEMPLATES)
def test_space_has_16_distinct_candidates_and_holds_the_default(arch, template):
    space = configs.SPACES[arch][template]
    assert len(set(space)) >= 16 and len(set(space)) == len(space)
    assert len({c.name for c in space}) == len(space), "names must identify configs"
    assert configs.DEFAULTS[arch][template] in space
    cands = configs.candidates(arch, template)
    assert cands[0] == configs.DEFAULTS[arch][template] and len(cands) == len(space)
    assert configs.candidates(arch, template, "default") == (configs.DEFAULTS[arch][template],)


@pytest.mark.parametrize("arch", ARCHS)
def test_spaces_respect_the_arch(arch):
    spec = devices.ARCHS[arch]
    for c in configs.SPACES[arch]["gemm"]:
        assert c.block_m % 16 == 0 and c.block_n % 16 == 0 and c.block_k % 16 == 0
        if spec.vendor == "nvidia":  # wgmma: warp groups of 4, BLOCK_M >= 64
            assert c.num_warps % 4 == 0 and c.block_m >= 64, c.name
        if arch == "gfx1250":  # WMMA: no MFMA knobs
            assert c.matrix_instr_nonkdim == 0 and c.kpack == 1, c.name


def test_options_per_vendor():
    c = configs.DEFAULTS["gfx950"]["gemm"]
    assert set(c.options("hip")) == {"num_warps", "num_stages", "waves_per_eu",
                                     "matrix_instr_nonkdim", "kpack"}
    assert set(c.options("cuda")) == {"num_warps", "num_stages"}
    assert c.constexprs() == {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n,
                              "BLOCK_K": c.block_k, "GROUP_M": c.group_m}


def test_unknown_arch_borrows_its_vendors_default():
    assert configs.default("sm_100", "gemm", "nvidia") == configs.DEFAULTS["sm_90"]["gemm"]
    assert configs.default("gfx90a", "gemm", "amd") == configs.DEFAULTS["gfx942"]["gemm"]
    with pytest.raises(KeyError, match="known"):
        configs.candidates("sm_100", "gemm")


def test_targets_match_the_arch_table():
    for arch, (kind, _, warp) in configs.TARGETS.items():
        assert warp == devices.ARCHS[arch].wave_size
        assert kind == ("hip" if devices.ARCHS[arch].vendor == "amd" else "cuda")


def test_variants_share_their_templates_space_and_default():
    for template, variants in configs.VARIANTS.items():
        for v in variants:
            assert configs.base_template(v) == template
            assert configs.default("gfx950", v) == configs.DEFAULTS["gfx950"][template]
            assert configs.candidates("sm_90", v) == configs.candidates("sm_90", template)
