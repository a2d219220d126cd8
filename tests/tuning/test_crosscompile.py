"""Real cross-compilation of a representative subset for gfx942, gfx950, gfx1250, sm_90 (l1).

Per target and template: the default config, one large and one small config, compiled by
``triton.compile`` in worker processes with the runtime's specialization, inspected, and
judged (no spills, within LDS/shared, expected matrix instruction). The full space is the
``xvendor compile`` / ``bench/compile_sweep.py`` job, not a test.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("triton")

from xvendor import devices  # noqa: E402
from xvendor.triton import configs, crosscompile  # noqa: E402
from xvendor.tuning import compile_cli, sweep  # noqa: E402

pytestmark = pytest.mark.l1

ROOT = Path(__file__).resolve().parents[2]
# (large, small) per arch: both valid for both templates in the full sweep (bench/RESULTS.md)
SUBSET = {
    "gfx942": ("256x128x64_g8_w8_s2_wpe0_nk16_kp1", "64x64x32_g4_w2_s2_wpe0_nk16_kp1"),
    "gfx950": ("128x256x64_g8_w8_s2_wpe0_nk16_kp1", "32x32x128_g4_w2_s2_wpe0_nk16_kp1"),
    "gfx1250": ("128x128x128_g8_w8_s2", "32x32x64_g4_w2_s2"),
    "sm_90": ("256x128x64_g8_w8_s4", "64x32x64_g4_w4_s4"),
}
KINDS = ("default", "large", "small")
EXPECTED = {"gfx942": "v_mfma", "gfx950": "v_mfma", "gfx1250": "v_wmma", "sm_90": "wgmma"}


def _config(arch, template, kind):
    if kind == "default":
        return configs.DEFAULTS[arch][template]
    name = SUBSET[arch][KINDS.index(kind) - 1]
    return next(c for c in configs.SPACES[arch][template] if c.name == name)


VARIANTS = [v for t in configs.TEMPLATES for v in configs.VARIANTS.get(t, ())]
JOBS = [(t, arch, _config(arch, t, kind)) for arch in SUBSET for t in configs.TEMPLATES
        for kind in KINDS]
# the other grouped layouts, with the default config the backend launches for them too
JOBS += [(v, arch, configs.default(arch, v)) for arch in SUBSET for v in VARIANTS]


@pytest.fixture(scope="module")
def subset(compile_cache):
    t0 = time.perf_counter()
    records = sweep.sweep("triton", jobs=JOBS, cache_dir=compile_cache)
    return records, time.perf_counter() - t0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("template", configs.TEMPLATES)
@pytest.mark.parametrize("arch", list(SUBSET))
@pytest.mark.heavy  # the subset sweep fixture: ~100 s of compiles
def test_compiles_and_passes_the_checks(subset, arch, template, kind):
    cfg = _config(arch, template, kind)
    rec = next(r for r in subset[0] if r["target"] == arch and r["template"] == template
               and r["config_name"] == cfg.name)
    assert rec["ok"], rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert 0 < rec["lds_bytes"] <= devices.ARCHS[arch].lds_bytes
    assert rec["mma_instr"].startswith(EXPECTED[arch]) and "bf16" in rec["mma_instr"]
    assert rec["occupancy"] >= 1 and rec["vgpr"] > 0
    assert rec["default"] == (kind == "default")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("arch", list(SUBSET))
@pytest.mark.heavy  # the subset sweep fixture: ~100 s of compiles
def test_default_config_serves_every_grouped_layout(subset, arch, variant):
    rec = next(r for r in subset[0] if r["target"] == arch and r["template"] == variant)
    assert rec["default"] and rec["ok"], rec["reason"]
    assert rec["mma_instr"].startswith(EXPECTED[arch])


@pytest.mark.heavy  # the subset sweep fixture: ~100 s of compiles
def test_warm_rerun_comes_from_the_cache(subset, compile_cache):
    t0 = time.perf_counter()
    again = sweep.sweep("triton", jobs=JOBS, cache_dir=compile_cache)
    warm = time.perf_counter() - t0
    assert all(r["cached"] for r in again) and warm < 10.0, warm
    strip = lambda rs: [{k: v for k, v in r.items() if k != "cached"} for r in rs]  # noqa: E731
    assert strip(again) == strip(subset[0])


@pytest.mark.parametrize("arch, pointer_range", [("gfx950", True), ("sm_90", False)])
def test_specialization_is_the_runtimes(arch, pointer_range):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    kind, arch_id, warp = configs.TARGETS[arch]
    be = make_backend(GPUTarget(kind, arch_id, warp))
    cfg = configs.DEFAULTS[arch]["gemm"]
    kernel, args, kwargs = crosscompile.launch_for("gemm", cfg, kind)
    src, options = crosscompile._ast_source(kernel, be, args, kwargs)
    names = [p.name for p in kernel.params]
    a_attrs = src.attrs[(names.index("a_ptr"),)]
    assert ["tt.divisibility", 16] in a_attrs
    assert (["tt.pointer_range", 32] in a_attrs) == pointer_range
    # unit strides become constants, as at run time (vectorized loads along K and N)
    assert src.signature["stride_ak"] == "constexpr" and src.signature["stride_bn"] == "constexpr"
    assert src.signature["stride_am"] == "i32"
    assert options["num_warps"] == cfg.num_warps


@pytest.mark.heavy  # the subset sweep fixture: ~100 s of compiles
def test_cli_writes_the_report(subset, compile_cache, tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, COLUMNS="200",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "xvendor.tuning.compile_cli", "compile", "--backend", "triton",
         "--targets", "gfx942,sm_90", "--configs", "default", "--json", str(out),
         "--cache-dir", str(compile_cache)], capture_output=True, text=True, env=env,
        timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert {(r["target"], r["template"]) for r in report["records"]} == {
        (a, t) for a in ("gfx942", "sm_90") for t in configs.TEMPLATES + tuple(VARIANTS)}
    for r in report["records"]:
        assert r["ok"] and r["default"]
        assert {"ok", "reason", "vgpr", "agpr", "sgpr", "spills", "scratch", "lds_bytes",
                "occupancy", "mma_instr", "compile_s", "config"} <= set(r)
    assert "10/10 configs valid" in proc.stdout


@pytest.mark.heavy  # the subset sweep fixture: ~100 s of compiles
def test_summary_for_check(subset, compile_cache):
    rows = compile_cli.summary_for_check(cache_dir=compile_cache)
    assert {(r["target"], r["template"]) for r in rows} == {
        (a, t) for a in compile_cli.ALL_TARGETS for t in configs.TEMPLATES + tuple(VARIANTS)}
    assert all(r["ok"] and r["cached"] for r in rows), rows
