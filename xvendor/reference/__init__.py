"""The ``reference`` backend: the exact fp32 oracle, correct on every device and any size.

It is what the correctness gate, the tuner and ``xvendor check`` compare every other
backend with, and the last resort of selection (after torch's own ops): its grouped GEMMs
loop over groups after reading ``offs`` on the host, so on an accelerator it synchronizes
and is never the automatic choice where torch's op can serve. Kernels: ``kernels.py``
(the math is in its docstring); the record: ``record.py``.
"""

from .kernels import (KERNELS, gemm, grouped_mm, quantize, rms_norm, rms_norm_backward,
                      scaled_grouped_mm, scaled_mm, topk)

__all__ = ["KERNELS", "gemm", "grouped_mm", "quantize", "rms_norm", "rms_norm_backward",
           "scaled_grouped_mm", "scaled_mm", "topk"]
