"""THE dispatch layer: one ``torch.library`` op per operation, namespace ``xvendor``.

Each op module holds the op's schema, argument checks, fake (meta) implementation and
autograd, defined once; backends only add kernels (see ``xvendor.registry``). The public
functions here take the eager fast path (NOTE [eager fast path] in ``_common``) and
otherwise call ``torch.ops.xvendor.<op>``.
"""

from ._common import ArgumentError, set_fast_path
from .gemm import gemm
from .grouped_mm import grouped_mm
from .rms_norm import rms_norm
from .topk import topk

__all__ = ["ArgumentError", "gemm", "grouped_mm", "rms_norm", "set_fast_path", "topk"]
