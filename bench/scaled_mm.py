"""Scaled (FP8 / MX) GEMM: xvendor's Triton templates against torch on a GPU, or the static
report and a roofline prediction without one.

With a CUDA/ROCm device (``--gpu``; the default when one is present): for each shape and
recipe, the same quantized inputs through xvendor's triton ``scaled_mm`` kernel and through
torch (``torch._scaled_mm`` for TensorWise/RowWise, ``F.scaled_mm`` for MX where torch has
a kernel: sm_100+, gfx950); each output first checked against the ``reference`` backend, a
wrong one reported and not timed. CUDA events, 10 warm-ups, median of 50; prints ms,
TFLOP/s and the ratio torch_ms / xvendor_ms (> 1: xvendor faster).

Without one (``--static``):
1. every scaled variant's default config cross-compiled for gfx950, gfx1250, sm_100 and
   sm_90 (``xvendor.triton.crosscompile``): registers, LDS/shared bytes, the matrix
   instruction, occupancy, spills. This is measured (compiler output), not predicted.
2. an analytic roofline for MI355X (gfx950) and MI455X (gfx1250) on the main GEMMs of
   DeepSeek-V3, Llama-3-70B and Qwen3-235B-A22B (MoE layers as 2Dx3D grouped GEMMs with
   balanced routing under 8-way expert parallelism): time = max(FLOPs / peak, ideal bytes /
   HBM bandwidth), times the wave-quantization loss of the default tile (tiles per CU wave,
   with the compiled occupancy). Peaks come from ``xvendor.archs`` (dense datasheet
   figures: MI355X 5 PF FP8, 10 PF MXFP4; MI455X 20 PF FP8, 40 PF FP4, AMD's launch
   figures); ``--assume-peak`` overrides one (printed as assumed). This is a bound, not a
   measurement: it ignores prologue/epilogue, LDS bandwidth and clocks.

    python bench/scaled_mm.py [--static|--gpu] [--tokens 16384]
        [--assume-peak gfx950:float8_e4m3fn=5000 ...] [--targets gfx950,...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics

import torch

F8_PEAK, F4_PEAK = "float8_e4m3fn", "float4_e2m1fn_x2"
# format -> (bytes per element, E8M0 scale bytes per element, peak key in ArchSpec.peak_tflops)
FORMATS = {"mxfp8": (1.0, 1 / 32, F8_PEAK), "mxfp4": (0.5, 1 / 32, F4_PEAK),
           "fp8_rowwise": (1.0, 0.0, F8_PEAK)}
VARIANT_OF = {("gemm", "mxfp8"): "scaled_mm:mxfp8", ("gemm", "mxfp4"): "scaled_mm:mxfp4",
              ("gemm", "fp8_rowwise"): "scaled_mm:fp8_rowwise",
              ("grouped", "mxfp8"): "scaled_grouped_mm:2Dx3D_mxfp8",
              ("grouped", "mxfp4"): "scaled_grouped_mm:2Dx3D_mxfp4",
              ("grouped", "fp8_rowwise"): "scaled_grouped_mm:2Dx3D_fp8_rowwise"}


def model_gemms(tokens: int):
    """(model, name, kind, M, N, K, G) with M = tokens (rows routed to the local experts for
    MoE under EP=8 and top-8: tokens * 8 / 8 = tokens, spread evenly over G experts)."""
    t = tokens
    return [
        ("DeepSeek-V3", "dense FFN gate+up", "gemm", t, 2 * 18432, 7168, 1),
        ("DeepSeek-V3", "dense FFN down", "gemm", t, 7168, 18432, 1),
        ("DeepSeek-V3", "MoE experts gate+up (32 local)", "grouped", t, 2 * 2048, 7168, 32),
        ("DeepSeek-V3", "MoE experts down (32 local)", "grouped", t, 7168, 2048, 32),
        ("Llama-3-70B", "attn QKV", "gemm", t, 8192 + 2 * 1024, 8192, 1),
        ("Llama-3-70B", "attn out", "gemm", t, 8192, 8192, 1),
        ("Llama-3-70B", "FFN gate+up", "gemm", t, 2 * 28672, 8192, 1),
        ("Llama-3-70B", "FFN down", "gemm", t, 8192, 28672, 1),
        ("Qwen3-235B-A22B", "attn QKV", "gemm", t, 8192 + 2 * 512, 4096, 1),
        ("Qwen3-235B-A22B", "MoE experts gate+up (16 local)", "grouped", t, 2 * 1536, 4096, 16),
        ("Qwen3-235B-A22B", "MoE experts down (16 local)", "grouped", t, 4096, 1536, 16),
    ]


# --- static: compile and inspect ---------------------------------------------------------------

def static_report(targets) -> list[dict]:
    from xvendor.triton import crosscompile, scaled_configs
    from xvendor.tuning import resources

    rows = []
    for arch in targets:
        for variant in scaled_configs.VARIANTS:
            cfg = scaled_configs.default(arch, variant)
            raw = crosscompile.compile_one(variant, arch, cfg.to_dict())
            raw["expects_mma"] = False
            rec = resources.inspect(arch, raw)
            want = scaled_configs.instruction(arch, variant, cfg)
            found = re.search(want, raw["asm"])
            rows.append({"arch": arch, "variant": variant, "config": cfg.name,
                         "instruction": found.group(0) if found else f"MISSING {want}",
                         "emulated": scaled_configs.EMULATED.get(
                             (arch, scaled_configs.VARIANTS[variant][2]), ""),
                         **{k: rec[k] for k in ("vgpr", "agpr", "sgpr", "spills", "lds_bytes",
                                                "occupancy", "occupancy_limit", "ok",
                                                "reason")}})
    return rows


def print_static(rows) -> None:
    print("| target | variant | default config | VGPR/regs | AGPR | LDS/shared B | occupancy "
          "(WG/CU) | spills | instruction |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        note = " (emulated: upcast to bf16)" if r["emulated"] else ""
        bad = "" if r["ok"] else f" INVALID: {r['reason']}"
        print(f"| {r['arch']} | {r['variant']} | {r['config']} | {r['vgpr']} | {r['agpr']} | "
              f"{r['lds_bytes']} | {r['occupancy']} ({r['occupancy_limit']}) | {r['spills']} | "
              f"`{r['instruction']}`{note}{bad} |")


# --- roofline ----------------------------------------------------------------------------------

def _wave_efficiency(kind, M, N, G, cfg, cus: int, occupancy: int) -> float | None:
    """Useful tiles / tile slots of the waves the launch needs (None: CU count unknown)."""
    if not cus:
        return None
    if kind == "gemm":
        tiles = math.ceil(M / cfg.block_m) * math.ceil(N / cfg.block_n)
    else:  # balanced routing: each group has M / G rows
        tiles = G * math.ceil(M / G / cfg.block_m) * math.ceil(N / cfg.block_n)
    useful = (M * N) / (cfg.block_m * cfg.block_n)
    slots = cus * max(occupancy, 1)
    return useful / (math.ceil(tiles / slots) * slots)


def roofline(tokens: int, assumed: dict, occupancy: dict) -> list[dict]:
    from xvendor import archs
    from xvendor.triton import scaled_configs

    rows = []
    for arch in ("gfx950", "gfx1250"):
        spec = archs.ARCHS[arch]
        for model, name, kind, M, N, K, G in model_gemms(tokens):
            for fmt, (elt, scale_b, peak_key) in FORMATS.items():
                variant = VARIANT_OF[(kind, fmt)]
                cfg = scaled_configs.default(arch, variant)
                flops = 2.0 * M * N * K
                b_elems = G * K * N
                bytes_ = (M * K + b_elems) * (elt + scale_b) + M * N * 2  # bf16 out
                peak, src = spec.peak(peak_key), "archs"
                if (arch, peak_key) in assumed:
                    peak, src = assumed[(arch, peak_key)], "assumed"
                t_mem = bytes_ / (spec.hbm_tbps * 1e12)
                eff = _wave_efficiency(kind, M, N, G, cfg, spec.cus,
                                       occupancy.get((arch, variant), 1))
                row = {"arch": arch, "product": spec.product, "model": model, "gemm": name,
                       "format": fmt, "M": M, "N": N, "K": K, "G": G,
                       "intensity": flops / bytes_, "peak_tflops": peak or None,
                       "peak_source": src if peak else f"no {peak_key} peak in xvendor.archs",
                       "wave_efficiency": eff}
                if peak:
                    t_cmp = flops / (peak * 1e12) / (eff or 1.0)
                    t = max(t_cmp, t_mem)
                    row.update(bound="compute" if t_cmp >= t_mem else "memory", us=t * 1e6,
                               tflops=flops / t / 1e12)
                else:
                    row.update(bound="memory floor only", us=t_mem * 1e6, tflops=None)
                rows.append(row)
    return rows


def print_roofline(rows) -> None:
    print("| arch | model | GEMM | M x N x K (G) | format | FLOP/B | peak TF (source) | "
          "wave eff. | bound | predicted us | predicted TF/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        eff = r["wave_efficiency"]
        eff = "n/a (CUs unpublished)" if eff is None else f"{eff:.2f}"
        tf = "-" if r["tflops"] is None else f"{r['tflops']:.0f}"
        peak = (f"{r['peak_tflops']:.0f} ({r['peak_source']})" if r["peak_tflops"]
                else r["peak_source"])
        print(f"| {r['arch']} | {r['model']} | {r['gemm']} | {r['M']}x{r['N']}x{r['K']} "
              f"({r['G']}) | {r['format']} | {r['intensity']:.0f} | {peak} | {eff} | "
              f"{r['bound']} | {r['us']:.0f} | {tf} |")


# --- GPU: xvendor's kernel against torch -------------------------------------------------------

GPU_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 28672 // 4), (257, 4096, 4096)]


def _time_ms(fn, warmup=10, reps=50) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def _inputs(M, N, K, recipe, device):
    import xvendor
    x = torch.randn(M, K, device=device)
    w = torch.randn(N, K, device=device)  # b = w.t(): the column-major b torch wants
    if recipe == "mx":
        a, sa = xvendor.quantize(x, torch.float8_e4m3fn, "mx")
        wq, sw = xvendor.quantize(w, torch.float8_e4m3fn, "mx")
        return a, wq.t(), sa, sw
    a, sa = xvendor.quantize(x, torch.float8_e4m3fn, recipe)
    wq, sw = xvendor.quantize(w, torch.float8_e4m3fn, recipe)
    return a, wq.t(), sa, (sw if recipe == "tensorwise" else sw.t())


def _torch_call(recipe, a, b, sa, sb):
    import torch.nn.functional as F
    if recipe == "mx":  # plain row-major scales, as xvendor takes them; torch may refuse
        st, ns = F.ScalingType.BlockWise1x32, F.SwizzleType.NO_SWIZZLE
        return lambda: F.scaled_mm(a, b, sa, st, sb, st, swizzle_a=ns, swizzle_b=ns,
                                   output_dtype=torch.bfloat16)
    return lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=False)


def gpu_bench(shapes=GPU_SHAPES, device="cuda", time_ms=_time_ms) -> list[dict]:
    import xvendor
    from torch.nn.functional import ScalingType
    from xvendor import numerics
    from xvendor.triton import backend

    rid = {"tensorwise": ScalingType.TensorWise.value, "rowwise": ScalingType.RowWise.value,
           "mx": ScalingType.BlockWise1x32.value}
    rows = []
    for M, N, K in shapes:
        for recipe in ("tensorwise", "rowwise", "mx"):
            a, b, sa, sb = _inputs(M, N, K, recipe, device)
            r = rid[recipe]
            row = {"M": M, "N": N, "K": K, "recipe": recipe,
                   "device": torch.cuda.get_device_name() if device == "cuda" else device}
            ref = xvendor.scaled_mm(a, b, sa, r, sb, r, output_dtype=torch.float32, backend="reference")
            ours = lambda: backend.KERNELS["scaled_mm"](a, b, sa, r, sb, r)  # noqa: E731
            err = numerics.rel_error(ours().float(), ref)
            row["xvendor_rel_error"] = err
            if err <= numerics.TOLERANCE[torch.bfloat16]:
                row["xvendor_ms"] = time_ms(ours)
            else:
                row["xvendor_ms"] = None
                row["note"] = f"xvendor output wrong (rel. error {err:.2e}): not timed"
            try:
                theirs = _torch_call(recipe, a, b, sa, sb)
                row["torch_rel_error"] = numerics.rel_error(theirs().float(), ref)
                row["torch_ms"] = time_ms(theirs)
            except (RuntimeError, NotImplementedError, ValueError) as e:
                row["torch_ms"] = None
                row["torch_refused"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            flops = 2.0 * M * N * K
            for who in ("xvendor", "torch"):
                ms = row.get(f"{who}_ms")
                row[f"{who}_tflops"] = flops / ms / 1e9 if ms else None
            if row.get("xvendor_ms") and row.get("torch_ms"):
                row["ratio_torch_over_xvendor"] = row["torch_ms"] / row["xvendor_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--static", action="store_true", help="compile report + roofline (no GPU)")
    mode.add_argument("--gpu", action="store_true", help="time against torch on the GPU")
    p.add_argument("--tokens", type=int, default=16384, help="rows per GEMM (tokens per GPU)")
    p.add_argument("--targets", default="gfx950,gfx1250,sm_100,sm_90")
    p.add_argument("--assume-peak", action="append", default=[],
                   help="ARCH:KEY=TFLOPS for a peak missing from xvendor.archs, e.g. "
                        "gfx950:float8_e4m3fn=5000")
    p.add_argument("--json", help="write the records here")
    args = p.parse_args()
    use_gpu = args.gpu or (not args.static and torch.cuda.is_available())
    if use_gpu:
        out = {"gpu": gpu_bench()}
    else:
        assumed = {}
        for item in args.assume_peak:
            key, _, value = item.partition("=")
            arch, _, dtype = key.partition(":")
            assumed[(arch, dtype)] = float(value)
        static = static_report(args.targets.split(","))
        print_static(static)
        occ = {(r["arch"], r["variant"]): r["occupancy"] for r in static}
        roof = roofline(args.tokens, assumed, occ)
        print()
        print_roofline(roof)
        out = {"static": static, "roofline": roof}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
