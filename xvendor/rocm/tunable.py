"""``xvendor.tuning``'s view of the ``flydsl`` backend (its record names ``TUNABLE`` here).

The candidates of an op are the config spaces of the templates that run it
(``configs.OP_TEMPLATES``: gemm, grouped_mm, rms_norm, rms_norm_backward -> "rms_norm_bwd",
topk -> "topk:router" and "topk:radix") with the real code object of each
(``xvendor.tuning.sweep`` compiles them through ``xvendor.rocm.crosscompile``: registers,
spills, LDS, the instructions the template must issue), so pruning works from what was
compiled. A candidate runs through the serving path itself (``backend.KERNELS[op](...,
config=)``), so a winner is timed exactly as it will be served.

NOTE [memory-bound model]: RMSNorm (forward, backward) and topk move each byte once and do
little math per byte, so their configs are ranked (``rank``) by HBM bytes over bandwidth
(``xvendor.archs``: MI355X 8 TB/s, MI455X 19.6 TB/s), with what a config changes:

    chunk     = vec * lanes per row                 (elements a workgroup covers per step)
    row bytes = ceil(n / chunk) * chunk * streams * elem bytes   (idle tail lanes count)
    wg bytes  = rows per workgroup * row bytes (+ the backward's fp32 dweight partial row,
                written by the kernel and read again by the final sum)
    slots     = CUs * workgroups per CU (the compile record's occupancy)
    predicted = ceil(workgroups / slots) * wg bytes / (bandwidth / slots) / width_eff

``streams``: rms_norm 2 (x, y), backward 3 (grad, x, dx), topk 1 (x; plus k values and
int64 indices out per row). ``width_eff = sqrt(min(1, access bytes / 16))``: 16-byte
accesses per lane are the widest both archs issue, and narrower ones need more memory
instructions per byte (the square root, as the GEMM model's tile efficiency, is a ranking
device, not a measured curve). A workgroup draws at most a slot's share of the bandwidth,
so a grid smaller than the slots leaves bandwidth unused. Not modelled: the radix form's
later passes (they re-read the row from cache, not HBM), reductions, launch latency.
Configs the kernel cannot take for the problem (the router form beyond ``vec * wave``
experts or k beyond the wave; radix beyond ``k_max``) are pruned with the kernel's own
reason (``topk.specialization``).

What runs where: on a gfx950/gfx1250 device the whole loop runs (prune, rank, gate against
the reference, time). Without one, nothing here can launch: the loop stops after ranking,
which is how the ``predicted`` FlyDSL entries are made (``predicted_entries``; the GEMM
family's through ``xvendor.tuning.model``, ``python -m xvendor.tuning.shipped``).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import asdict

import torch

from .. import archs, shapes
from ..tuning.problem import ProblemKey
from ..tuning.store import Winner
from ..tuning.sweep import plan, sweep, toolchain
from ..tuning.tuner import Candidate
from . import backend, configs, rmsnorm, topk

__all__ = ["TUNABLE", "MEMORY_OPS", "SHAPES", "compiled_records", "predict_us", "prune",
           "rank", "predicted_entries", "problem_key"]

MEMORY_OPS = ("rms_norm", "rms_norm_backward", "topk")
_STREAMS = {"rms_norm": 2, "rms_norm_backward": 3, "topk": 1}
_ELEM = {"float32": 4, "float16": 2, "bfloat16": 2}
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_FULL_WIDTH = 16  # bytes per lane access: the widest buffer load/store on gfx950 and gfx1250
ANY_CU = 0
LAYOUT = "rows"  # the problem key's layout of these ops: rows of n contiguous elements

# (label, op, rows, n, k): common LLM shapes (k: topk's k, else 0); rows are tokens.
SHAPES = [
    ("Llama-70B norm, 16k tokens", "rms_norm", 16384, 8192, 0),
    ("DeepSeek-V3 norm, 16k tokens", "rms_norm", 16384, 7168, 0),
    ("Qwen3-30B-A3B norm, 16k tokens", "rms_norm", 16384, 2048, 0),
    ("decode norm, 64 tokens", "rms_norm", 64, 8192, 0),
    ("Llama-70B norm backward, 16k tokens", "rms_norm_backward", 16384, 8192, 0),
    ("DeepSeek-V3 norm backward, 16k tokens", "rms_norm_backward", 16384, 7168, 0),
    ("DeepSeek-V3 router, 256 experts top-8", "topk", 16384, 256, 8),
    ("Qwen3 router, 128 experts top-8", "topk", 16384, 128, 8),
    ("Mixtral router, 8 experts top-2", "topk", 16384, 8, 2),
    ("Qwen3 sampling, 151936 vocab top-50", "topk", 64, 151936, 50),
    ("DeepSeek-V3 sampling, 129280 vocab top-1024", "topk", 32, 129280, 1024),
]


def problem_key(op: str, arch: str, rows: int, n: int, k: int = 0, dtype: str = "bfloat16",
                cus: int = ANY_CU, product: str = "*") -> ProblemKey:
    """The tuning key of a memory-bound op: M = rows (bucketed as the ops' shape classes
    bucket them, ``xvendor.shapes.rows_class``), N = row length (hidden), K = topk's k."""
    return ProblemKey(op, "flydsl", arch, cus, product, dtype, dtype, LAYOUT,
                      shapes.m_bucket(rows), n, k, 0)


