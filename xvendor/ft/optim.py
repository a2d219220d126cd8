"""torchft's ``torchft.optim`` module name: ``from xvendor.ft.optim import OptimizerWrapper``."""

from .wrappers import Optimizer, OptimizerWrapper

__all__ = ["Optimizer", "OptimizerWrapper"]
