"""The record of the ``flydsl`` backend (``xvendor.rocm.backend``): gfx950 MFMA, gfx1250 WMMA."""

import torch

from ..dispatch.records import Backend
from .configs import TARGETS

BACKEND = Backend(
    name="flydsl", module="xvendor.rocm.backend",
    ops={"gemm", "grouped_mm", "rms_norm", "rms_norm_backward", "topk", "scaled_mm"},
    device_types={"cuda"}, vendors={"amd"}, archs=set(TARGETS),
    dtypes={torch.float16, torch.bfloat16},
    # topk: fp32 router logits; scaled_mm: decided on its output dtype (bf16 only)
    op_dtypes={"topk": {torch.float16, torch.bfloat16, torch.float32},
               "scaled_mm": {torch.bfloat16}},
    # rms_norm and topk stay on request: torch's FlyDSL RMSNorm/topk beat ATen on gfx950
    # above shape gates in its own PRs (190843, 191447, 191164, 193548), but those
    # are its kernels, not ours, and say nothing of gfx1250; a default needs a
    # device timing of these kernels that agrees with the correctness gate.
    defaults={"gemm": {"gfx950"}, "grouped_mm": {"gfx950"}},
    evidence="public numbers on MI355X (gfx950): FlyDSL bf16 GEMM 1.19x Triton / "
             "1.15x ATen geomean (torch PR 190903); FlyDSL grouped GEMM ~900-1215 "
             "TFLOPS vs Triton ~740-900 (torch PR 194032). gfx1250: no public "
             "numbers, so no default there",
    probe="xvendor.rocm.backend:probe", priority=10,
    gate_identity="xvendor.rocm.backend:gate_identity",
    tunable="xvendor.rocm.tunable:TUNABLE")
