"""The data plane of one membership epoch: which mechanism builds the next communicator, chosen
from the backend's detected features, and the retirement of old ones.

Code paths (``choose``):

- ``fresh_group`` — a new ``ProcessGroupGloo`` (or NCCL group) over a fresh ``PrefixStore``
  ``xv/pg/<epoch>/``. Needs nothing from the old group, so a peer that hangs inside an old op
  cannot stall it. Used for gloo, and for every grow where no grow primitive exists.
- ``reconfigure`` — ``dist._reconfigure(uuid, handles)`` on the process's reconfigurable
  default group. nccl2 maps it to ncclCommShrink / ncclCommGrow on NCCL >= 2.29 or RCCL >=
  2.30.7 when ``TORCH_NCCL2_RECONFIGURE_SHRINK_GROW`` is on (chosen there for shrinks). On
  gloo it is opt-in (``strategy="reconfigure"``), for shrink and grow: tested with a kill -9
  and a replacement; not the default, see NOTE [gloo: fresh groups].
- ``shrink_group`` — ``dist.shrink_group(..., shrink_flags=SHRINK_ABORT)`` (NCCL >= 2.27):
  survivors abort the parent communicator (never destroy it); grow falls back to a fresh group.

NOTE [untested fast path]: the ``reconfigure`` and ``shrink_group`` paths run only with at
least two GPUs; none were present where this was written. They are selected by feature
detection and covered by l2 tests that skip elsewhere. gloo on loopback is what is tested.

Old groups are handed to a background thread and dropped only after the op timeout, when
any op stuck on a hung peer has timed out: dropping a gloo group joins its work threads,
and doing that on the training thread would block it (``destroy_process_group`` does).
"""

from __future__ import annotations

import datetime
import os
import queue
import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..rocm import rccl


@dataclass(frozen=True)
class Features:
    backend: str
    torch_version: str
    reconfigure_api: bool        # dist._reconfigure / _get_reconfigure_handle exist
    shrink_group_api: bool       # dist.shrink_group exists
    nccl_version: tuple | None   # NCCL (or RCCL's NCCL-compatible) version
    rccl: bool
    nccl2: bool                  # torch 2.15's rewritten NCCL backend is the "nccl" default
    comm_shrink: bool            # ncclCommShrink usable (NCCL >= 2.27)
    comm_grow: bool              # ncclCommGrow usable (NCCL >= 2.29, RCCL >= 2.30.7)
    shrink_grow_enabled: bool    # nccl2 told to map reconfigure onto shrink/grow


def detect(backend: str) -> Features:
    reconf = hasattr(dist, "_reconfigure") and hasattr(dist, "_get_reconfigure_handle")
    shrink = hasattr(dist, "shrink_group")
    nccl_v, is_rccl = None, False
    if backend in ("nccl", "nccl2", "rccl") and torch.cuda.is_available():
        nccl_v = tuple(torch.cuda.nccl.version())
        is_rccl = torch.version.hip is not None
    nccl2 = backend == "nccl2" or (backend == "nccl" and
                                   os.environ.get("TORCH_DIST_USE_NCCL2", "1") != "0")
    if is_rccl:
        grow = rccl.supports_comm_grow(rccl.version() or nccl_v)
        cshrink = rccl.supports_comm_shrink(rccl.version() or nccl_v)
    else:
        grow = nccl_v is not None and nccl_v >= (2, 29)
        cshrink = nccl_v is not None and nccl_v >= (2, 27)
    sg = os.environ.get("TORCH_NCCL2_RECONFIGURE_SHRINK_GROW", "0") not in ("0", "", "false")
    return Features(backend, torch.__version__, reconf, shrink, nccl_v, is_rccl, nccl2,
                    cshrink, grow, sg)


