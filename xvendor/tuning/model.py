"""Static pruning and analytical ranking of kernel configs (in the spirit of AMD's Origami:
a model from the arch table and the config, no hardware needed).

Pruning (``prune``): from the cross-compile records of ``xvendor compile`` keep the configs
that compiled cleanly on that arch (no spills, no scratch, LDS within the limit, the
expected matrix instruction: ``ok`` in the record), then drop tiles that cannot fit the
problem (a tile dimension beyond the next power of two of the problem's), keeping the
smallest when nothing would be left.

Model (``predict_us``), per config on one problem (M rows per group, N, K, G groups):

    tiles     = G * ceil(M/BM) * ceil(N/BN)            (padding waste counted in full)
    slots     = CUs * occupancy                         (resident tiles, from the report)
    waves     = ceil(tiles / slots)                     (wave quantization over the CUs)
    t_compute = 2*BM*BN*K / (peak / slots) / tile_eff   (tile_eff: small tiles starve MMA)
    t_memory  = (BM*K + K*BN) * bytes / (bandwidth / slots)
    t_tile    = max(t_compute, t_memory) * (k_iters + 1) / k_iters   (pipeline fill/drain)
    predicted = waves * t_tile

Scaled problems (FP8/MX; the key's ``dtype`` is ``"<recipe>:<a>x<b>"``, NOTE [scaled problem
keys] in ``problem``): the peak is the arch's FP8 figure, its FP4 figure when both operands
are e2m1 under MX, and its bf16 figure when the compiled record's matrix instruction is a
bf16/f16 one (MX emulated by an upcast, as on sm_90); operand bytes are 1 (fp8) or 1/2
(fp4) per element, plus one E8M0 byte per 32 elements of each tile row/column under MX.

It is a ranking device, not a stopwatch: its value is the order it puts configs in, which
``rank_correlation`` checks against measured times wherever both exist.
"""

from __future__ import annotations

import math
import re

from .. import devices
from .problem import scaled_inputs

_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
_FULL_RATE_TILE = 128 * 128  # tiles this big keep the matrix units busy; smaller ones do not


def tile_of(config: dict) -> tuple[int, int, int]:
    """(BM, BN, BK) of a config dict of any toolchain (block_m / BLOCK_M / BM spellings)."""
    low = {str(key).lower(): v for key, v in config.items()}

    def pick(*names, default):
        return int(next((low[nm] for nm in names if nm in low), default))

    return (pick("block_m", "bm", default=64), pick("block_n", "bn", default=64),
            pick("block_k", "bk", default=32))


_FORMAT_BYTES = {"e4m3": 1.0, "e5m2": 1.0, "e2m1": 0.5}
_FORMAT_PEAK = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1": "float4_e2m1fn_x2"}
_EMULATING = re.compile(r"bf16|f16")  # a matrix instruction on 16-bit floats: upcast first


def peak_tflops(spec, dtype: str, mma_instr: str | None = None) -> float:
    """Dense peak for a key's ``dtype`` (a torch dtype name, or a scaled op's recipe and
    formats) on ``spec``, given the compiled kernel's matrix instruction when known."""
    scaled = scaled_inputs(dtype)
    if scaled is None:
        return spec.peak_tflops.get(dtype) or spec.peak_tflops.get("float32") or 1.0
    recipe, fa, fb = scaled
    fp8 = spec.peak_tflops.get("float8_e4m3fn")
    if mma_instr and _EMULATING.search(mma_instr):  # no scaled MMA: bf16 after an upcast
        return spec.peak_tflops.get("bfloat16") or fp8 or 1.0
    if recipe == "mx" and fa == fb == "e2m1":
        return spec.peak_tflops.get(_FORMAT_PEAK["e2m1"]) or fp8 or 1.0
    return fp8 or spec.peak_tflops.get("bfloat16") or 1.0


