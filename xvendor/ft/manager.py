"""``Manager``: torchft's per-step protocol on xvendor's resilient groups.

torchft's loop, which this keeps (the optimizer wrapper makes the calls)::

    optimizer.zero_grad()        # manager.start_quorum(): the step opens
    loss.backward()              # DDP: manager.allreduce(grad) per gradient (averaged)
    optimizer.step()             # manager.should_commit(): every replica agrees, then steps

How each name maps (torchft 0.2.0 semantics unless said):

- ``start_quorum()``: opens the step under xvendor's step guard. Membership is not decided
  here: xvendor's epochs change when a member dies (at once: the coordinator sees its
  connection close) and admit newcomers at a committed step's boundary, with the state
  sent by the oldest survivor, so by the time a step opens its quorum is already known.
  ``use_async_quorum`` therefore has nothing to overlap and is accepted and ignored.
- ``allreduce(t)``: averages ``t`` over the participants in place (``ReduceOp.AVG``, torchft's
  default; ``SUM`` also) and returns a completed ``Work`` (``wait()``, ``get_future()``), as
  torchft's does. Never raised into autograd. NOTE [the step in flight is kept]: when a peer
  dies during a step, this member does not give the step up: inside that same call it
  forms the next epoch with the survivors (no state is sent: they all hold it) and runs
  again, on the new epoch, every all-reduce of the step so far from the local values it
  kept (a copy of each input, held until the step ends), then the step goes on. The
  survivors reduce the same calls in the same order (each one's failure is at one of the
  step's calls, or at the step's end, see below), so they end the step with equal
  averages over the survivors' gradients, as if the dead member had never been in it,
  and the step commits. A member that learns of the failure only at ``should_commit``
  (every call of its own succeeded: the death came during the step's last collective)
  cannot rerun them (its caller may have changed the results since, e.g. clipped them):
  that step is redone, as torchft drops it. ``start_quorum`` also moves to the next epoch
  first when the current one was aborted between steps. Outside a step (a loss
  reduction after ``should_commit``) a failure is latched and the call returns ``t`` as
  it was, as torchft does.
- ``should_commit()``: every member votes whether all its collectives of the step
  succeeded; one verdict for all. Commit: the registered optimizer steps (inside, before any
  newcomer is admitted, so the state it receives includes this step) and the step is
  counted; returns True. Redo: gradients dropped, the group shrinks around the dead member,
  returns False, and the loop runs the same step again (rarely: NOTE [the step in flight is
  kept]). **Differences from torchft**, both
  because xvendor admits newcomers in the commit itself, not at the next quorum: the
  optimizer must be registered (``OptimizerWrapper``; a bare ``should_commit()`` without
  one raises, naming the rule), and state the loop changes after a commit (an LR
  scheduler's step, a step counter) must change in a ``register_commit_hook`` function to
  reach a newcomer admitted at that step, or be finished on the newcomer itself by a
  ``register_admission_hook`` function (torchtitan's integration does this for its LR
  schedulers and step counter: ``xvendor.integrations.torchtitan.ft``).
- State: the functions' values travel with ``torch.save`` inside the commit. DTensors
  (FSDP2 parameters and optimizer state) travel as their local shards, each lane to the same
  lane of the newcomer, which rebuilds them on its own meshes (the placements of the
  receiver's state, which has the same layout: the same model, the same replica-group shape).
- Joining: on first use (the first ``start_quorum``), as torchft does at its first quorum,
  so state functions registered after construction (``register_state_dict_fn``,
  ``set_state_dict_fns``) are in place when a restarted replica receives the state.
- ``timeline()``: (event, wall time) pairs of the current or last step attempt (its opening,
  a failed call, the next epoch formed, the calls rerun, the verdict): where a failure's
  time went.
- ``current_step()``, ``num_participants()``, ``participating_rank()``, ``is_participating()``
  (always True: there are no non-participating healing replicas), ``batches_committed()``,
  ``errored()``, ``report_error(e)``, ``register_state_dict_fn(key, load_fn, save_fn)``,
  ``shutdown()``.
- Construction: ``Manager(pg, load_state_dict, state_dict, min_replica_size, replica_id, ...)``.
  ``pg`` (``ProcessGroupGloo()`` / ``ProcessGroupNCCL()``) selects the backend; the
  lighthouse is xvendor's coordinator (``XVENDOR_COORDINATOR``, or ``xvendor run``), found
  from the environment like every resilient group; ``min_replica_size`` is the
  coordinator's ``--min-replicas`` (epoch 0 waits for that many) and is checked here at
  construction only. Arguments about torchft's own transport (``lighthouse_addr``,
  ``store_addr``, ``checkpoint_transport``, timeouts...) are accepted and have no effect.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch
from torch.distributed import ReduceOp

from torch.distributed.distributed_c10d import Work

from ..distributed import EpochAborted, Excluded, ResilientGroup

log = logging.getLogger("xvendor.ft")
_IGNORED = {"use_async_quorum", "timeout", "quorum_timeout", "connect_timeout", "rank",
            "world_size", "world_size_mode", "store_addr", "store_port", "lighthouse_addr",
            "port", "hostname", "heartbeat_interval", "checkpoint_transport", "init_sync",
            "max_retries", "quorum_retries"}


class ProcessGroupGloo:
    """torchft's ``ProcessGroupGloo()`` argument to ``Manager``: selects gloo for the
    resilient group (which makes its own groups per epoch)."""

    backend = "gloo"

    def __init__(self, timeout=None):
        self.timeout = timeout


class ProcessGroupNCCL(ProcessGroupGloo):
    """Selects NCCL/RCCL for the resilient group (the fast path; untested without GPUs)."""

    backend = "nccl"


class _Done(Work):
    """A finished collective (xvendor's ``allreduce`` is synchronous): torchft's ``Work``."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__()
        self._fut: torch.futures.Future = torch.futures.Future()
        self._fut.set_result(tensor)

    def wait(self, timeout=None) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        return self._fut

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


def _is_dtensor(x) -> bool:
    from torch.distributed.tensor import DTensor
    return isinstance(x, DTensor)


def _to_local(tree):
    """Every DTensor in a state tree as its local shard (what ``torch.save`` can carry and
    ``weights_only`` loading accepts)."""
    if _is_dtensor(tree):
        return tree.to_local()
    if isinstance(tree, dict):
        return {k: _to_local(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_to_local(v) for v in tree)
    return tree


def _like(received, template):
    """``received`` with each tensor that is a DTensor in ``template`` (the receiver's own
    state) rebuilt as a DTensor on the template's mesh and placements."""
    if _is_dtensor(template) and isinstance(received, torch.Tensor) and not _is_dtensor(received):
        from torch.distributed.tensor import DTensor
        return DTensor.from_local(received.to(template.device), template.device_mesh,
                                  template.placements, shape=template.shape,
                                  stride=template.stride())
    if isinstance(received, dict) and isinstance(template, dict):
        return {k: _like(v, template[k]) if k in template else v for k, v in received.items()}
    if (isinstance(received, (list, tuple)) and isinstance(template, (list, tuple))
            and len(received) == len(template)):
        return type(received)(_like(v, t) for v, t in zip(received, template))
    return received


class _Committer:
    """What the step guard sees as the optimizer: steps it and runs the commit hooks."""

    def __init__(self, manager: "Manager"):
        self.manager = manager

    def step(self) -> None:
        self.manager._commit()

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self.manager._optimizer is not None:
            self.manager._optimizer.zero_grad(set_to_none=set_to_none)


class Manager:
    """See the module docstring."""

    def __init__(self, pg: ProcessGroupGloo | None = None,
                 load_state_dict: Callable[[Any], None] | None = None,
                 state_dict: Callable[[], Any] | None = None, min_replica_size: int = 1,
                 replica_id: str | None = None, *, group: ResilientGroup | None = None,
                 **torchft_kwargs):
        unknown = set(torchft_kwargs) - _IGNORED
        if unknown:
            raise TypeError(f"xvendor.ft.Manager: unknown argument(s) {sorted(unknown)}")
        if pg is not None and not isinstance(pg, ProcessGroupGloo):
            raise TypeError("xvendor.ft.Manager: pg must be xvendor.ft.ProcessGroupGloo() or "
                            f"ProcessGroupNCCL(), got {type(pg).__name__}")
        if not isinstance(min_replica_size, int) or min_replica_size < 1:
            raise ValueError(f"xvendor.ft.Manager: min_replica_size must be an int >= 1, got "
                             f"{min_replica_size!r}")
        self._fns: dict[str, tuple[Callable, Callable]] = {}
        if (load_state_dict is None) != (state_dict is None):
            raise ValueError("xvendor.ft.Manager: give both load_state_dict and state_dict, or "
                             "neither")
        if state_dict is not None:
            self._fns["default"] = (load_state_dict, state_dict)
        self.replica_id, self.min_replica_size = replica_id, min_replica_size
        self._optimizer = None
        self._action: Callable[[], None] | None = None  # replaces the optimizer step once
        self._hooks: list[Callable[[int], None]] = []
        self._admission_hooks: list[Callable[[int], None]] = []
        self._guard = None
        self._error: Exception | None = None
        self._batches = 0
        self._backend = pg.backend if pg is not None else "gloo"
        self._rg = group
        self._calls: list[tuple[torch.Tensor, torch.Tensor, bool]] = []  # this step's inputs
        self.last_committed: bool | None = None  # the last should_commit()'s answer
        self._timeline: list[tuple[str, float]] = []

    @property
    def rg(self) -> ResilientGroup:
        """The resilient group, joined on first use (torchft joins at the first quorum: state
        functions registered after construction are in place when a newcomer receives state)."""
        if self._rg is None:
            self._rg = ResilientGroup.from_env(self._save, self._load, backend=self._backend)
            if self._rg.size < self.min_replica_size:
                log.warning("xvendor.ft: %d replica(s) < min_replica_size=%d; start the "
                            "coordinator with --min-replicas %d", self._rg.size,
                            self.min_replica_size, self.min_replica_size)
        return self._rg

    # -- state -------------------------------------------------------------------------
    def register_state_dict_fn(self, key: str, load_state_dict: Callable[[Any], None],
                               state_dict: Callable[[], Any]) -> None:
        if key in self._fns:
            raise ValueError(f"xvendor.ft.Manager: state dict key {key!r} is already registered")
        self._fns[key] = (load_state_dict, state_dict)

    def set_state_dict_fns(self, load_state_dict: Callable[[Any], None],
                           state_dict: Callable[[], Any]) -> None:
        """torchft's name for (re)setting the default state functions."""
        self._fns["default"] = (load_state_dict, state_dict)

    def _save(self) -> dict:
        return {"fns": {k: _to_local(save()) for k, (_, save) in self._fns.items()},
                "batches": self._batches, "step": int(self._rg.step) if self._rg else 0}

    def register_admission_hook(self, fn: Callable[[int], None]) -> None:
        """``fn(step)`` runs on a newcomer right after it loaded the state of the commit of
        ``step`` it was admitted in: not on founders (epoch 0), not on survivors re-syncing
        after a failure. For state the loop changes after a commit that the loop cannot
        change in a commit hook (see the module docstring)."""
        self._admission_hooks.append(fn)

    def _load(self, state: dict) -> None:
        for key, value in state["fns"].items():
            load, save = self._fns[key]
            load(_like(value, save()))
        self._batches = state["batches"]
        if self._rg is None and state.get("step", 0) > 0:  # joining, at a commit: a newcomer
            for fn in self._admission_hooks:
                fn(state["step"])

    def register_optimizer(self, optimizer) -> None:
        """The optimizer ``should_commit`` steps (``OptimizerWrapper`` calls this)."""
        self._optimizer = optimizer

    def register_commit_hook(self, fn: Callable[[int], None]) -> None:
        """``fn(step)`` runs on every replica when ``step`` commits, after the optimizer
        stepped and before newcomers are admitted: state changed there (an LR scheduler
        step, a counter) reaches a newcomer; state changed after ``should_commit()``
        returned does not (see the module docstring)."""
        self._hooks.append(fn)

    def commit_action(self, fn: Callable[[], None]) -> None:
        """For the step now open: on commit run ``fn()`` instead of the optimizer's step
        (``local_sgd`` applies the averaged parameters this way)."""
        if self._guard is None:
            raise RuntimeError("xvendor.ft.Manager.commit_action: no step is open "
                               "(call start_quorum() first)")
        self._action = fn

    def _commit(self) -> None:  # the step guard's "optimizer.step()" on commit
        step = int(self.rg.step)
        action, self._action = self._action, None
        (action or self._optimizer.step)()
        self._batches += self.rg.size
        for fn in self._hooks:
            fn(step)

    # -- the step ----------------------------------------------------------------------
    def start_quorum(self, allow_heal: bool = True, shrink_only: bool = False,
                     timeout=None) -> None:
        if self._guard is not None:
            raise RuntimeError("xvendor.ft.Manager: start_quorum() called twice without "
                               "should_commit() in between")
        self._error = None
        self._calls.clear()
        self._timeline = [("open", time.time())]
        rg = self.rg
        if rg.pg is None or rg.ctl.aborted(rg.epoch):  # a failure between steps
            rg.recover()
            self._mark("recovered")
        self._guard = rg.step(_Committer(self))
        self._guard.__enter__()

    def _mark(self, event: str) -> None:
        self._timeline.append((event, time.time()))

    def timeline(self) -> list[tuple[str, float]]:
        """See the module docstring."""
        return list(self._timeline)

    def _reduce_into(self, tensor: torch.Tensor, value: torch.Tensor, avg: bool) -> None:
        out = self.rg.all_reduce(value)
        if avg:
            out = out / self.rg.size
        tensor.copy_(out)

    def allreduce(self, tensor: torch.Tensor, should_quantize: bool = False,
                  reduce_op: ReduceOp = ReduceOp.AVG) -> Work:
        # NOTE: compare with the ReduceOp on the left: ``RedOpType == ReduceOp`` is False
        # even for the same op (what ``AllreduceOptions.reduceOp`` holds is a ReduceOp)
        avg = reduce_op == ReduceOp.AVG
        if not avg and not reduce_op == ReduceOp.SUM:
            raise ValueError(f"xvendor.ft.Manager.allreduce: reduce_op must be AVG or SUM, got "
                             f"{reduce_op}")
        if self._error is not None:
            return _Done(tensor)
        if self._guard is None:  # outside a step: latched, as torchft does
            try:
                self._reduce_into(tensor, tensor, avg)
            except EpochAborted as e:
                self._error = e
            return _Done(tensor)
        local = tensor.detach().clone()  # NOTE [the step in flight is kept]
        self._calls.append((tensor, local, avg))
        try:
            self._reduce_into(tensor, local, avg)
        except EpochAborted as e:
            self._mark("failed")
            self._rerun_on_next_epoch(e)
        return _Done(tensor)

    def _rerun_on_next_epoch(self, err: EpochAborted) -> None:
        """NOTE [the step in flight is kept]: the next epoch, then this step's calls again."""
        while True:
            try:
                self.rg.recover()
            except Excluded:
                raise
            except Exception:  # the coordinator is gone: the step guard handles that
                log.warning("xvendor.ft: recovery inside step %d failed; the step will not "
                            "commit", int(self.rg.step), exc_info=True)
                self._error = err
                return
            self._mark("recovered")
            try:
                for tensor, local, avg in self._calls:
                    self._reduce_into(tensor, local, avg)
            except EpochAborted as e:  # another failure: once more, on the epoch after
                err = e
                self._mark("failed")
                continue
            self._mark("rerun")
            log.warning("xvendor.ft: step %d kept through a failure: %d all-reduce(s) rerun on "
                        "epoch %d (%d participants)", int(self.rg.step), len(self._calls),
                        self.rg.epoch, self.rg.size)
            return

    def should_commit(self, timeout=None) -> bool:
        if self._guard is None:
            raise RuntimeError("xvendor.ft.Manager: should_commit() without start_quorum()")
        if self._optimizer is None and self._action is None:
            self._guard.__exit__(RuntimeError, RuntimeError("no optimizer"), None)
            self._guard = None
            self._calls.clear()
            raise RuntimeError("xvendor.ft.Manager: register the optimizer first "
                               "(xvendor.ft.OptimizerWrapper(manager, optimizer)): xvendor "
                               "admits newcomers in the commit, after the optimizer stepped")
        guard, self._guard = self._guard, None
        err = self._error
        self._mark("vote")
        try:
            guard.__exit__(type(err) if err else None, err, None)
        finally:
            self._calls.clear()
        self._mark("commit" if guard.committed else "redo")
        self.last_committed = bool(guard.committed)
        return self.last_committed

    # -- what torchft reports ----------------------------------------------------------
    def current_step(self) -> int:
        return int(self.rg.step)

    def num_participants(self) -> int:
        return self.rg.size

    def participating_rank(self) -> int | None:
        return self.rg.rank

    def is_participating(self) -> bool:
        return True

    def batches_committed(self) -> int:
        return self._batches

    def errored(self) -> Exception | None:
        return self._error

    def report_error(self, e: Exception) -> None:
        """This step must not commit (torchft's semantics): it votes redo."""
        self._error = e if isinstance(e, EpochAborted) else EpochAborted(f"reported: {e!r}")

    def shutdown(self, wait: bool = True) -> None:
        self.rg.close()
