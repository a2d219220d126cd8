"""CUDA kernels -> SYCL free-function kernels: translate, compile, launch, check.

``load(path)`` translates a ``.cu`` file and compiles it with SYCL run-time compilation;
``mod.kernel[grid, block](*args)`` launches with torch tensors as pointers. The CLI is
``xvendor port`` (``xvendor.port.cli``). Importing this package loads neither torch nor the
SYCL runtime.
"""

__all__ = ["load", "check", "Case", "translate_file", "PortError"]


def __getattr__(name):
    if name in ("load", "PortError"):
        from . import launch
        return getattr(launch, name)
    if name in ("check", "Case"):
        from . import verify as check_mod
        return getattr(check_mod, name)
    if name == "translate_file":
        from .build import translate_file
        return translate_file
    raise AttributeError(name)