def tile_bytes(dtype: str, bm: int, bn: int, k: int) -> float:
    """Bytes one (bm x bn) output tile reads over K: its A rows and B columns (and E8M0
    scales under MX)."""
    scaled = scaled_inputs(dtype)
    if scaled is None:
        return (bm * k + k * bn) * _BYTES.get(dtype, 2)
    recipe, fa, fb = scaled
    scales = (bm + bn) * k / 32 if recipe == "mx" else 0
    return bm * k * _FORMAT_BYTES[fa] + k * bn * _FORMAT_BYTES[fb] + scales


def predict_us(m: int, n: int, k: int, groups: int, dtype: str, config: dict,
               occupancy: int, arch: str, mma_instr: str | None = None) -> float:
    spec = devices.ARCHS.get(arch) or devices.arch_spec(arch)
    peak = peak_tflops(spec, dtype, mma_instr)
    bandwidth = (spec.hbm_tbps or 0.1) * 1e12
    cus = max(1, spec.cus or 1)
    bm, bn, bk = tile_of(config)
    g = max(1, groups)
    rows = max(1, math.ceil(m / g)) if groups else m
    tiles = g * math.ceil(max(rows, 1) / bm) * math.ceil(max(n, 1) / bn)
    slots = cus * max(1, occupancy)
    waves = math.ceil(tiles / slots)
    tile_eff = min(1.0, (bm * bn) / _FULL_RATE_TILE) ** 0.5
    t_compute = 2 * bm * bn * k / (peak * 1e12 / slots) / tile_eff
    t_memory = tile_bytes(dtype, bm, bn, k) / (bandwidth / slots)
    k_iters = max(1, math.ceil(k / bk))
    return waves * max(t_compute, t_memory) * (k_iters + 1) / k_iters * 1e6


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (max(1, x) - 1).bit_length())


def prune(records: list[dict], m: int, n: int, k: int, groups: int = 0) -> tuple[list, dict]:
    """(kept records, {config_name: reason dropped}) for one problem on one arch."""
    dropped, fitting = {}, []
    rows = math.ceil(m / groups) if groups else m
    for r in records:
        name = r.get("config_name", "?")
        if not r.get("ok"):
            dropped[name] = f"did not pass the cross-compile checks: {r.get('reason')}"
            continue
        bm, bn, bk = tile_of(r.get("config", {}))
        too_big = [f"{dim}={t} > {lim}" for dim, t, lim in
                   (("BLOCK_M", bm, _pow2_at_least(rows)), ("BLOCK_N", bn, _pow2_at_least(n)),
                    ("BLOCK_K", bk, _pow2_at_least(k))) if t > max(16, lim)]
        (fitting.append(r) if not too_big else dropped.__setitem__(
            name, "tile larger than the problem: " + ", ".join(too_big)))
    if not fitting:  # keep the smallest clean config rather than nothing
        clean = [r for r in records if r.get("ok")]
        if clean:
            smallest = min(clean, key=lambda r: math.prod(tile_of(r.get("config", {}))))
            dropped.pop(smallest.get("config_name", "?"), None)
            fitting = [smallest]
    return fitting, dropped


def rank(records: list[dict], m: int, n: int, k: int, groups: int, dtype: str,
         arch: str) -> list[tuple[float, dict]]:
    """(predicted µs, record) best first."""
    scored = [(predict_us(m, n, k, groups, dtype, r.get("config", {}),
                          int(r.get("occupancy") or 1), arch, r.get("mma_instr")), r)
              for r in records]
    return sorted(scored, key=lambda x: (x[0], x[1].get("config_name", "")))


def rank_correlation(predicted: list[float], measured: list[float]) -> float:
    """Spearman's rho (average ranks for ties); nan with fewer than two points."""
    if len(predicted) != len(measured) or len(predicted) < 2:
        return float("nan")

    def ranks(xs):
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        r = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2
            i = j + 1
        return r

    rp, rm = ranks(predicted), ranks(measured)
    n = len(rp)
    mp, mm = sum(rp) / n, sum(rm) / n
    cov = sum((a - mp) * (b - mm) for a, b in zip(rp, rm))
    var = math.sqrt(sum((a - mp) ** 2 for a in rp) * sum((b - mm) ** 2 for b in rm))
    return cov / var if var else float("nan")
