"""The record of the ``triton`` backend (``xvendor.triton.backend``): portable templates."""

from ..dispatch.records import FLOAT_DTYPES, Backend

BACKEND = Backend(
    name="triton", module="xvendor.triton.backend",
    ops={"gemm", "grouped_mm", "scaled_mm", "scaled_grouped_mm"},
    device_types={"cuda"}, explicit_device_types={"cpu"},  # cpu: interpreter only
    dtypes=FLOAT_DTYPES, defaults={"grouped_mm": {"gfx942", "gfx950", "gfx1250"}},
    evidence="public numbers: torch's grouped_mm on ROCm is a slow per-group fallback, "
             "Triton grouped GEMM ~740-900 TFLOPS on MI355X (torch PR 194032); torch "
             "(cuBLAS, CUTLASS) stays the default on NVIDIA",
    probe="xvendor.triton.backend:probe", tunable="xvendor.triton.tunable:TUNABLE")
