"""The record of the ``reference`` backend (``xvendor.reference``): every op, every device."""

import torch

from ..dispatch.records import ANY, FLOAT_DTYPES, Backend

BACKEND = Backend(
    name="reference", module="xvendor.reference", ops=ANY, role="reference",
    device_types={"cpu", "cuda", "xpu", "mps", "meta"}, dtypes=FLOAT_DTYPES | {torch.float64},
    evidence="the exact oracle: fp32 accumulation, any size, bias and out_dtype everywhere",
    priority=-100,
    # torch.mm checks ranks, inner sizes, dtypes and devices: tests/test_registry.py
    checks_inputs={"gemm"})