def compiled_records(arch: str, op: str, cache_dir=None) -> list[dict]:
    """The sweep's records (cached, else compiled now in workers) of every config of the
    templates that run ``op`` on ``arch``."""
    templates = list(configs.OP_TEMPLATES.get(op, (op,)))
    jobs = plan(toolchain("flydsl"), [arch], "all", templates=templates)
    return sweep("flydsl", jobs=jobs, cache_dir=cache_dir)


def _lanes_per_row(op: str, cfg, arch: str) -> int:
    wave = rmsnorm.WAVE[arch]
    if op == "topk":
        return wave if cfg.form == "router" else cfg.waves * wave
    if op == "rms_norm":
        return rmsnorm.lanes_per_row(arch, cfg)
    return cfg.waves * wave  # the backward puts all its waves on each row


def _rows_per_workgroup(op: str, cfg) -> int:
    if op == "topk":
        return cfg.waves if cfg.form == "router" else 1
    return cfg.rows  # forward: rows side by side; backward: rows walked one after another


def predict_us(op: str, arch: str, rows: int, n: int, k: int, dtype: str, config: dict,
               occupancy: int, cus: int = 0) -> float:
    """Predicted µs of one call (NOTE [memory-bound model])."""
    spec = archs.arch_spec(arch)
    cfg = configs.config_from(configs.OP_TEMPLATES[op][0], config)
    elem = _ELEM[dtype]
    chunk = cfg.vec * _lanes_per_row(op, cfg, arch)
    row_bytes = math.ceil(max(n, 1) / chunk) * chunk * _STREAMS[op] * elem
    if op == "topk":
        row_bytes += k * (elem + 8)  # values and int64 indices
    per_wg = _rows_per_workgroup(op, cfg)
    wg_bytes = per_wg * row_bytes
    if op == "rms_norm_backward":
        wg_bytes += 2 * 4 * n  # its fp32 dweight partial row: written, then summed
    workgroups = max(1, math.ceil(rows / per_wg))
    slots = max(1, cus or spec.cus or 1) * max(1, occupancy)
    bandwidth = (spec.hbm_tbps or 0.1) * 1e12
    access = rmsnorm.piece(cfg.vec, 8 * elem) * elem
    width_eff = min(1.0, access / _FULL_WIDTH) ** 0.5
    return math.ceil(workgroups / slots) * wg_bytes / (bandwidth / slots) / width_eff * 1e6