def choose(f: Features) -> tuple[str, str]:
    """(strategy, why) for a membership change on backend ``f.backend``."""
    if f.backend == "gloo":
        # NOTE [gloo: fresh groups]: gloo's reconfigure itself goes through with an op stuck
        # on a SIGSTOPped peer, but later ops on the reconfigured group were measured waiting
        # behind the stuck one (a SIGSTOP drill broke the call bound; 2 drills took 70 s
        # instead of 25). A fresh group shares no work queue with a stuck op.
        return ("fresh_group", "gloo: a fresh group over a fresh PrefixStore per epoch shares "
                "nothing with an op stuck on a hung peer (reconfigure: opt in, strategy=)")
    if f.nccl_version is None:
        return ("fresh_group", f"{f.backend}: no NCCL/RCCL version detected")
    if f.nccl2 and f.reconfigure_api and f.comm_shrink and f.comm_grow:
        return ("reconfigure", f"nccl2 reconfigure (NCCL {f.nccl_version}: ncclCommShrink + "
                "ncclCommGrow" + (", enabled" if f.shrink_grow_enabled else
                                  "; set TORCH_NCCL2_RECONFIGURE_SHRINK_GROW=1 to use them") + ")")
    if f.shrink_group_api and f.comm_shrink:
        return ("shrink_group", f"shrink_group + SHRINK_ABORT (NCCL {f.nccl_version} >= 2.27; "
                "no CommGrow: grow uses a fresh group)")
    return ("fresh_group", f"NCCL {f.nccl_version} has no ncclCommShrink (< 2.27)")


def gloo_group(store: dist.Store, epoch: int, rank: int, size: int,
               timeout_s: float) -> dist.ProcessGroupGloo:
    opts = dist.ProcessGroupGloo._Options()
    opts._devices = [dist.ProcessGroupGloo.create_device(
        hostname=os.environ.get("XV_GLOO_HOST", "127.0.0.1"))]
    opts._timeout = datetime.timedelta(seconds=timeout_s)
    return dist.ProcessGroupGloo(dist.PrefixStore(f"xv/pg/{epoch}/", store), rank, size, opts)


def nccl_fresh_group(store: dist.Store, epoch: int, rank: int, size: int, timeout_s: float):
    """A fresh NCCL group for one epoch (untested here: see NOTE [untested fast path])."""
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = datetime.timedelta(seconds=timeout_s)
    return dist.ProcessGroupNCCL(dist.PrefixStore(f"xv/pg/{epoch}/", store), rank, size, opts)


