"""The record of the ``torch`` backend (``xvendor.torch_backend.kernels``): torch's own ops."""

import torch

from ..dispatch.records import FLOAT_DTYPES, Backend

BACKEND = Backend(
    name="torch", module="xvendor.torch_backend.kernels", role="floor",
    ops={"gemm", "grouped_mm", "rms_norm", "topk", "scaled_mm", "scaled_grouped_mm"},
    device_types={"cpu", "cuda", "xpu", "mps", "meta"}, dtypes=FLOAT_DTYPES | {torch.float64},
    evidence="torch's own op: the floor, never slower than torch",
    accepts="xvendor.torch_backend.rules:accepts",
    # torch.mm checks ranks, inner sizes, dtypes and devices, as for the reference
    checks_inputs={"gemm"})
