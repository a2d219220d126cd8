"""SYCL for xvendor: run-time compilation (SYCL RTC) of the free-function kernels in
``sycl_kernels/``, a persistent kernel cache, launch on dpctl / torch XPU queues, and the
``sycl`` backend (``xvendor.xpu.backend``).

Nothing is imported here: importing the package must not load the SYCL runtime, whose
environment (``environment.setup()``) has to be in place first.
"""
