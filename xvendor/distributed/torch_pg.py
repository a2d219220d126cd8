"""``ResilientProcessGroup``: one membership epoch of a ``ResilientGroup`` as a
``torch.distributed.ProcessGroup``, so DDP (and FSDP2, DeviceMesh) take it unchanged.

Every collective runs on the epoch's real group (gloo here; NCCL/RCCL where present) over
private copies, through the same path as ``ResilientGroup``'s own collectives (``engine``:
stage, record, launch, sliced wait, abort), and completes through a ``torch.futures.Future``
set by one waiter thread that waits in slices and reads the epoch's abort flag between slices (gloo's own waits are
not interruptible: a SIGSTOPped peer would hold DDP's reducer for the whole op timeout).

NOTE [latched errors]: a failed or aborted collective never raises into autograd (DDP's
reducer would be left half-done). The error is latched (``error``), the epoch is aborted
for everyone, the future completes with the caller's tensors left as they were, and every
later collective of this epoch completes at once without running. The step guard reads the
latch at the step boundary and redoes the step on the next epoch. Results are copied back
only on success; a retired group's stuck op can only ever write into its private copies.

One object per epoch: DDP divides gradients by the size the C++ base was built with, so a
new size needs a new group (``DDP._update_process_group``).

Verified here: gloo on CPU, real processes (tests/distributed/test_ddp.py). Not verified
here: the same over NCCL/RCCL (needs GPUs).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import Work

from . import control as cp
from . import dataplane
from .engine import Engine

_SUM = dist.ReduceOp.SUM
_names = itertools.count()


def _is_avg(op) -> bool:
    try:
        return op == dist.ReduceOp.AVG
    except Exception:
        return False


class _Pending(Work):
    """A collective in flight: done when the waiter thread sets the future."""

    def __init__(self, fut: torch.futures.Future):
        super().__init__()
        self._fut = fut

    def wait(self, timeout=None) -> bool:
        self._fut.wait()
        return True

    def get_future(self) -> torch.futures.Future:
        return self._fut

    def is_completed(self) -> bool:
        return self._fut.done()

    def is_success(self) -> bool:
        return True


class ResilientProcessGroup(dist.ProcessGroup):
    def __init__(self, rg):
        super().__init__(rg.rank, rg.size)
        self.epoch, self.member, self.timing = rg.epoch, rg.member, rg.timing
        self._inner, self._recorder, self._backend = rg.pg, rg.recorder, rg.backend
        self._ctl = cp.Control(rg._connect())  # the waiter's own store client
        # the group's own collective path, over the waiter's store client (``engine``)
        self._engine = Engine(self._ctl, rg.epoch, rg.member, rg.rank, rg.timing, rg.recorder)
        self.error: str | None = None
        self.launched_at: float | None = None   # monotonic time of the newest launch
        self.ops = 0
        self._q: queue.Queue = queue.Queue()
        self._name = f"xvendor_resilient_{next(_names)}_e{self.epoch}"
        threading.Thread(target=self._drain, name=f"xv-pg-wait-{self.epoch}",
                         daemon=True).start()
        _register(self)

    # -- identity -----------------------------------------------------------------------
    @property
    def group_name(self) -> str:
        return self._name

    def getBackendName(self) -> str:
        return "xvendor_resilient"

    def _get_backend_name(self) -> str:
        return "xvendor_resilient"

    def _stage(self, t: torch.Tensor) -> torch.Tensor:
        return Engine.stage(t)

    def __repr__(self) -> str:
        return (f"ResilientProcessGroup(epoch={self.epoch}, rank={self.rank()}, "
                f"size={self.size()}, error={self.error!r})")

    # -- the latching face over the engine ------------------------------------------------
    def _submit(self, op: str, tensors: list[torch.Tensor], launch, done, result) -> Work:
        """``launch()`` -> list of inner works over private copies; ``done()`` copies the
        results back (success only); ``result`` is the future's value. The engine stages
        nothing here (each collective made its copies), records, launches and, on the
        waiter thread, waits; whatever it raises is latched (NOTE [latched errors])."""
        fut = torch.futures.Future()
        if self.error is not None:  # NOTE [latched errors]: skip, complete at once
            fut.set_result(result)
            return _Pending(fut)
        try:
            flight = self._engine.launch(op, tensors, launch)
        except Exception as e:  # EpochAborted (the epoch is aborted), or the store is gone
            self._latch(str(e))
            fut.set_result(result)
            return _Pending(fut)
        self.launched_at, self.ops = time.monotonic(), self.ops + 1
        self._q.put((flight, done, fut, result))
        return _Pending(fut)

    def _drain(self) -> None:
        while True:
            flight, done, fut, result = self._q.get()
            if self.error is None:
                try:
                    self._engine.wait(flight, done)
                except Exception as e:  # anything latched: were this thread to die, every
                    # later future would stay pending and DDP would wait in backward for ever
                    self._latch(str(e))
            else:
                self._recorder.finish(flight.entry, "aborted")
            fut.set_result(result)

    def _latch(self, why: str) -> None:
        if self.error is None:
            self.error = why
            try:
                self._ctl.abort(self.epoch, f"member {self.member}: {why}")
            except Exception:  # the store is gone: the coordinator died; the guard says so
                pass

    # -- collectives --------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        avg = _is_avg(opts.reduceOp)  # gloo has no AVG: SUM, then divide on the way back
        o = dist.AllreduceOptions()
        o.reduceOp = _SUM if avg else opts.reduceOp
        bufs = [self._stage(t) for t in tensors]
        n = self.size()

        def done():
            for t, b in zip(tensors, bufs):
                t.copy_(b / n if avg else b)
        # one inner op per tensor: gloo's multi-tensor form wants equal sizes (coalesced
        # callers pass mixed ones)
        return self._submit("allreduce", tensors,
                            lambda: [self._inner.allreduce([b], o) for b in bufs], done, tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        o = dist.AllreduceOptions()
        if opts is not None:
            o.reduceOp = opts.reduceOp
        return self.allreduce(tensors, o)

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        bufs = [self._stage(t) for t in tensors]

        def done():
            for t, b in zip(tensors, bufs):
                t.copy_(b)
        return self._submit("broadcast", tensors,
                            lambda: [self._inner.broadcast([b], opts) for b in bufs], done, tensors)

    def allgather(self, output_lists, inputs, opts=None):
        outs = [[torch.empty_like(o) for o in ol] for ol in output_lists]
        ins = [self._stage(t) for t in inputs]

        def done():
            for ol, sl in zip(output_lists, outs):
                for o, s in zip(ol, sl):
                    o.copy_(s)
        return self._submit("allgather", inputs, lambda: [self._inner.allgather(outs, ins)],
                            done, output_lists)

    def _allgather_base(self, output, input, opts=None):
        return self._gather_into([output], [input])

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        return self._gather_into(outputs, inputs)

    def _gather_into(self, outputs, inputs):
        n = self.size()
        outs = [torch.empty_like(o) for o in outputs]
        ins = [self._stage(t) for t in inputs]

        def launch():  # into dim-0 chunks (contiguous views): needs only plain allgather
            return [self._inner.allgather([list(s.chunk(n))], [i]) for s, i in zip(outs, ins)]

        def done():
            for o, s in zip(outputs, outs):
                o.copy_(s)
        return self._submit("all_gather_single", inputs, launch, done, outputs)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        ins = [[self._stage(t) for t in il] for il in input_lists]
        return self._scatter(outputs, ins, opts, "reduce_scatter")

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        return self._scatter([output], [list(self._stage(input).chunk(self.size()))], opts,
                             "reduce_scatter_single")

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        n = self.size()
        return self._scatter(outputs, [list(self._stage(t).chunk(n)) for t in inputs], opts,
                             "reduce_scatter_single")

    def _scatter(self, outputs, in_lists, opts, op):
        avg, n = _is_avg(opts.reduceOp), self.size()
        reduce_op = _SUM if avg else opts.reduceOp
        launched = []  # (work, result) per output

        def launch():  # NOTE [gloo reduce_scatter] in dataplane: sliceable on every backend
            launched[:] = [dataplane.reduce_scatter(self._inner, self._backend, self.rank(),
                                                    il, reduce_op) for il in in_lists]
            return [work for work, _ in launched]

        def done():
            for t, (_, result) in zip(outputs, launched):
                s = result()
                t.copy_(s / n if avg else s)
        return self._submit(op, outputs, launch, done, outputs)

    def barrier(self, opts=None):
        return self._submit("barrier", [], lambda: [self._inner.barrier(dist.BarrierOptions())],
                            lambda: None, [])


def _register(pg: ResilientProcessGroup) -> None:
    """Enter the group in c10d's registry under its name, with ranks 0..size-1, so
    ``DeviceMesh.from_group`` and functional collectives can resolve it."""
    from torch.distributed import distributed_c10d as c10d
    try:
        pg._set_group_name(pg._name)
    except Exception:  # older bindings: the Python property still answers
        pass
    c10d._world.pg_names[pg] = pg._name
    c10d._world.pg_map[pg] = ("xvendor_resilient", None)
    c10d._world.pg_group_ranks[pg] = {r: r for r in range(pg.size())}
    c10d._register_process_group(pg._name, pg)


def unregister(pg: ResilientProcessGroup) -> None:
    """Drop a retired epoch's group from c10d's registry (it holds a reference to it)."""
    from torch.distributed import distributed_c10d as c10d
    for table in (c10d._world.pg_names, c10d._world.pg_map, c10d._world.pg_group_ranks):
        table.pop(pg, None)
    try:
        c10d._unregister_process_group(pg._name)
    except Exception:  # not registered (or already gone)
        pass


def device_mesh(pg: ResilientProcessGroup, device_type: str = "cpu",
                mesh_dim_name: str = "replicate"):
    """A 1-D ``DeviceMesh`` over one epoch's group (``rg.torch_group()``).

    NOTE [DeviceMesh.from_group]: torch 2.15's ``DeviceMesh.from_group(pg, ...)`` builds the
    mesh and then takes this process's coordinate from ``dist.get_rank()``, the *default*
    group's rank. A resilient job has no default group (each epoch is its own group), so it
    fails with "Default process group has not been initialized"; where one exists (HSDP: the
    replica group's own), its rank is the wrong one (rank r of a replica group is not rank r
    of its lane). This builds the same mesh as ``from_group`` (ranks 0..size-1, the group
    under its registered name) with the epoch rank given explicitly (``DeviceMesh``'s own
    ``_rank`` argument). A mesh belongs to one epoch: after a shrink or a grow, build a new
    one from the new ``torch_group()``. ``mesh.get_local_rank()`` (like ``dist.get_rank(pg)``)
    still asks c10d for the default group's rank: use ``mesh.get_coordinate()`` or
    ``pg.rank()``. Verified here (gloo, two single-process replica groups, one epoch;
    tests/distributed/test_torch_pg.py): DTensor ``Shard(0)`` -> full tensor and ``Partial``
    -> ``Replicate`` through it are exact, and ``fully_shard(model, mesh=device_mesh(pg))``
    trains: uneven shards, every all-gather / reduce-scatter through the resilient group, 4
    AdamW steps on each process's half of a fresh random batch within 2e-7 (gradients,
    relative) and 7e-8 (parameters) of a single-process fp64 run on the whole batch. Not
    verified: such a mesh across a shrink or grow. Nor does it make pure FSDP resilient: a
    dead rank's shards exist nowhere else, so that epoch cannot be shrunk around it; keep
    replicas whole (HSDP, docs) and put the resilient group on the replicate dimension.
    """
    from torch.distributed.device_mesh import DeviceMesh
    if not isinstance(pg, ResilientProcessGroup):
        raise TypeError(f"pg must be a ResilientProcessGroup (rg.torch_group()), got "
                        f"{type(pg).__name__}")
    mesh = DeviceMesh(device_type, torch.arange(pg.size(), dtype=torch.int),
                      mesh_dim_names=(mesh_dim_name,), _init_backend=False, _rank=pg.rank())
    mesh._dim_group_names = [pg.group_name]
    mesh._pg_registry[pg.group_name] = pg
    return mesh
