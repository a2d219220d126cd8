"""``ResilientGroup``: collectives over the current membership epoch, with waits sliced so no
call blocks past ``Timing.call_bound_s``; shrink on failure, grow at step boundaries, state
re-sync from the oldest survivor.

A training loop with DDP (``resilient_ddp``) and the step guard::

    rg = ResilientGroup.from_env(get_state, set_state, model=model)
    ddp = resilient_ddp(model, rg)
    while rg.step < steps:                     # ``rg.step`` is the committed step count
        with rg.step(optimizer):               # steps the optimizer only if every member's
            loss_fn(ddp(batch(rg.step))).backward()  # collectives succeeded; else redone

A training loop by hand::

    rg = ResilientGroup.from_env(get_state, set_state)
    while rg.step < steps:
        try:
            try:
                grad = rg.all_reduce(local_grad()) # raises EpochAborted on a failure
                apply(grad)
                rg.commit_step()                   # step += 1; admits newcomers
            except EpochAborted:
                rg.recover()                       # shrink; state and step re-synced
        except Excluded:                           # (recover() raises it too)
            rg = rg.rejoin()                       # turned away: come back as a newcomer

How members agree on an epoch and form it (ready flags, group build, state sync) is
``membership``; this module holds the group's life: construction, collectives, the step
boundary, recovery and leaving.

Collectives work on private copies and return fresh tensors: a retired group whose op is
stuck on a hung peer may still write into its buffers later, so none is ever reused.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from . import control as cp
from . import dataplane, membership
from .control import EpochAborted, Excluded, Timing, sliced_wait
from .engine import Engine
from .recorder import FlightRecorder

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
        "product": dist.ReduceOp.PRODUCT}


class StepCount(int):
    """The committed step count (an ``int``); calling it opens the step guard:
    ``with rg.step(optimizer):`` (see ``stepguard``)."""

    def __new__(cls, value: int, group: "ResilientGroup"):
        self = super().__new__(cls, value)
        self._group = group
        return self

    def __call__(self, optimizer=None, agree=None):
        from .stepguard import StepGuard
        return StepGuard(self._group, optimizer, agree)

    def __reduce__(self):  # pickles (torch.save, multiprocessing) as the plain int
        return (int, (int(self),))


class ResilientGroup:
    def __init__(self, host: str, port: int, member: int, *, get_state: Callable[[], Any],
                 set_state: Callable[[Any], None], timing: Timing = Timing(),
                 fr_dir: str | None = None, backend: str = "gloo", has_state: bool = True,
                 device: str | torch.device = "cpu", strategy: str | None = None,
                 store_prefix: str = "", link=None, unit=None):
        self.host, self.port, self.member, self.timing = host, port, member, timing
        self.unit = unit  # a ReplicaUnit when this process is one lane of a replica group
        self.store_prefix, self.link = store_prefix, link  # link: the coordinator connection
        self.get_state, self.set_state, self.fr_dir, self.backend = get_state, set_state, fr_dir, backend
        self.device = torch.device(device)
        self.ctl = cp.Control(self._connect(), link.incarnation if link is not None else None)
        self.plane = dataplane.Plane(backend, self.ctl.store, timing.op_timeout_s, member,
                                     strategy, connect=self._connect)
        self.strategy, self.strategy_why = self.plane.strategy, self.plane.why
        self._prev = None  # (group, members) of the last epoch: shrink_group/reconfigure need it
        self.recorder = FlightRecorder()
        self.has_state = has_state
        self.pg = None
        self.epoch, self.rank, self.members, self.record = -1, -1, [], {}
        self.step = 0
        self.listeners: list[Callable[["ResilientGroup", list[int]], None]] = []
        self._torch_pg = None  # this epoch's ResilientProcessGroup, made on first use
        self.stats = {"max_call_s": 0.0, "recoveries": [], "epochs": [], "dumps": []}
        self._dumped: set[int] = set()
        self._heartbeat = cp.Heartbeat(self._connect(), member, timing.hb_interval_s)
        self.ctl.watch = self._heartbeat  # NOTE [the abort watch] in control

    def _connect(self):
        token = self.link.args["token"] if self.link is not None else None
        return cp.connect(self.host, self.port, prefix=self.store_prefix, token=token,
                          link=self.link)

    @property
    def step(self) -> StepCount:
        return StepCount(self._step, self)

    @step.setter
    def step(self, value: int) -> None:
        self._step = int(value)

    # -- construction --------------------------------------------------------------------
    @classmethod
    def from_env(cls, get_state, set_state, model=None, **kw) -> "ResilientGroup":
        """Join the job this process was started for: a ``Coordinator``'s when
        ``XVENDOR_COORDINATOR`` is set (see ``env``; ``model`` is fingerprinted so a replica
        with a different model is refused), else the ``Agent``'s (``xvendor run``).

        ``replica_group``: with several processes per replica group (HSDP, ``WORLD_SIZE`` >
        1), the replica group's own process group (default: the default group); its ranks
        are lanes that then share one verdict per step and one admission step (``lanes``)."""
        env = os.environ
        if env.get("XVENDOR_COORDINATOR"):
            from .env import join, link_from_env
            from .lanes import replica_group_from
            pg = replica_group_from(kw)
            return join(cls, link_from_env(model), get_state=get_state, set_state=set_state,
                        replica_group=pg, **kw)
        kw.pop("replica_group", None)  # xvendor run: one process per replica
        timing = Timing(**json.loads(env["XV_TIMING"])) if env.get("XV_TIMING") else Timing()
        args = dict(get_state=get_state, set_state=set_state, timing=timing,
                    fr_dir=env.get("XV_FR_DIR") or None, **kw)
        host, port = env["XV_STORE_HOST"], int(env["XV_STORE_PORT"])
        member = int(env["XV_MEMBER"]) if env.get("XV_MEMBER") else None
        if env.get("XV_ROLE", "founder") == "founder":
            return cls.found(host, port, member, **args)
        return cls.newcomer(host, port, member, **args)

    @classmethod
    def found(cls, host, port, member: int, known: tuple[int, dict] | None = None,
              **kw) -> "ResilientGroup":
        """A founding member: epoch 0 (written by the agent) lists it. ``known``: that
        epoch and its record, if the caller read them (NOTE [one read] in membership)."""
        self = cls(host, port, member, has_state=True, **kw)
        membership.converge(self, after=-1, t0=time.monotonic(), known=known)
        return self

    @classmethod
    def newcomer(cls, host, port, member: int | None = None, **kw) -> "ResilientGroup":
        """Queue for admission; return once admitted, with state received."""
        if member is None:
            link = kw.get("link")
            member = cp.Control(cp.connect(host, port, prefix=kw.get("store_prefix", ""),
                                           token=link and link.args["token"],
                                           link=link)).new_id()
        self = cls(host, port, member, has_state=False, **kw)
        self._queue(time.monotonic())
        return self

    def _queue(self, t0: float) -> None:
        """Claim a join slot, wait to be admitted at a step boundary, form the epoch."""
        member = self.member
        self.ctl.claim_join_slot(member)
        if self.unit is not None:  # admitted with the other lanes of its replica group
            self.unit.enqueue(member)
        while True:
            if self.ctl.is_dead(member):
                self._exclude(f"member {member} was declared dead while queued")
            latest = self.ctl.latest_epoch()
            rec = self.ctl.record(latest) or {"members": []}
            if member in rec["members"]:
                break
            if rec["members"] and set(rec["members"]) <= self.ctl.left():
                self._heartbeat.stop()
                raise RuntimeError(f"member {member}: every member of epoch {latest} has "
                                   "finished; nothing left to join")
            if time.monotonic() - t0 > self.timing.join_timeout_s:
                raise TimeoutError(f"member {member}: not admitted within "
                                   f"{self.timing.join_timeout_s} s (no step boundary reached?)")
            time.sleep(self.timing.slice_s)
        membership.converge(self, after=-1, t0=t0)
        self.stats["admitted_s"] = time.monotonic() - t0

    def reconnect(self) -> None:
        """After the coordinator was restarted: see ``env.reconnect``."""
        from .env import reconnect
        reconnect(self)

    def rejoin(self) -> "ResilientGroup":
        """After ``Excluded``: come back as a newcomer under a new id."""
        if self.unit is not None:  # its other lanes were not excluded: they cannot follow
            raise RuntimeError(f"member {self.member}: one lane of a replica group cannot "
                               "rejoin alone; exit, so that the launcher restarts the whole "
                               "replica group (it is admitted as one, lanes.py)")
        link = self.link.reopen() if self.link is not None else None
        return type(self).newcomer(self.host, self.port, link and link.member,
                                   get_state=self.get_state, set_state=self.set_state,
                                   timing=self.timing, fr_dir=self.fr_dir, backend=self.backend,
                                   device=self.device, strategy=self.plane.strategy,
                                   store_prefix=self.store_prefix, link=link)

    @property
    def size(self) -> int:
        return len(self.members)

    # -- collectives ---------------------------------------------------------------------
    def _stage(self, t: torch.Tensor) -> torch.Tensor:
        return Engine.stage(t, self.device)

    def all_reduce(self, t: torch.Tensor, op: str = "sum") -> torch.Tensor:
        buf = self._stage(t)
        o = dist.AllreduceOptions()
        o.reduceOp = _OPS[op]
        self._run("all_reduce", [buf], lambda: self.pg.allreduce([buf], o))
        return buf

    def broadcast(self, t: torch.Tensor, src: int = 0, _op: str = "broadcast") -> torch.Tensor:
        buf = self._stage(t)
        o = dist.BroadcastOptions()
        o.rootRank, o.rootTensor = src, 0
        self._run(_op, [buf], lambda: self.pg.broadcast([buf], o))
        return buf

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        src = self._stage(t)
        outs = [torch.empty_like(src) for _ in range(self.size)]
        self._run("all_gather", [src], lambda: self.pg.allgather([outs], [src]))
        return outs

    def reduce_scatter(self, inputs: list[torch.Tensor], op: str = "sum") -> torch.Tensor:
        if len(inputs) != self.size:
            raise ValueError(f"reduce_scatter: inputs must hold one tensor per rank "
                             f"({self.size}), got {len(inputs)}")
        if any(x.shape != inputs[0].shape for x in inputs):
            raise ValueError("reduce_scatter: inputs must all have one shape, got "
                             f"{[tuple(x.shape) for x in inputs]}")
        ins = [self._stage(x) for x in inputs]
        box = {}

        def launch():  # NOTE [gloo reduce_scatter] in dataplane: sliceable on every backend
            work, box["result"] = dataplane.reduce_scatter(self.pg, self.backend, self.rank,
                                                           ins, _OPS[op])
            return work
        self._run("reduce_scatter", ins, launch)
        return box["result"]()

    def barrier(self) -> None:
        self._run("barrier", [], lambda: self.pg.barrier(dist.BarrierOptions()))

    def engine(self) -> Engine:
        """This epoch's collective path (``engine``), shared with ``torch_group()``."""
        return Engine(self.ctl, self.epoch, self.member, self.rank, self.timing, self.recorder)

    def _run(self, op: str, tensors, launch) -> None:
        if self.pg is None:
            raise EpochAborted(f"member {self.member}: no group (call recover())")
        t0 = time.monotonic()
        try:  # this face raises: EpochAborted (an abort, or a failure: the epoch aborted)
            self.engine().run(op, tensors, launch)
        finally:
            self.stats["max_call_s"] = max(self.stats["max_call_s"], time.monotonic() - t0)

    def _wait(self, work, t0: float) -> None:
        sliced_wait(work, self.ctl, self.epoch, self.member, self.timing, t0)

    # -- step boundary: grow ---------------------------------------------------------------
    def commit_step(self) -> None:
        """Count a finished step and admit queued newcomers (all members agree via the store)."""
        self.step += 1
        self.ctl.store.set(cp.key_progress(self.member), str(self.step))
        k0 = n = self.record.get("joins", 0)
        if self.unit is not None:  # NOTE [one unit per replica group] in lanes.py
            joiners = self.unit.admissions(self.step)
        else:
            seen = len(self.ctl.joiners_from(k0))
            n = int(self.ctl.store.compare_set(cp.key_grow(self.epoch, self.step), "",
                                               str(seen)).decode())
            joiners, n = self.ctl.joiners_from(k0)[:n], k0 + n
        if not joiners:
            return
        t0 = time.monotonic()
        dead = self.ctl.dead()
        joiners = [j for j in joiners if j not in dead]
        self.ctl.propose(self.epoch + 1, {"members": self.members + joiners, "joins": n,
                                          "why": f"grow at step {self.step}: {joiners}"})
        old = self.epoch
        self._retire_current()
        membership.converge(self, after=old, t0=t0)
        self.stats["recoveries"].append({"kind": "grow", "s": time.monotonic() - t0,
                                         "epoch": self.epoch, "size": self.size})

    # -- failure: shrink -----------------------------------------------------------------
    def recover(self) -> None:
        """After ``EpochAborted``: agree on the survivors, form the next epoch, re-sync state."""
        t0 = time.monotonic()
        old = self.epoch
        if not (self.ctl.watch is not None and self.ctl.watch.aborted(old) is True):
            self.ctl.abort(old, f"member {self.member} entered recovery")  # else: set, and
            # seen without a request (NOTE [a failed member does not vote] in stepguard)
        self._retire_current()
        self._dump(old, self.members)  # every reachable rank dumps: the abort flag told them
        membership.converge(self, after=old, t0=t0)
        self.stats["recoveries"].append({"kind": "shrink", "s": time.monotonic() - t0,
                                         "epoch": self.epoch, "size": self.size})

    def torch_group(self):
        """This epoch's ``ResilientProcessGroup`` (a ``torch.distributed.ProcessGroup``)."""
        if self.pg is None:
            raise EpochAborted(f"member {self.member}: no group (call recover())")
        if self._torch_pg is None or self._torch_pg.epoch != self.epoch:
            from .torch_pg import ResilientProcessGroup, unregister
            if self._torch_pg is not None:
                unregister(self._torch_pg)
            self._torch_pg = ResilientProcessGroup(self)
        return self._torch_pg

    # -- leaving -------------------------------------------------------------------------
    def _retire_current(self) -> None:
        """Stop using the group. The data plane retires it when the next one exists (a
        shrink may build the next one from it); never used again either way."""
        if self.pg is not None:
            if self._prev is not None:
                self.plane.retire(self._prev[0])
            self._prev = (self.pg, self.members)
            self.pg = None

    def _dump(self, e: int, members: list[int], reason: str | None = None) -> None:
        if self.fr_dir is None or e in self._dumped:
            return
        self._dumped.add(e)
        why = reason or self.ctl.abort_reason(e) or "unknown"
        self.stats["dumps"].append(self.recorder.dump(
            self.fr_dir, member=self.member, epoch=e, members=members, reason=why,
            dead=self.ctl.dead(), lane=self.lane, incarnation=self.ctl.incarnation))

    @property
    def lane(self) -> int:
        """This process's lane (rank inside its replica group); 0 without a coordinator."""
        return int(self.link.args.get("lane", 0)) if self.link is not None else 0

    def _exclude(self, why: str):
        self._heartbeat.stop()
        self._retire_current()
        if self.epoch >= 0:
            self._dump(self.epoch, self.members, reason=why)
        # An excluded object is dropped by its caller (``rejoin`` makes a new one), so its
        # last group goes to the retirer now. Left to the garbage collector, a gloo group
        # whose op is stuck on a hung peer blocks in its destructor on whatever thread
        # collects it, until gloo's op timeout: measured, a SIGSTOPped-then-resumed process
        # that rejoined stalled its new epoch's first collective for 27.7 s that way.
        if self._prev is not None:
            self.plane.retire(self._prev[0])
            self._prev = None
        raise Excluded(why)

    def close(self) -> None:
        """Leave cleanly: the agent will not count this process's exit as a failure."""
        self.ctl.mark_left(self.member)
        self._heartbeat.stop()
        if self.link is not None:
            self.link.close()
