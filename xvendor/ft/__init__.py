"""A torchft-compatible surface on xvendor's resilient groups: switch a torchft training
script by changing its import (``import xvendor.ft as torchft``) and launching with xvendor's
coordinator instead of torchft's lighthouse. See docs/torchtitan.md, "Fault tolerance".

- ``Manager``: ``start_quorum`` / ``allreduce`` / ``should_commit`` / ``current_step`` /
  ``num_participants`` / ``participating_rank`` / ``register_state_dict_fn`` ... with
  torchft's semantics, on ``xvendor.distributed.ResilientGroup`` (what maps how, and the one
  difference, is in ``manager``'s docstring).
- ``DistributedDataParallel``, ``OptimizerWrapper`` (``Optimizer``), ``ProcessGroupGloo``,
  ``ProcessGroupNCCL``.

- ``process_group.ManagedProcessGroup`` (a ``ProcessGroup`` whose all-reduce is the
  manager's), ``local_sgd.LocalSGD``.
- ``compat.install()``: ``import torchft`` resolves to this package, for code that imports
  torchft by name (torchtitan's fault-tolerant trainer).

Not provided: streaming ``local_sgd.DiLoCo`` (it raises, naming why), torchft's process
groups as standalone groups (``ProcessGroupGloo()`` only selects the backend: xvendor's
groups are made per membership epoch by the resilient group itself), its lighthouse and
checkpoint transports (xvendor's coordinator and ``torch.save`` through the group do that).
"""

from .manager import Manager, ProcessGroupGloo, ProcessGroupNCCL
from .wrappers import DistributedDataParallel, Optimizer, OptimizerWrapper
from . import local_sgd, process_group  # noqa: E402  (torchft's submodule names)

__all__ = ["DistributedDataParallel", "Manager", "Optimizer", "OptimizerWrapper",
           "ProcessGroupGloo", "ProcessGroupNCCL"]
