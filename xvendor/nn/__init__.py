"""Modules and model conversions built on xvendor's ops.

- ``GroupedLinear``, ``MoE``: MoE expert layers on ``xvendor.grouped_mm``.
- ``convert_to_mx_training(model)``: MXFP8 training (``MXLinear``, ``MXGroupedLinear``).
"""

from .modules import GroupedLinear, MoE
from .mx import MXGroupedLinear, MXLinear, convert_to_mx_training

__all__ = ["GroupedLinear", "MXGroupedLinear", "MXLinear", "MoE", "convert_to_mx_training"]
