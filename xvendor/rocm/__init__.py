"""ROCm specifics: FlyDSL templates for gfx950 / gfx1250 and their backend; RCCL detection.

- ``gemm_gfx950`` / ``gemm_gfx1250``: the FlyDSL GEMM and ragged grouped GEMM templates
  (MFMA + LDS pipeline; WMMA + Tensor Data Mover); ``tiling``: group/tile mapping and
  bounded operand views; ``launch``: host-side planning shared with the cross-compiler;
- ``configs``: per-arch config spaces and defaults, as data;
- ``backend``: the ``flydsl`` backend module (``KERNELS``, ``probe``, ``gate_identity``);
- ``crosscompile``: one template x config to a real code object without a GPU;
  ``linker``: ``ld.lld`` from the ziglang wheel where FlyDSL looks for it;
- ``rccl``: RCCL feature detection.

Nothing here is imported at package import (FlyDSL and torch load lazily).
"""
