"""torchft's ``torchft.local_sgd`` names on ``xvendor.ft.Manager``.

- ``LocalSGD(manager, model, optimizer, sync_every)``: a context manager; every
  ``sync_every`` optimizer steps (a step post-hook, as in torchft) the parameters are
  averaged across the replica groups under one step of the manager: ``start_quorum()``, an
  all-reduce of every parameter's local tensor (a DTensor's shard), ``should_commit()``,
  and on commit the averages replace the parameters. The replacement is the commit's
  action (``Manager.commit_action``), so a newcomer admitted at that commit receives the
  averaged parameters, as torchft's newcomer heals to them at its next quorum. Between
  syncs nothing is communicated; a failure during a sync drops that sync (the local steps
  since the last one stay local), as in torchft.
- ``DiLoCo``: not provided; constructing it raises, naming why (see its docstring).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .manager import Manager

__all__ = ["DiLoCo", "LocalSGD"]


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor
    return (t.to_local() if isinstance(t, DTensor) else t).detach().clone()


class LocalSGD:
    def __init__(self, manager: Manager, model: nn.Module, optimizer: torch.optim.Optimizer,
                 sync_every: int):
        if not isinstance(manager, Manager):
            raise TypeError(f"LocalSGD: manager must be an xvendor.ft.Manager, got "
                            f"{type(manager).__name__}")
        if not isinstance(sync_every, int) or sync_every < 1:
            raise ValueError(f"LocalSGD: sync_every must be an int >= 1, got {sync_every!r}")
        self._manager, self._model, self._optimizer = manager, model, optimizer
        self._sync_every, self._local_step = sync_every, 0
        self._hooks: list[Any] = []

    def __enter__(self) -> "LocalSGD":
        self._hooks.append(self._optimizer.register_step_post_hook(self._post))
        return self

    def __exit__(self, *exc) -> bool:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        return False

    def _post(self, _optim, _args, _kwargs) -> None:
        self._local_step += 1
        if self._local_step >= self._sync_every:
            self.sync()

    def sync(self) -> None:
        """Average the parameters across the replica groups (one manager step)."""
        manager = self._manager
        manager.start_quorum()
        params = [p for p in self._model.parameters()]
        averaged = [_local(p) for p in params]
        for a in averaged:
            manager.allreduce(a)

        def apply() -> None:
            from torch.distributed.tensor import DTensor
            with torch.no_grad():
                for p, a in zip(params, averaged):
                    (p.to_local() if isinstance(p, DTensor) else p).copy_(a)

        manager.commit_action(apply)
        manager.should_commit()
        self._local_step = 0


class DiLoCo:
    """Not provided by xvendor.ft. Its synchronous form maps onto the step guard (the outer
    optimizer's step on the pseudo-gradients would be the commit's action, as ``LocalSGD``'s
    averaging is), but torchft's DiLoCo is streaming: with ``fragment_sync_delay`` > 0 a
    fragment's all-reduce is started at one inner step and waited for, and committed, inner
    steps later, while other fragments start theirs. xvendor's step guard has one step open
    at a time (``start_quorum()`` to ``should_commit()``) and admits newcomers inside that
    commit; several overlapping fragment steps per replica have no counterpart there.
    Use ``LocalSGD``, or torchft itself, for semi-synchronous training."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "xvendor.ft.local_sgd.DiLoCo is not provided: streaming DiLoCo overlaps several "
            "fragment syncs (fragment_sync_delay), xvendor's step guard holds one step open "
            "at a time. Use semi_sync_method='local_sgd' or torchft (see DiLoCo's docstring)")
