"""torchft's ``torchft.process_group`` names: ``ManagedProcessGroup`` and the backend
selectors ``ProcessGroupGloo`` / ``ProcessGroupNCCL``.

``ManagedProcessGroup(manager)`` is a ``torch.distributed.ProcessGroup`` whose ``allreduce``
is ``manager.allreduce``: what torchtitan's fault-tolerant trainer hands to FSDP2's
all-reduce hook (``dist.all_reduce(grad, group=pg, op=ReduceOp.AVG)``) and to its loss
reductions. As in torchft, its size is the number of participants of the current step
(it changes with the membership), a failure is latched by the manager (the step will not
commit) and never raised to the caller, and ``register(name)`` registers it as a backend so
that a 1-rank group naming it can be made (torchft does the same for DeviceMesh and
functional collectives). Only ``allreduce`` is provided, as in torchft's.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from .manager import Manager, ProcessGroupGloo, ProcessGroupNCCL

__all__ = ["ManagedProcessGroup", "ProcessGroupGloo", "ProcessGroupNCCL"]


class ManagedProcessGroup(dist.ProcessGroup):
    def __init__(self, manager: Manager):
        if not isinstance(manager, Manager):
            raise TypeError(f"ManagedProcessGroup: manager must be an xvendor.ft.Manager, got "
                            f"{type(manager).__name__}")
        super().__init__(0, 1)  # the real rank and size are the manager's, per step
        self._manager = manager

    def allreduce(self, tensors, opts=None):
        if len(tensors) != 1:
            raise ValueError(f"ManagedProcessGroup.allreduce: one tensor per call (as in "
                             f"torchft), got {len(tensors)}")
        op = opts if isinstance(opts, ReduceOp) else getattr(opts, "reduceOp", ReduceOp.SUM)
        return self._manager.allreduce(tensors[0], reduce_op=op)

    def size(self) -> int:
        return self._manager.num_participants()

    def rank(self) -> int:
        return self._manager.participating_rank() or 0

    def getBackendName(self) -> str:
        return f"xvendor_managed_{self._manager._backend}"

    def register(self, name: str) -> dist.ProcessGroup:
        """Register as backend ``<backend>:<name>``; returns a 1-rank group over it."""
        group_name = f"{self.getBackendName()}:{name}"

        def create_pg(store, rank, world_size, timeout):
            return self

        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        dist.Backend.register_backend(group_name, create_pg, devices=devices)
        return dist.new_group(ranks=[dist.get_rank()], backend=group_name,
                              group_desc=group_name, timeout=timedelta(seconds=60))
