"""Portable Triton templates (GEMM, ragged grouped GEMM, and their FP8/MX forms), their config spaces and backend.

- ``kernels``: the ``@triton.jit`` templates (math and code paths in its docstring);
- ``configs``: per-arch config spaces and defaults, as data;
- ``launch``: a call's config, grid, arguments and options (the backend and the
  cross-compiler build launches with it);
- ``scaled_kernels``, ``scaled_configs``, ``scaled_launch``: the same three for
  ``scaled_mm`` / ``scaled_grouped_mm`` (``tl.dot_scaled`` for MX, fp8 ``tl.dot`` with
  TensorWise/RowWise epilogues);
- ``backend``: the ``triton`` backend module (``KERNELS``, ``probe``) the registry loads;
- ``crosscompile``: compile one template x config for a GPU target without a GPU;
- ``tunable``: the backend as ``xvendor.tuning`` tunes it (``TUNABLE``).

Layering: ``tunable`` is the only module here that imports ``xvendor.tuning``; none of
them imports ``xvendor.registry`` or ``xvendor.ops``. Nothing here imports ``triton`` at
package import: the registry probes it lazily.
"""