def nccl_shrink(pg, old_ranks_gone: list[int]):
    """Survivors only. SHRINK_ABORT stops the parent's in-flight ops; the parent is then
    aborted, never destroyed (destroy would wait on the dead peer). Untested here."""
    new = dist.shrink_group(old_ranks_gone, group=pg, shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    try:
        dist.distributed_c10d._abort_process_group(pg)
    except Exception:  # already aborted by SHRINK_ABORT on some versions
        pass
    return new


def reduce_scatter(pg, backend: str, rank: int, inputs: list, reduce_op):
    """Launch a reduce_scatter of ``inputs`` (one tensor per rank, equal shapes) on ``pg``:
    ``(work, result)``, where ``result()`` is this rank's reduced tensor once ``work`` is done.

    NOTE [gloo reduce_scatter]: on gloo, both reduce_scatter forms return a work whose
    ``wait(timeout)`` ignores the timeout: measured here (torch 2.15, 2 processes, the peer
    alive but never calling), ``wait(0.2 s)`` returned only when the peer exited 4 s later,
    while allreduce, allgather, broadcast and barrier raised after 0.2 s. One such wait
    would hold a sliced wait, and the call bound with it, for gloo's whole op timeout. So on
    gloo the reduce_scatter is an allreduce of the stacked inputs, keeping this rank's
    slice: twice the traffic of a ring reduce_scatter, and every wait sliceable."""
    if backend == "gloo":
        stacked = torch.stack(inputs)
        o = dist.AllreduceOptions()
        o.reduceOp = reduce_op
        return pg.allreduce([stacked], o), lambda: stacked[rank]
    out = torch.empty_like(inputs[0])
    o = dist.ReduceScatterOptions()
    o.reduceOp = reduce_op
    return pg.reduce_scatter([out], [inputs], o), lambda: out


MAX_MEMBERS = 4096  # member ids one job may hand out on the gloo reconfigure path


class Plane:
    """Builds each epoch's communicator with the chosen strategy; retires the previous one."""

    def __init__(self, backend: str, store: dist.Store, timeout_s: float, member: int,
                 strategy: str | None = None, connect=None):
        self.backend, self.store, self.timeout_s, self.member = backend, store, timeout_s, member
        self._connect = connect  # a new store client: reconfigure's rendezvous gets its own
        self.features = detect(backend)
        self.strategy, self.why = choose(self.features)
        if strategy is not None and strategy != self.strategy:
            self.strategy, self.why = strategy, f"{strategy}: requested"
        self.retirer = Retirer(timeout_s + 1.0)
        self.used: list[str] = []
        self._reconf_pg = None

    def form(self, e: int, rank: int, members: list[int], prev, prev_members: list[int], wait):
        """The group of epoch ``e``. ``prev`` is the last group (or None); ``wait(work)``
        waits in slices. A shrink keeps the survivors' old order, so it is a pure removal."""
        shrink = prev is not None and members == [m for m in prev_members if m in members]
        if shrink and self.strategy == "shrink_group":
            gone = [i for i, m in enumerate(prev_members) if m not in members]
            self.used.append("shrink_group")
            return nccl_shrink(prev, gone)
        if self.strategy == "reconfigure" and (self.backend == "gloo" or shrink):
            self.used.append("reconfigure")
            return self._reconfigure(e, rank, members, wait)
        self.retire(prev)
        self.used.append("fresh_group")
        if self.backend == "gloo":
            return gloo_group(self.store, e, rank, len(members), self.timeout_s)
        return nccl_fresh_group(self.store, e, rank, len(members), self.timeout_s)

    def _default_group(self):
        """This process's reconfigurable group: on gloo every process (a newcomer too) owns
        one from the start, so handles exist for shrink and grow alike."""
        if self._reconf_pg is None:
            if not dist.is_initialized():
                # NOTE [gloo reconfigure handles]: a gloo handle encodes the init rank and the
                # store ("gloo:<rank>:-1:<rank>:<host>:<port>"), and reconfigure meets peers
                # under the init store's prefix. So: one shared prefix, init rank = member id
                # (unique for ever), world size = a cap (init does not wait for the others).
                if self.member >= MAX_MEMBERS:
                    raise RuntimeError(f"member id {self.member} >= {MAX_MEMBERS}: the gloo "
                                       "reconfigure path needs a unique init rank below the cap")
                dist.init_process_group(
                    self.backend, store=dist.PrefixStore("xv/init/", self._connect()),
                    rank=self.member, world_size=MAX_MEMBERS, enable_reconfigure=True,
                    timeout=datetime.timedelta(seconds=self.timeout_s))
            self._reconf_pg = dist.distributed_c10d._get_default_group()
        return self._reconf_pg

    def _reconfigure(self, e: int, rank: int, members: list[int], wait):
        """Members swap fresh handles through the store (``xv/rh/<e>/<rank>``), then
        reconfigure in rank order (a list fixes the ranks); ``uuid`` is the epoch, fresh by
        construction. Measured on gloo here: works with an op still stuck on a SIGSTOPped
        peer. On NCCL it is untested (NOTE [untested fast path])."""
        pg = self._default_group()
        self.store.set(f"xv/rh/{e}/{rank}", dist._get_reconfigure_handle(pg))
        keys = [f"xv/rh/{e}/{r}" for r in range(len(members))]
        while not self.store.check(keys):
            time.sleep(0.002)
        handles = [v.decode() for v in self.store.multi_get(keys)]
        wait(dist._reconfigure(uuid=e + 1, handles=handles, group=pg,
                               timeout=datetime.timedelta(seconds=self.timeout_s)))
        return pg

    def retire(self, pg) -> None:
        if pg is not None and pg is not self._reconf_pg:  # a reconfigured group lives on
            self.retirer.retire(pg)


class Retirer:
    """Holds retired groups on a daemon thread until their stuck ops have timed out."""

    def __init__(self, hold_s: float):
        self.hold_s = hold_s
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="xv-retire", daemon=True)
        self._thread.start()
        self.retired = 0

    def retire(self, pg) -> None:
        if pg is not None:
            self._q.put((time.monotonic() + self.hold_s, pg))
            self.retired += 1

    def _run(self) -> None:
        while True:
            due, pg = self._q.get()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                pg.shutdown() if hasattr(pg, "shutdown") else None
            except Exception:
                pass
            del pg  # the last reference: its destructor runs here, off the training thread
