"""torchft's DDP and optimizer wrappers on ``xvendor.ft.Manager``.

- ``DistributedDataParallel(manager, module)``: the module's gradients are averaged across
  replica groups through ``manager.allreduce`` as each one is accumulated (a post-accumulate
  hook per parameter; a failure is latched by the manager, never raised into autograd).
  Inside a replica group the model may be sharded or replicated as usual; this averages
  across groups only.
- ``OptimizerWrapper(manager, optimizer)`` (alias ``Optimizer``, torchft's name):
  ``zero_grad()`` starts the quorum, ``step()`` commits (the optimizer steps only on
  commit) and returns whether it did.
"""

from __future__ import annotations

import torch
from torch import nn

from .manager import Manager


class DistributedDataParallel(nn.Module):
    def __init__(self, manager: Manager, module: nn.Module):
        super().__init__()
        if not isinstance(manager, Manager):
            raise TypeError(f"DistributedDataParallel: manager must be an xvendor.ft.Manager, "
                            f"got {type(manager).__name__}")
        self.manager, self.module = manager, module
        self._hooks = [p.register_post_accumulate_grad_hook(self._average)
                       for p in module.parameters() if p.requires_grad]

    def _average(self, param: torch.Tensor) -> None:
        self.manager.allreduce(param.grad)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class OptimizerWrapper(torch.optim.Optimizer):
    def __init__(self, manager: Manager, optim: torch.optim.Optimizer):
        self.manager, self.optim = manager, optim
        manager.register_optimizer(optim)

    @property
    def param_groups(self):
        return self.optim.param_groups

    @property
    def state(self):
        return self.optim.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.manager.start_quorum()
        self.optim.zero_grad(set_to_none)

    def step(self, closure=None) -> bool:
        if closure is not None:
            raise ValueError("OptimizerWrapper.step: closure is not supported (as in torchft)")
        return self.manager.should_commit()  # steps self.optim on commit

    def state_dict(self):
        return self.optim.state_dict()

    def load_state_dict(self, state_dict) -> None:
        self.optim.load_state_dict(state_dict)


Optimizer = OptimizerWrapper
