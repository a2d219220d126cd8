"""Numerics of the scaled Triton templates in the Triton interpreter (l1).

The cases run in ONE subprocess started with TRITON_INTERPRET=1 (this file run as a
script: the interpreter is chosen when the kernels are imported, so it must not leak into
the pytest process); the subprocess prints one JSON line that the tests assert on.

Each case goes through the public op with ``backend="triton"`` (the dispatch layer; the
triton record is given the scaled ops in the subprocess if it does not list them yet),
except the mixed e2m1 x e4m3 case, which the op refuses (fp4 multiplies only fp4) and is
called on the backend kernel directly. Inputs are fresh random values (a new seed per run,
printed; ``XVENDOR_TEST_SEED`` replays one), with per-row magnitudes spread over 2^+-12 so
the scales differ from block to block; outputs are NaN-poisoned before the kernel writes.

Comparison, per element, with the fp64 oracle of ``xvendor.numerics`` (decoded bits, scales
applied outside the sums) and with the ``reference`` backend:
    |out - exact| <= 4 K 2^-24 (|A| @ |B|)_mn  (+ 1 ulp of the output format)
the first term bounds fp32 accumulation, the second the output rounding. The interpreter
TRUNCATES fp32 -> bf16/fp16 stores instead of rounding to nearest, so a bf16/fp16 output is
allowed a full ulp rather than half; fp32-output cases carry the strict check. Rows past
offs[-1] (2Dx3D) must be exactly zero.

Verified here: loads, masks (M/N/K tails, K tails inside an E8M0 block, an fp4 K ending
inside a byte), scale addressing and the E8M0 decoding of ``tl.dot_scaled``, the RowWise/
TensorWise epilogue, the persistent ragged loop (empty groups, all-empty, tails), bias and
the output cast. Not verified here: the matrix instructions themselves (the cross-compile
tests check which one is emitted; running them needs hardware, l2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
TW, RW, MX = 0, 1, 3  # torch.nn.functional.ScalingType values
HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]


# --- cases (built in the subprocess) -----------------------------------------------------------

def _x(gen, *shape, spread=True):
    """Random normal values; rows (dim 0) scaled by 2^U(-12, 12) so scales vary."""
    x = torch.randn(*shape, generator=gen, dtype=F32)
    if spread and x.dim() >= 2:
        e = torch.randint(-12, 13, (shape[0],) + (1,) * (len(shape) - 1), generator=gen)
        x = x * torch.exp2(e.float())
    return x


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def mm_cases(gen):
    """(name, a, b, scale_a, recipe, scale_b, bias, output_dtype, via) -- path in the name."""
    from xvendor import quantize
    q = quantize
    cases = []
    a, sa = q(_x(gen, 67, 96), E4, "mx")
    w, sw = q(_x(gen, 45, 96), E4, "mx")  # (N, K) weight: b = w.t(), column-major
    cases.append(("mx_e4m3_tails_colmajor_b_f32", a, w.t(), sa, MX, sw, None, F32, "op"))
    a, sa = q(_x(gen, 40, 128), E5, "mx", rounding="floor")
    b, sb = q(_x(gen, 128, 37), E4, "mx", dim=0)  # row-major b, scales (K/32, N) -> .t()
    cases.append(("mx_e5m2_x_e4m3_rowmajor_b_bias_bf16", a, b, sa, MX, sb.t(),
                  torch.randn(37, generator=gen), BF16, "op"))
    a, sa = q(_x(gen, 33, 160), FP4, "mx")
    w, sw = q(_x(gen, 70, 160), FP4, "mx")
    cases.append(("mxfp4_k160_f32", a, w.t(), sa, MX, sw, None, F32, "op"))
    a, sa = q(_x(gen, 1, 32), FP4, "mx")  # fp16 out: no row spread (it would overflow fp16)
    w, sw = q(_x(gen, 9, 32, spread=False), FP4, "mx")
    cases.append(("mxfp4_m1_k32_one_block_f16", a, w.t(), sa, MX, sw, None, F16, "op"))
    a, sa = q(_x(gen, 35, 96), FP4, "mx")
    w, sw = q(_x(gen, 50, 96), E4, "mx")
    cases.append(("mx_mixed_e2m1_x_e4m3_kernel_f32", a, w.t(), sa, MX, sw, None, F32, "kernel"))
    a, sa = q(_x(gen, 67, 45), E4, "rowwise")
    b, sb = q(_x(gen, 50, 45), E5, "rowwise")  # (N, K) along K: scale (N, 1) -> (1, N)
    cases.append(("rowwise_e4m3_x_e5m2_k45_f32", a, b.t(), sa, RW, sb.t(), None, F32, "op"))
    a, sa = q(_x(gen, 70, 33), E5, "rowwise")
    b, sb = q(_x(gen, 33, 66), E4, "rowwise", dim=0)
    cases.append(("rowwise_e5m2_x_e4m3_bias_bf16_out_bf16", a, b, sa, RW, sb,
                  torch.randn(66, generator=gen).bfloat16(), BF16, "op"))
    a, sa = q(_x(gen, 41, 70, spread=False), E4, "tensorwise")
    b, sb = q(_x(gen, 70, 29, spread=False), E4, "tensorwise")
    cases.append(("tensorwise_e4m3_f16", a, b, sa, TW, sb.reshape(1, 1), None, F16, "op"))
    return cases


def grouped_cases(gen):
    """(name, a, b, scale_a, recipe, scale_b, offs, output_dtype)."""
    from xvendor import quantize
    q = quantize
    cases = []
    a, sa = q(_x(gen, 99, 64), E4, "mx")
    w, sw = q(_x(gen, 4, 37, 64), E4, "mx")  # (G, N, K) weights along K
    cases.append(("g2x3_mx_e4m3_empty_groups_tail_f32", a, w.transpose(1, 2), sa, MX, sw,
                  _offs(0, 35, 35, 83), F32))
    a, sa = q(_x(gen, 70, 96), FP4, "mx")
    w, sw = q(_x(gen, 3, 33, 96), FP4, "mx")
    cases.append(("g2x3_mxfp4_bf16", a, w.transpose(1, 2), sa, MX, sw, _offs(10, 50, 70), BF16))
    a, sa = q(_x(gen, 90, 45), E4, "rowwise")
    w, sw = q(_x(gen, 3, 40, 45), E5, "rowwise")
    cases.append(("g2x3_rowwise_e4m3_x_e5m2_tail_f32", a, w.transpose(1, 2), sa.squeeze(-1), RW,
                  sw.squeeze(-1), _offs(20, 20, 61), F32))
    a, sa = q(_x(gen, 50, 32), E4, "mx")
    w, sw = q(_x(gen, 2, 30, 32), E4, "mx")
    cases.append(("g2x3_mx_all_empty_f32", a, w.transpose(1, 2), sa, MX, sw, _offs(0, 0), F32))
    a, sa = q(_x(gen, 36, 160), E4, "mx")  # 2Dx2D: a (M, K), b (K, N), ragged K
    b, sb = q(_x(gen, 160, 41, spread=False), E4, "mx", dim=0)
    cases.append(("g2x2_mx_e4m3_empty_group_mid_block_end_f32", a, b, sa, MX, sb.t(),
                  _offs(64, 64, 96, 150), F32))
    a, sa = q(_x(gen, 20, 128), FP4, "mx")
    b, sb = q(_x(gen, 128, 27, spread=False), FP4, "mx", dim=0)
    cases.append(("g2x2_mxfp4_odd_k_end_inside_a_byte_f32", a, b, sa, MX, sb.t(),
                  _offs(32, 64, 97), F32))
    return cases


# --- the subprocess ----------------------------------------------------------------------------

def _abs_codes(t):
    """|t| for fp8 / packed fp4 data, by clearing sign bits (scales are positive)."""
    mask = 0x77 if t.dtype == FP4 else 0x7F
    return (t.view(torch.uint8) & mask).view(t.dtype)


def _judge(out, exact, bound_abs, k, out_dtype):
    """Worst |out - exact| / allowed over the elements (see the module docstring)."""
    allowed = 4 * max(k, 1) * 2.0 ** -24 * bound_abs + 1e-30
    if out_dtype != F32:  # a full ulp: the interpreter truncates narrowing stores
        mant = 7 if out_dtype == BF16 else 10
        # ulp of the binade the fp32 accumulator was in (truncation keeps the binade)
        _, e = torch.frexp(torch.maximum(exact.abs(), out.double().abs()).clamp(min=1e-30))
        allowed = allowed + torch.exp2(e.double() - 1 - mant)
    err = (out.double() - exact).abs()
    return float((err / allowed).nan_to_num(float("inf")).max()) if out.numel() else 0.0


def main() -> None:
    import dataclasses

    import xvendor
    from xvendor import numerics, registry
    from xvendor.triton import backend, scaled_launch

    assert scaled_launch.interpreting(), "start with TRITON_INTERPRET=1"
    seed = int(os.environ.get("XVENDOR_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    gen = torch.Generator().manual_seed(seed)
    rec = registry.backends()["triton"]
    scaled_ops = {"scaled_mm", "scaled_grouped_mm"}
    record_had_ops = scaled_ops <= rec.ops
    if not record_had_ops:
        registry.register(dataclasses.replace(rec, ops=rec.ops | scaled_ops), replace=True)
    backend.POISON_OUTPUTS = True
    seen = []
    for name in ("scaled_mm_launch", "scaled_grouped_mm_launch"):
        orig = getattr(scaled_launch, name)

        def counted(*args, _orig=orig, **kwargs):
            kernel, grid, largs, lkwargs = _orig(*args, **kwargs)
            seen.append({"kernel": kernel.fn.__name__ if hasattr(kernel, "fn") else str(kernel),
                         "grid": list(grid), "MX": lkwargs["MX"], "A_FMT": lkwargs["A_FMT"],
                         "B_FMT": lkwargs["B_FMT"], "BLOCK_M": lkwargs["BLOCK_M"],
                         "BLOCK_N": lkwargs["BLOCK_N"], "BLOCK_K": lkwargs["BLOCK_K"]})
            return kernel, grid, largs, lkwargs
        setattr(scaled_launch, name, counted)

    results = {}
    for name, a, b, sa, r, sb, bias, odt, via in mm_cases(gen):
        seen.clear()
        if via == "op":
            out = xvendor.scaled_mm(a, b, sa, r, sb, r, bias=bias, output_dtype=odt,
                                    backend="triton")
            ran = xvendor.explain("scaled_mm", a, b, sa, r, sb, r, bias=bias, output_dtype=odt,
                                  backend="triton").backend
            ref = xvendor.scaled_mm(a, b, sa, r, sb, r, output_dtype=F32, backend="reference",
                                    bias=None if bias is None else bias.float())
        else:
            out = backend.scaled_mm(a, b, sa, r, sb, r, 0, 0, bias, odt)
            ran, ref = "triton (kernel)", None
        exact = numerics.scaled_mm(a, b, sa, r, sb, r, bias)
        bound = numerics.scaled_mm(_abs_codes(a), _abs_codes(b), sa, r, sb, r)  # scales > 0
        if bias is not None:
            bound = bound + bias.double().abs()
        k = a.shape[1] * (2 if a.dtype == FP4 else 1)
        results[name] = {
            "backend": ran, "launches": list(seen), "dtype": str(out.dtype),
            "nans": int(out.isnan().sum()), "worst": _judge(out, exact, bound, k, odt),
            "worst_aten": _judge(ref, exact, bound, k, F32) if ref is not None else 0.0,
            "max_abs_exact": float(exact.abs().max())}
    for name, a, b, sa, r, sb, offs, odt in grouped_cases(gen):
        seen.clear()
        out = xvendor.scaled_grouped_mm(a, b, sa, r, sb, r, offs, output_dtype=odt,
                                        backend="triton")
        ran = xvendor.explain("scaled_grouped_mm", a, b, sa, r, sb, r, offs, output_dtype=odt,
                              backend="triton").backend
        ref = xvendor.scaled_grouped_mm(a, b, sa, r, sb, r, offs, output_dtype=F32,
                                        backend="reference")
        exact = numerics.scaled_grouped_mm(a, b, sa, r, sb, offs)
        bound = numerics.scaled_grouped_mm(_abs_codes(a), _abs_codes(b), sa, r, sb, offs)
        k = a.shape[1] * (2 if a.dtype == FP4 else 1)
        res = {"backend": ran, "launches": list(seen), "dtype": str(out.dtype),
               "nans": int(out.isnan().sum()), "worst": _judge(out, exact, bound, k, odt),
               "worst_aten": _judge(ref, exact, bound, k, F32),
               "max_abs_exact": float(exact.abs().max()) if exact.numel() else 0.0}
        if b.dim() == 3:
            res["tail_max_abs"] = float(out[int(offs[-1]):].abs().max()) \
                if int(offs[-1]) < out.shape[0] else 0.0
        results[name] = res
    # A shipped gfx950 config handed over as the dispatch layer does (config=): launched as is.
    from xvendor.triton import scaled_configs
    cfg = scaled_configs.DEFAULTS["gfx950"]["scaled_mm"]
    seen.clear()
    name, a, b, sa, r, sb, bias, odt, _ = mm_cases(gen)[0]
    out = backend.scaled_mm(a, b, sa, r, sb, r, 0, 0, bias, odt, config=cfg.to_dict())
    exact = numerics.scaled_mm(a, b, sa, r, sb, r)
    served = {"launches": list(seen), "rel_error": numerics.rel_error(out, exact),
              "shape": list(out.shape)}
    print(json.dumps({"seed": seed, "record_had_ops": record_had_ops, "results": results,
                      "served": served}))


# --- the tests ---------------------------------------------------------------------------------

pytestmark = pytest.mark.l1
MM = ["mx_e4m3_tails_colmajor_b_f32", "mx_e5m2_x_e4m3_rowmajor_b_bias_bf16", "mxfp4_k160_f32",
      "mxfp4_m1_k32_one_block_f16", "mx_mixed_e2m1_x_e4m3_kernel_f32",
      "rowwise_e4m3_x_e5m2_k45_f32", "rowwise_e5m2_x_e4m3_bias_bf16_out_bf16",
      "tensorwise_e4m3_f16"]
GROUPED = ["g2x3_mx_e4m3_empty_groups_tail_f32", "g2x3_mxfp4_bf16",
           "g2x3_rowwise_e4m3_x_e5m2_tail_f32", "g2x3_mx_all_empty_f32",
           "g2x2_mx_e4m3_empty_group_mid_block_end_f32", "g2x2_mxfp4_odd_k_end_inside_a_byte_f32"]


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("XVENDOR_BACKEND", None)
    proc = subprocess.run([sys.executable, str(HERE)], env=env, capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_case_lists_match_the_builders():
    gen = torch.Generator().manual_seed(0)
    assert [c[0] for c in mm_cases(gen)] == MM
    assert [c[0] for c in grouped_cases(gen)] == GROUPED


@pytest.mark.parametrize("name", MM + GROUPED)
def test_numerics(run, name):
    rec = run["results"][name]
    seed = run["seed"]
    assert rec["backend"].startswith("triton"), rec
    assert len(rec["launches"]) == 1, f"the scaled kernel ran {len(rec['launches'])} times"
    launch = rec["launches"][0]
    assert launch["MX"] == ("rowwise" not in name and "tensorwise" not in name), launch
    assert rec["nans"] == 0, "output elements never written (NaN poison left)"
    assert rec["max_abs_exact"] > 0 or "all_empty" in name, "a case must not be all zeros"
    assert rec["worst"] <= 1.0, f"seed {seed} (XVENDOR_TEST_SEED replays it): {rec}"
    assert rec["worst_aten"] <= 1.0, f"the aten reference itself is off, seed {seed}: {rec}"
    assert rec.get("tail_max_abs", 0.0) == 0.0, "rows past offs[-1] must be zeros"


def test_formats_reach_the_template(run):
    fmts = {(r["launches"][0]["A_FMT"], r["launches"][0]["B_FMT"]) for r in run["results"].values()}
    assert {("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e2m1", "e2m1"), ("e2m1", "e4m3"),
            ("e4m3", "e5m2")} <= fmts


def test_served_config_is_the_one_launched(run):
    from xvendor.triton import scaled_configs
    cfg = scaled_configs.DEFAULTS["gfx950"]["scaled_mm"]
    (launch,) = run["served"]["launches"]
    assert (launch["BLOCK_M"], launch["BLOCK_N"], launch["BLOCK_K"]) == \
        (cfg.block_m, cfg.block_n, cfg.block_k)
    m, n = run["served"]["shape"]
    assert launch["grid"] == [-(-m // cfg.block_m) * -(-n // cfg.block_n)]
    assert run["served"]["rel_error"] <= 2e-5


if __name__ == "__main__":
    sys.exit(main())
