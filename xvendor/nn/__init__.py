"""Modules and model conversions built on xvendor's ops.

- ``GroupedLinear``, ``MoE``: MoE expert layers on ``xvendor.grouped_mm``.
- ``convert_to_mx_training(model)``: MXFP8 training (``MXLinear``, ``MXGroupedLinear``).
- ``MXLinearFunction``, ``MXGroupedMMFunction``: the MXFP8 autograd functions those modules
  use (forward, dgrad and wgrad quantized along their contractions), for other modules.
"""

from .modules import GroupedLinear, MoE
from .mx import (MXGroupedLinear, MXGroupedMMFunction, MXLinear, MXLinearFunction,
                 convert_to_mx_training)

__all__ = ["GroupedLinear", "MXGroupedLinear", "MXGroupedMMFunction", "MXLinear",
           "MXLinearFunction", "MoE", "convert_to_mx_training"]
