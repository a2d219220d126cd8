"""The record of the ``sycl`` backend (``xvendor.xpu.backend``): free-function SYCL kernels."""

from ..dispatch.records import FLOAT_DTYPES, Backend

BACKEND = Backend(
    name="sycl", module="xvendor.xpu.backend",
    ops={"gemm", "grouped_mm", "rms_norm", "topk"}, device_types={"xpu"},
    explicit_device_types={"cpu"},  # cpu: through the OpenCL CPU SYCL device
    dtypes=FLOAT_DTYPES, probe="xvendor.xpu.backend:probe",
    tunable="xvendor.xpu.tunable:TUNABLE")
