"""THE dispatch layer: one ``torch.library`` op per operation, namespace ``xvendor``.

Each module here defines one op, described once (NOTE [one op, described once] in
``_common``): importing it defines, dispatches, explains and self-checks the op; the one
line per op below makes its public function ``xvendor.ops.<name>`` (it also shadows the
submodule of the same name, as it should). ``SPECS`` holds the descriptions. The public
functions take the eager fast path (NOTE [eager fast path]) and otherwise call
``torch.ops.xvendor.<op>``.
"""

from ._common import SPECS, ArgumentError, OpSpec, set_fast_path
from .gemm import gemm
from .grouped_mm import grouped_mm
from .quantize import quantize
from .rms_norm import rms_norm, rms_norm_backward
from .scaled_grouped_mm import scaled_grouped_mm
from .scaled_mm import scaled_mm
from .topk import topk

__all__ = ["ArgumentError", "OpSpec", "SPECS", "set_fast_path", "gemm", "grouped_mm", "quantize",
           "rms_norm", "rms_norm_backward", "scaled_grouped_mm", "scaled_mm", "topk"]
