"""``resilient_ddp(model, rg, **ddp_kwargs)``: DDP over the resilient group's current epoch,
moved to every new epoch by itself.

- Shrink (survivors keep their order): ``DDP._update_process_group(new epoch's group)``,
  which also resets the reducer; DDP then divides by the new size.
- Grow (newcomers admitted): DDP is rebuilt on every member. Old members rebuilt their
  bucket layout after iteration 1 and a newcomer has not, and ``_update_process_group``
  alone after a grow was measured to crash gloo ("collective mismatch"). The old reducer's
  autograd hooks are removed first.
- DDP is always built with ``init_sync=False``: the resilient group already made every
  member's state equal (a newcomer received it from the oldest survivor) through the
  user's ``get_state``/``set_state``, which must cover the model's parameters and buffers.

Verified here on gloo/CPU with real processes (tests/distributed/test_ddp.py). The NCCL/RCCL
fast path (a reconfigurable nccl2 group) is not verified here: it needs GPUs.
"""

from __future__ import annotations

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from .env import fingerprint


class ResilientDDP(torch.nn.Module):
    """Holds the user's model as ``module`` (state dict keys as DDP's) and the current DDP."""

    def __init__(self, model: torch.nn.Module, rg, **ddp_kwargs):
        super().__init__()
        for k in ("process_group", "init_sync", "device_mesh"):
            if k in ddp_kwargs:
                raise ValueError(f"resilient_ddp: {k}= is set by the resilient group; "
                                 "leave it out")
        link = getattr(rg, "link", None)
        if link is not None and link.fingerprint and fingerprint(model) != link.fingerprint:
            raise ValueError("resilient_ddp: model's parameter fingerprint differs from the one "
                             "this worker was admitted with (from_env(model=...)): pass the "
                             "same model")
        self.module = model
        self.rg, self.ddp_kwargs = rg, ddp_kwargs
        self.rebuilds, self.updates = 0, 0
        self.__dict__["ddp"] = None  # not a submodule: it wraps self.module
        self._build()
        rg.listeners.append(self._on_epoch)

    def _build(self) -> None:
        old = self.__dict__.get("ddp")
        if old is not None:
            old.reducer._remove_autograd_hooks()
        self.__dict__["ddp"] = DDP(self.module, process_group=self.rg.torch_group(),
                                   init_sync=False, **self.ddp_kwargs)
        self.rebuilds += 1

    def _on_epoch(self, rg, prev_members: list[int]) -> None:
        shrink = bool(prev_members) and rg.members == [m for m in prev_members
                                                       if m in rg.members]
        if shrink and self.ddp is not None:
            self.ddp._update_process_group(rg.torch_group())
            self.updates += 1
        else:
            self._build()

    def forward(self, *args, **kwargs):
        return self.ddp(*args, **kwargs)


def resilient_ddp(model: torch.nn.Module, rg, **ddp_kwargs) -> ResilientDDP:
    """DDP over ``rg`` that follows its epochs; train with ``with rg.step(optimizer):``."""
    return ResilientDDP(model, rg, **ddp_kwargs)
