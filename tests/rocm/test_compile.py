"""Real FlyDSL compiles of a representative subset for gfx950 and gfx1250 (l1).

Per arch: each template's default config and one small config, plus the variants (gemm
NN, grouped 2Dx2D and 3Dx3D) with the default config — built by the backend's own launch
planning into real code objects in worker processes (the shared sweep machinery, same
record format and cache as Triton), inspected and judged. The full space is the job of
``xvendor compile --backend flydsl`` (figures in bench/RESULTS.md). The MN-major variants
of both archs are also read instruction by instruction (bench/flydsl_gemm_isa.py): their
fragments come through transposing LDS reads (gfx950 ``ds_read_b64_tr_b16``, gfx1250
``ds_load_tr16_b128``), none element-wise.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flydsl")
pytest.importorskip("ziglang")

from xvendor import devices  # noqa: E402
from xvendor.rocm import configs  # noqa: E402
from xvendor.tuning import compile_cli, sweep  # noqa: E402

pytestmark = pytest.mark.l1

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"gfx950": "64x64x64_w2x2_s2_i16", "gfx1250": "64x64x64_w2x2_s3_i16"}
EXPECTED = {"gfx950": ("v_mfma_f32_", ()), "gfx1250": ("v_wmma_f32_16x16x32", ("tensor_load_to_lds",))}
VARIANTS = [v for t in configs.TEMPLATES for v in configs.VARIANTS[t]]
JOBS = [(t, arch, configs.default(arch, t)) for arch in configs.TARGETS for t in configs.TEMPLATES]
JOBS += [(t, arch, next(c for c in configs.SPACES[arch][t] if c.name == SMALL[arch]))
         for arch in configs.TARGETS for t in configs.TEMPLATES]
JOBS += [(v, arch, configs.default(arch, v)) for arch in configs.TARGETS for v in VARIANTS]


@pytest.fixture(scope="module")
def records(compile_cache):
    return sweep.sweep("flydsl", jobs=JOBS, cache_dir=compile_cache)


@pytest.mark.parametrize("template, arch, cfg", JOBS, ids=[f"{a}-{t}-{c.name}" for t, a, c in JOBS])
def test_code_object_passes_the_checks(records, template, arch, cfg):
    rec = next(r for r in records if (r["template"], r["target"], r["config_name"])
               == (template, arch, cfg.name))
    assert rec["ok"], rec["reason"]
    assert rec["spills"] == 0 and rec["scratch"] == 0
    assert 0 < rec["lds_bytes"] <= devices.ARCHS[arch].lds_bytes
    prefix, required = EXPECTED[arch]
    assert rec["mma_instr"].startswith(prefix) and "bf16" in rec["mma_instr"]
    for instr in required:
        assert rec["required"][instr] > 0
    assert rec["code_object_bytes"] > 1000 and rec["vgpr"] > 0 and rec["occupancy"] >= 1
    assert rec["default"] == (cfg == configs.default(arch, template))


def test_record_format_is_the_triton_one(records):
    triton_keys = {"toolchain", "template", "target", "config_name", "config", "default",
                   "cached", "ok", "reason", "vgpr", "agpr", "sgpr", "spills", "scratch",
                   "lds_bytes", "occupancy", "waves_per_simd", "occupancy_limit",
                   "asm_occupancy", "mma_instr", "mma_count", "compile_s"}
    for r in records:
        assert triton_keys <= set(r) and r["toolchain"] == "flydsl"


@pytest.mark.heavy
def test_cli_and_check_summary_reuse_the_cache(records, compile_cache, tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, COLUMNS="200",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "xvendor.tuning.compile_cli", "compile", "--backend", "flydsl",
         "--targets", "gfx950,gfx1250", "--configs", "default", "--json", str(out),
         "--cache-dir", str(compile_cache)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["backend"] == "flydsl"
    assert {(r["target"], r["template"]) for r in report["records"]} == {
        (a, v) for a in configs.TARGETS for t in configs.ALL_TEMPLATES
        for v in (t, *configs.VARIANTS.get(t, ()))}
    assert all(r["ok"] for r in report["records"])
    # the GEMM family was built by the fixture; the CLI reused those code objects
    assert all(r["cached"] for r in report["records"]
               if configs.base_template(r["template"]) in configs.TEMPLATES)
    n = len(report["records"])
    assert f"{n}/{n} configs valid" in proc.stdout
    rows = compile_cli.flydsl_summary_for_check(cache_dir=compile_cache)
    assert len(rows) == n and all(r["ok"] and r["cached"] for r in rows)
    assert all("unverified" in r["numerics"] for r in rows)


# MN-major fragment reads per arch: (transposing read, element-wise reads it replaced,
# K-major fragment read)
FRAGMENT_READS = {"gfx950": ("ds_read_b64_tr_b16", ("ds_read_u16", "ds_read_i16"), "ds_read_b128"),
                  "gfx1250": ("ds_load_tr16_b128", ("ds_load_u16", "ds_load_i16"), "ds_load_b128")}
# bf16 C stores per arch and elements per store: N = 384 takes the lane's whole run (gfx950
# MFMA: 4, gfx1250 WMMA: 8), N = 386 two elements, and one element per store was the old way
C_STORES = {"gfx950": {4: "buffer_store_dwordx2", 2: "buffer_store_dword",
                       1: "buffer_store_short"},
            "gfx1250": {8: "buffer_store_b128", 2: "buffer_store_b32", 1: "buffer_store_b16"}}
ISA_TEMPLATES = ("gemm:NN", "grouped_mm:2Dx2D", "gemm@N=386", "grouped_mm@3Dx2D")


# gfx950 in the quick loop, the other targets heavy (each ~60-100 s of compiles)
@pytest.fixture(scope="module", params=[t if t == "gfx950" else pytest.param(t, marks=pytest.mark.heavy)
                                        for t in configs.TARGETS])
def isa(request, tmp_path_factory):
    """(arch, {template: record}) of bench/flydsl_gemm_isa.py (the backend's own launch,
    each compile in its own process) for the default config."""
    arch = request.param
    out = tmp_path_factory.mktemp(f"isa-{arch}") / "isa.json"
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "flydsl_gemm_isa.py"), "--targets", arch,
         "--templates", ",".join(ISA_TEMPLATES), "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recs = {r["template"]: r for r in json.loads(out.read_text())}
    for rec in recs.values():
        assert rec["ok"] and rec["spills"] == 0 and rec["scratch"] == 0, rec
        assert 0 < rec["lds_bytes"] <= devices.ARCHS[arch].lds_bytes
    return arch, recs


@pytest.mark.heavy
def test_mn_major_fragments_use_transposing_lds_reads(isa):
    """MN-major operands reach the matrix instruction through transposing LDS reads (gfx950
    ds_read_b64_tr_b16: 4 elements per read; gfx1250 ds_load_tr16_b128: 8), never one 16-bit
    read per element; K-major ones keep the 16-byte reads."""
    arch, recs = isa
    transposing, element_wise, k_major_read = FRAGMENT_READS[arch]
    for template, k_major_reads in (("gemm:NN", True), ("grouped_mm:2Dx2D", False)):
        n = recs[template]["instructions"]
        assert n.get(transposing, 0) > 0, n
        assert not [i for i in n if i.startswith(element_wise)], n
        assert (n.get(k_major_read, 0) > 0) == k_major_reads, n  # A K-major only in NN


def test_c_is_stored_in_vectors_as_wide_as_n_allows(isa):
    """C leaves in one store per accumulator run where N allows it (N = 384: 4 bf16 per
    store on gfx950, 8 on gfx1250), in 2-element stores for N = 386, never one element per
    store then; the N tail stays predicated in every case (no host padding: test_launch).
    3Dx2D writes the caller's output through a column-major C: one element per store."""
    arch, recs = isa
    stores = C_STORES[arch]
    widest = max(stores)
    tile = configs.default(arch, "gemm")
    per_thread = tile.block_m * tile.block_n // (tile.num_warps * (64 if arch == "gfx950" else 32))
    for template, width in (("gemm:NN", widest), ("grouped_mm:2Dx2D", widest),
                            ("gemm@N=386", 2), ("grouped_mm@3Dx2D", 1)):
        n = recs[template]["instructions"]
        assert n.get(stores[width], 0) == per_thread // width, (template, n)
        assert not [s for w, s in stores.items() if w != width and n.get(s)], (template, n)
