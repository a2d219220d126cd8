"""Every shipped scaled config cross-compiles for gfx950, gfx1250, sm_100 and sm_90 (l1).

For each arch, each config of ``scaled_configs.SPACES`` and each variant of its template
(``scaled_configs.VARIANTS``: MXFP8, MXFP4, MXFP4 x MXFP8, fp8 RowWise; grouped 2Dx3D and
2Dx2D), ``triton.compile`` builds the real code object from the launch a call would make
(``crosscompile.compile_one``: same binder, same argument specialization, meta tensors) and
``xvendor.tuning.resources.inspect`` reads it. Asserted per compiled kernel:
- the EXACT matrix instruction of ``scaled_configs.instruction`` (gfx950
  ``v_mfma_scale_f32_16x16x128_f8f6f4`` / ``32x32x64`` by nonkdim, and for fp8
  ``v_mfma_f32_16x16x128_f8f6f4``, never the MI300-era ``v_mfma_f32_16x16x32_fp8_fp8``;
  gfx1250 ``v_wmma_scale_f32_16x16x128_f8f6f4`` / ``v_wmma_f32_16x16x128_fp8_fp8``; sm_100
  ``tcgen05.mma ... kind::mxf8f6f4.block_scale.block32`` (``kind::mxf4`` for fp4 x fp4) /
  ``kind::f8f6f4``; sm_90 has no block-scaled MMA: MX is emulated (bf16 wgmma after an
  upcast), fp8 uses e4m3 wgmma), and no other matrix instruction family;
- no spills, no scratch/local memory, LDS/shared within the arch's limit, >= 1 workgroup
  per CU/SM.
What this does not show: speed or numerics on hardware (l2; the numerics of the same
templates run in the interpreter, test_scaled_interpreter.py).

All compiles run in ONE subprocess (LLVM errors can abort a process); about 50 kernels,
~1 s each, cached by Triton in TRITON_CACHE_DIR across runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xvendor.triton import scaled_configs

pytestmark = pytest.mark.l1
HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
ARCHS = ("gfx950", "gfx1250", "sm_100", "sm_90")
# Matrix instructions of any kind, to prove no other family (e.g. an MI300-era fp8 MFMA) is used.
_ANY_MMA = re.compile(r"\b(v_mfma\w+|v_wmma\w+|v_swmmac\w+|tcgen05\.mma[\w.:]*|"
                      r"wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)")


def _jobs():
    for arch in ARCHS:
        for variant in scaled_configs.VARIANTS:
            for cfg in scaled_configs.candidates(arch, variant):
                yield arch, variant, cfg


def main() -> None:
    from xvendor.triton import crosscompile
    from xvendor.tuning import resources

    out = []
    for arch, variant, cfg in _jobs():
        raw = crosscompile.compile_one(variant, arch, cfg.to_dict())
        raw["expects_mma"] = False  # the exact instruction is checked below instead
        rec = resources.inspect(arch, raw)
        want = scaled_configs.instruction(arch, variant, cfg)
        out.append({"arch": arch, "variant": variant, "config": cfg.name,
                    "instruction": want, "found": bool(re.search(want, raw["asm"])),
                    "mma": sorted(set(_ANY_MMA.findall(raw["asm"]))),
                    **{k: rec[k] for k in ("ok", "reason", "vgpr", "agpr", "spills", "scratch",
                                           "lds_bytes", "occupancy", "compile_s")}})
    print(json.dumps(out))


@pytest.fixture(scope="module")
def records():
    pytest.importorskip("triton")
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, str(HERE)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = json.loads(proc.stdout.strip().splitlines()[-1])
    return {(r["arch"], r["variant"], r["config"]): r for r in recs}


@pytest.mark.heavy
def test_every_shipped_config_was_compiled(records):
    assert set(records) == {(a, v, c.name) for a, v, c in _jobs()}
    assert len(records) >= 40


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant", sorted(scaled_configs.VARIANTS))
def test_exact_instruction_no_spills(records, arch, variant):
    for cfg in scaled_configs.candidates(arch, variant):
        r = records[(arch, variant, cfg.name)]
        where = f"{arch} {variant} {cfg.name}"
        assert r["found"], f"{where}: no {r['instruction']}; matrix instructions: {r['mma']}"
        # one instruction (AMD, sm_100) or one family (sm_90's wgmma shapes differ by N)
        family = {m.split("_")[0] if m.startswith("v_") else m.split(".")[0] for m in r["mma"]}
        assert len(family) == 1, f"{where}: mixed matrix instructions {r['mma']}"
        if arch.startswith("gfx"):
            assert r["mma"] == [r["instruction"]], f"{where}: {r['mma']}"
        assert r["ok"], f"{where}: {r['reason']}"
        assert r["spills"] == 0 and r["scratch"] == 0, f"{where}: {r}"


def test_gfx950_fp8_avoids_the_mi300_instruction(records):
    fp8 = [r for (a, v, _), r in records.items() if a == "gfx950"
           and scaled_configs.VARIANTS[v][2] == "fp8"]
    assert fp8 and all("v_mfma_f32_16x16x32_fp8_fp8" not in r["mma"] for r in fp8)


def test_sm90_mx_is_emulated_and_says_so(records):
    assert ("sm_90", "mx") in scaled_configs.EMULATED
    mx = [r for (a, v, _), r in records.items() if a == "sm_90"
          and scaled_configs.VARIANTS[v][2] == "mx"]
    assert mx and all(any(".bf16.bf16" in m for m in r["mma"]) for r in mx)


if __name__ == "__main__":
    sys.exit(main())
