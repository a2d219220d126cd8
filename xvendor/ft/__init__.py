"""A torchft-compatible surface on xvendor's resilient groups: switch a torchft training
script by changing its import (``import xvendor.ft as torchft``) and launching with xvendor's
coordinator instead of torchft's lighthouse. See docs/torchtitan.md, "Fault tolerance".

- ``Manager``: ``start_quorum`` / ``allreduce`` / ``should_commit`` / ``current_step`` /
  ``num_participants`` / ``participating_rank`` / ``register_state_dict_fn`` ... with
  torchft's semantics, on ``xvendor.distributed.ResilientGroup`` (what maps how, and the one
  difference, is in ``manager``'s docstring).
- ``DistributedDataParallel``, ``OptimizerWrapper`` (``Optimizer``), ``ProcessGroupGloo``,
  ``ProcessGroupNCCL``.

Not provided: torchft's semi-synchronous ``local_sgd`` (``LocalSGD``, ``DiLoCo``) and its
``process_group`` classes as standalone groups (xvendor's groups are made per membership
epoch by the resilient group itself).
"""

from .manager import Manager, ProcessGroupGloo, ProcessGroupNCCL
from .wrappers import DistributedDataParallel, Optimizer, OptimizerWrapper

__all__ = ["DistributedDataParallel", "Manager", "Optimizer", "OptimizerWrapper",
           "ProcessGroupGloo", "ProcessGroupNCCL"]
