"""Portable Triton templates (GEMM, ragged grouped GEMM), their config spaces and backend.

- ``kernels``: the ``@triton.jit`` templates (math and code paths in its docstring);
- ``configs``: per-arch config spaces and defaults, as data;
- ``backend``: the ``triton`` backend module (``KERNELS``, ``probe``) the registry loads;
- ``crosscompile``: compile one template x config for a GPU target without a GPU.

Nothing here imports ``triton`` at package import: the registry probes it lazily.
"""
