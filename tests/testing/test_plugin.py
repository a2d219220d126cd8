"""The xvendor.testing pytest plugin, exercised in throwaway projects with pytester."""

import pytest

pytestmark = pytest.mark.l0

TESTS = """
import pytest

@pytest.mark.l0
def test_logic(): pass

@pytest.mark.l1
def test_toolchain(): pass

@pytest.mark.l2
def test_hardware(): pass

def test_unmarked(): pass

@pytest.mark.requires_vendor("amd")
def test_amd(): pass

@pytest.mark.requires_arch("gfx950")
def test_gfx950_logic(): pass

@pytest.mark.l2
@pytest.mark.requires_arch("gfx950")
def test_gfx950_hardware(): pass

@pytest.mark.requires_toolchain("nosuch")
def test_missing_toolchain(): pass

def test_device(device):
    assert device.type == "cpu"
"""


# A project's own toolchain: declared, so requires_toolchain accepts it (and skips: none
# of its distributions is installed).
INI = "[pytest]\nxv_toolchains =\n    nosuch = no-such-dist-xyz, another-missing-dist\n"


@pytest.fixture
def project(pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_sample=TESTS)
    return pytester


def test_markers_are_registered(project):
    out = project.runpytest("--markers").stdout.str()
    for name in ("l0:", "l1:", "l2:", "requires_vendor(", "requires_arch(", "requires_toolchain("):
        assert name in out
    project.runpytest("--strict-markers").assert_outcomes(passed=5, skipped=7)


def test_every_skip_says_what_is_missing(project):
    result = project.runpytest("-rs")
    text = result.stdout.str()
    assert "needs a amd GPU; present: no accelerator" in text
    assert "needs a device of arch gfx950; present: no accelerator" in text
    assert "needs toolchain nosuch (not installed)" in text
    assert "needs a CUDA GPU" in text or "needs a CUDA build of torch" in text
    assert "needs a ROCm build of torch" in text
    assert "needs an Intel XPU device" in text


def test_device_fixture_is_parametrised_over_vendor_families(project):
    out = project.runpytest("--collect-only", "-q").stdout.str()
    for kind in ("cpu", "cuda", "rocm", "xpu"):
        assert f"test_device[{kind}]" in out


def test_tier_selection(project):
    result = project.runpytest("--xv-tier", "l1,l2", "-q")
    result.assert_outcomes(passed=2, skipped=1, deselected=9)  # the gfx950 l2 test skips
    result = project.runpytest("--xv-tier", "l0", "-q", "-k", "logic or unmarked")
    result.assert_outcomes(passed=2, skipped=1, deselected=9)  # -k deselects as well


HEAVY = """
import pytest

@pytest.mark.l1
@pytest.mark.heavy
def test_drill(): pass

@pytest.mark.l1
def test_quick(): pass

@pytest.mark.heavy
def test_unmarked_heavy(): pass
"""


def test_heavy_selection(pytester):
    pytester.makepyfile(test_heavy=HEAVY)
    pytester.runpytest("--strict-markers", "-q").assert_outcomes(passed=3)
    pytester.runpytest("--xv-heavy", "skip", "-q").assert_outcomes(passed=1, deselected=2)
    pytester.runpytest("--xv-heavy", "only", "-q").assert_outcomes(passed=2, deselected=1)
    # with a tier: both selections apply
    result = pytester.runpytest("--xv-tier", "l1", "--xv-heavy", "only", "-q")
    result.assert_outcomes(passed=1, deselected=2)
    result = pytester.runpytest("--xv-heavy", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_unknown_tier_is_a_usage_error(project):
    result = project.runpytest("--xv-tier", "l9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown tiers ['l9']" in result.stderr.str()


def test_dry_run_arch_satisfies_requires_arch_below_l2_only(project):
    result = project.runpytest("--xv-arch", "gfx950", "-q", "-k", "gfx950", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert "needs a device of arch gfx950" in result.stdout.str()  # the l2 one still skips


@pytest.mark.l0
@pytest.mark.parametrize("dists, missing", [
    ({"pytorch-triton-rocm"}, []), ({"pytorch-triton-xpu"}, []), ({"triton"}, []),
    (set(), ["triton"])])
def test_triton_from_torch_rocm_or_xpu_wheels_counts(monkeypatch, dists, missing):
    """torch's ROCm/XPU wheels bring Triton as pytorch-triton-rocm / -xpu: still Triton."""
    from xvendor.testing import plugin
    monkeypatch.setattr(plugin, "_installed", lambda dist: dist in dists)
    assert plugin.toolchain_missing(["triton"]) == missing


TYPOS = {  # one module each: a collection error stops its module, named
    "test_arch": ('requires_arch("gfx9500")',
                  "requires_arch('gfx9500'): unknown arch 'gfx9500'; archs are "),
    "test_vendor": ('requires_vendor("amdd")', "requires_vendor('amdd'): unknown vendor "
                                               "'amdd'; vendors are amd, nvidia, intel"),
    "test_toolchain": ('requires_toolchain("cutlass")', "requires_toolchain('cutlass'): "
                       "unknown toolchain 'cutlass'; toolchains are dpctl, flydsl, nosuch, "),
    "test_empty": ("requires_arch()", "requires_arch() names no arch"),
}


def test_a_typo_in_a_marker_argument_is_a_collection_error(pytester):
    pytester.makeini(INI)
    for module, (marker, _) in TYPOS.items():
        pytester.makepyfile(**{module: f"import pytest\n@pytest.mark.{marker}\n"
                                       "def test_x(): pass\ndef test_fine(): pass\n"})
    pytester.makepyfile(test_ok="def test_ok(): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=len(TYPOS))
    out = result.stdout.str()
    for module, (_, message) in TYPOS.items():
        assert f"{module}.py::test_x: {message}" in out


def test_a_tier_that_selected_tests_and_ran_none_fails_with_the_reasons(pytester):
    # (toolchain and explicit skips: a device skip would import torch into each run)
    pytester.makeini(INI)
    pytester.makepyfile(test_tiers="""
import pytest
@pytest.mark.l0
def test_logic(): pass
@pytest.mark.l2
@pytest.mark.requires_toolchain("nosuch")
def test_needs_nosuch(): pass
@pytest.mark.l2
def test_on_h100(): pytest.skip("needs a device of arch sm_90; present: no accelerator")
""")
    result = pytester.runpytest("--xv-tier", "l2")
    result.assert_outcomes(skipped=2, deselected=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "xvendor: tier l2 ran no test" in out
    assert "1 x needs toolchain nosuch (not installed)" in out
    assert "1 x needs a device of arch sm_90; present: no accelerator" in out
    # A tier with one test that ran is not "none ran"; l2 deselected is not "selected".
    assert pytester.runpytest("--xv-tier", "l0,l2", "-k", "logic").ret == pytest.ExitCode.OK
    # Without --xv-tier pytest's own rule stands (a skip is not a failure).
    assert pytester.runpytest("-k", "nosuch").ret == pytest.ExitCode.OK


def test_an_unknown_dry_run_arch_is_a_usage_error(project):
    result = project.runpytest("--xv-arch", "gfx9500")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--xv-arch: unknown arch 'gfx9500'" in result.stderr.str()


def test_a_malformed_toolchain_line_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nxv_toolchains =\n    nosuch\n")
    pytester.makepyfile(test_x="def test_x(): pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "xv_toolchains: 'nosuch' must read 'name = dist, dist'" in result.stderr.str()