def prune(op: str, arch: str, records: list[dict], rows: int, n: int, k: int,
          dtype: str) -> tuple[list, dict]:
    """(kept records, {config_name: why dropped}): a record must have passed the compile
    checks, and its kernel must take the problem."""
    kept, dropped = [], {}
    probe = torch.empty((1, n), dtype=_DTYPES[dtype], device="meta")
    for r in records:
        name = r.get("config_name", "?")
        if not r.get("ok"):
            dropped[name] = f"did not pass the cross-compile checks: {r.get('reason')}"
            continue
        if op == "topk":
            try:
                topk.specialization((probe, k, -1, True), configs.config_from(
                    r["template"], r["config"]), arch)
            except ValueError as e:
                dropped[name] = f"the kernel does not take this problem: {e}"
                continue
        kept.append(r)
    return kept, dropped


def rank(op: str, arch: str, records: list[dict], rows: int, n: int, k: int, dtype: str,
         cus: int = 0) -> list[tuple[float, dict]]:
    """(predicted µs, record) best first. Ties (common: a memory-bound model sees many
    configs at the same bandwidth) go to the template's default, then by name."""
    scored = [(predict_us(op, arch, rows, n, k, dtype, r["config"],
                          int(r.get("occupancy") or 1), cus), r) for r in records]
    return sorted(scored, key=lambda x: (x[0], not x[1].get("default"),
                                         x[1].get("config_name", "")))


def predicted_entries(arch: str, shapes=SHAPES, records_for=compiled_records) -> dict:
    """{problem key: Winner dict} of the top prediction per shape of the memory-bound ops:
    the tuning loop up to ranking, as far as it goes without the chip (``kind":
    "predicted"``; the shipped tables' format, ``xvendor.tuning.shipped``)."""
    entries, records = {}, {}
    for label, op, rows, n, k in shapes:
        recs = records.setdefault(op, records_for(arch, op))
        kept, _ = prune(op, arch, recs, rows, n, k, "bfloat16")
        ranked = rank(op, arch, kept, rows, n, k, "bfloat16")
        if not ranked:
            continue
        predicted, best = ranked[0]
        key = problem_key(op, arch, rows, n, k)
        entries[str(key)] = asdict(Winner(
            "flydsl", best["config"], best["config_name"], None, predicted,
            {"kind": "predicted", "model": "xvendor.rocm.tunable memory-bound v1",
             "shape": label, "template": best["template"],
             "from": "flydsl cross-compile records (no spills, no scratch, LDS within "
                     "limit, vector accesses as wide as the config)",
             "date": datetime.date.today().isoformat()}))
    return entries


class _Tunable:
    """The arch's FlyDSL config spaces (compile records included) and one launch each."""

    def candidates(self, op, info, key):
        if info.arch not in configs.SPACES:
            return []
        return [Candidate(r["config_name"], r["config"], r)
                for r in compiled_records(info.arch, op)]

    def rank(self, op, info, key, candidates) -> tuple[list, dict] | None:
        """For the memory-bound ops: ((predicted µs, record) best first, {name: why
        dropped}); ``None`` for the GEMM family, which the tuner ranks with
        ``xvendor.tuning.model``."""
        if op not in MEMORY_OPS:
            return None
        records = [dict(c.record or {"ok": True}, config=c.config, config_name=c.name)
                   for c in candidates]
        kept, dropped = prune(op, info.arch, records, key.m, key.n, key.k, key.dtype)
        return rank(op, info.arch, kept, key.m, key.n, key.k, key.dtype,
                    info.cu_count), dropped

    def run(self, op, config, args):
        return backend.KERNELS[op](*args, config=config)

    def default_name(self, arch: str, op: str) -> str:
        return configs.default(arch, configs.OP_TEMPLATES.get(op, (op,))[0]).name


TUNABLE = _Tunable()
