"""xvendor: one torch dispatch layer over the best kernel for each vendor's device.

    import xvendor
    y = xvendor.gemm(a, b, bias)                      # best backend for a's device
    out = xvendor.grouped_mm(x, w, offs)              # MoE forward, ragged groups
    print(xvendor.explain("gemm", a, b))              # which backend, and why not the others
    with xvendor.use_backend("reference"): ...        # explicit request (or XVENDOR_BACKEND)

Without torch installed only the torch-free part imports: ``xvendor.ci`` (a CI matrix job
emits its runner matrix without downloading torch). Every other name then raises an
ImportError that says so.
"""

__version__ = "0.1.0"

__all__ = ["ArgumentError", "Backend", "BackendUnavailable", "Event", "MemPool", "WeightChannel",
           "backends", "detect", "devices", "explain", "nn", "port", "gemm", "grouped_mm", "quantize",
           "register", "rms_norm", "scaled_grouped_mm", "scaled_mm", "set_fast_path", "topk",
           "use_backend", "use_mem_pool"]

try:
    import torch as _torch  # noqa: F401 (only: is it there?)
except ImportError:  # NOTE: not ModuleNotFoundError only: a broken torch is no torch either
    _torch = None

if _torch is not None:
    # Eager on purpose: importing xvendor registers torch.ops.xvendor.* (graphs and exported
    # programs that name those ops need nothing but `import xvendor`).
    from . import devices
    from .devices import detect
    from .events import Event
    from .explain import explain
    from . import nn, port  # port: light (translator and runtime load on first use)
    from .mempool import MemPool, use_mem_pool
    from .ops import (ArgumentError, gemm, grouped_mm, quantize, rms_norm, scaled_grouped_mm,
                      scaled_mm, set_fast_path, topk)
    from .registry import Backend, BackendUnavailable, backends, register, use_backend
    from . import registry as _registry
    # The engine names no tuning module: the tuned-winner hook is installed from here.
    _registry.install_default_tuned_hook("xvendor.tuning.serve:hook")
    from .weight_channel import WeightChannel
else:
    def __getattr__(name: str):
        if name in __all__:
            raise ImportError(f"xvendor.{name} needs torch, which is not installed here "
                              "(pip install 'torch>=2.15'); without torch only xvendor.ci "
                              "works")
        raise AttributeError(f"module 'xvendor' has no attribute {name!r}")
