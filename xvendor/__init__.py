"""xvendor: one torch dispatch layer over the best kernel for each vendor's device.

    import xvendor
    y = xvendor.gemm(a, b, bias)                      # best backend for a's device
    out = xvendor.grouped_mm(x, w, offs)              # MoE forward, ragged groups
    print(xvendor.explain("gemm", a, b))              # which backend, and why not the others
    with xvendor.use_backend("aten"): ...             # explicit request (or XVENDOR_BACKEND)
"""

from . import devices
from .devices import detect
from .events import Event
from .explain import explain
from .mempool import MemPool, use_mem_pool
from .ops import ArgumentError, gemm, grouped_mm, rms_norm, set_fast_path, topk
from .registry import Backend, BackendUnavailable, backends, register, use_backend
from .weight_channel import WeightChannel

__version__ = "0.1.0"

__all__ = ["ArgumentError", "Backend", "BackendUnavailable", "Event", "MemPool", "WeightChannel",
           "backends", "detect", "devices", "explain", "gemm", "grouped_mm", "register",
           "rms_norm", "set_fast_path", "topk", "use_backend", "use_mem_pool"]
