"""HSDP with resilient replica groups: a small MoE transformer (experts run through
``xvendor.grouped_mm``), ``fully_shard`` inside each replica group, gradients averaged across
replica groups through xvendor's resilient group, state handed to a restarted replica group
with DCP's ``get_state_dict`` / ``set_state_dict`` (optimizer state included).

One ``torchrun`` per replica group (its processes shard the model among themselves); the
xvendor coordinator outside all of them::

    xvendor coordinator --port 29400 --min-replicas 2 &          # XVENDOR_TOKEN set
    XVENDOR_COORDINATOR=127.0.0.1:29400 XVENDOR_REPLICA_ID=0 \\
      torchrun --nproc-per-node 2 --max-restarts 3 --rdzv-backend c10d \\
               --rdzv-endpoint 127.0.0.1:29500 examples/elastic/train_hsdp.py --steps 100
    # ... and the same with XVENDOR_REPLICA_ID=1 and another --rdzv-endpoint port

How the two levels meet. Rank r of every replica group holds the same shard, so "lane" r's
resilient group (the ranks r of all replica groups, formed by the coordinator) averages
that shard's gradient: ``FSDPModule.set_all_reduce_hook`` (on every FSDP module) launches
the all-reduce of the reduce-scattered shard through the lane's ``ResilientProcessGroup``,
and the step waits for them after backward. A failed all-reduce is latched there, never
raised into autograd; ``with rg.step(optimizer):`` then redoes the step on a new epoch.
The lanes of a replica group act as one unit (``from_env`` sees the replica group's process
group; ``xvendor.distributed.lanes``): one commit/redo verdict per step for all of them,
and a restarted group's ranks admitted at one step by every lane.
Stepping one shard and not another would leave the group's shards at different steps. A
restarted replica group's ranks receive their own shard's parameters and optimizer state
from the oldest survivor of their lane.

Pure FSDP across replica groups could not shrink (a dead rank's shards are gone); HSDP can,
because every replica group holds the whole model.

Verified here (tests/examples/test_train_hsdp.py, CPU, gloo): 2 replica groups x 2 processes,
each group under its own torchrun; one worker SIGKILLed after 8 steps; the other group
trains on alone, torchrun restarts the killed group, it rejoins with its shards' parameters
and AdamW state, and every rank ends bit-identical (parameters + optimizer state) to a
failure-free run (with 1 or 2 replica groups in every epoch: exactly when that holds is
NOTE [same data in every replica group]). The same with the race the lanes must not lose: a rank killed after the
other lane reached its verdict and before its own lane voted (``--die-before-vote``), and
the restarted group's ranks queueing 3 s apart (``--delay-join``): both lanes of the
surviving group redo that step together and the restarted ranks are admitted at one step.
And, each run ending as the failure-free run does: both processes of a group SIGKILLed at
once; a rank SIGSTOPped (the coordinator's heartbeat verdict evicts its whole group, the
other group resumes within the call bound, the stopped rank exits excluded after SIGCONT
and its group rejoins); a straggler (``--slow``: its group is evicted as one, named with
the reason); the coordinator SIGKILLed and restarted (every rank reconnects, no restart).
Not verified here: GPUs (the intra-group backend would be NCCL/RCCL) and several nodes per
replica group.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

import xvendor
from xvendor.distributed import EpochAborted, Excluded, ResilientGroup


# -- the model ------------------------------------------------------------------------------
class MoE(nn.Module):
    """Top-1 routed experts: tokens sorted by expert, one ``grouped_mm`` per projection."""

    def __init__(self, dim: int, hidden: int, experts: int):
        super().__init__()
        self.router = nn.Linear(dim, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, dim, hidden) * dim ** -0.5)
        self.w_out = nn.Parameter(torch.randn(experts, hidden, dim) * hidden ** -0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        gate, expert = self.router(flat).softmax(-1).max(-1)
        order = expert.argsort(stable=True)
        offs = torch.bincount(expert, minlength=self.w_in.shape[0]).cumsum(0).to(torch.int32)
        h = F.silu(xvendor.grouped_mm(flat[order], self.w_in, offs=offs))
        out = xvendor.grouped_mm(h, self.w_out, offs=offs)
        y = torch.empty_like(flat).index_copy(0, order, out)
        return (y * gate[:, None]).reshape(x.shape)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, experts: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.moe = MoE(dim, 2 * dim, experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.moe(self.norm2(x))


class TinyMoE(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, experts=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, experts) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def batch(step: int, rank: int, seq: int = 32, group_seed: int = 0) -> torch.Tensor:
    """Rank r's micro-batch of a step. NOTE [same data in every replica group]: by default
    it does not depend on the replica group, so every group contributes the same gradient
    g and the cross-group average is sum(g, ..., g) / k over the k groups of the epoch. That
    is g exactly, so a run with failures ends bit-identical to one without (the test's
    check that no step was lost or applied twice), when the fp32 sum and division return
    g: always for k = 1 and k = 2 (g + g and / 2 are exact); for k = 4 in every case
    measured (1,000,000 random values, partial sums g, 2g, 3g, 4g as gloo's ring forms
    them), not proven; otherwise not (k = 3: 14.6% of elements differ, k = 8: 43.6%). The
    test runs 2 groups, so its membership goes 2 -> 1 -> 2. A real job shards its data by
    replica group as well (``--data-by-group``: ``group_seed`` differs per group; then only
    the replicas' agreement with each other can be checked)."""
    g = torch.Generator().manual_seed(10_000 * step + rank + 1_000_000 * group_seed)
    return torch.randint(0, 256, (4, seq + 1), generator=g)


# -- state: this rank's shard, as plain tensors -----------------------------------------------
def local_state(model: nn.Module, opt: torch.optim.Optimizer) -> dict:
    """The shard this rank holds (parameters and optimizer state), as local tensors: they
    travel through ``torch.save`` to the same rank of a restarted replica group."""
    msd, osd = get_state_dict(model, opt)
    def local(v):  # copies: the receiver must never share a tensor with this optimizer
        if isinstance(v, DTensor):
            return v.to_local().clone()
        return v.clone() if isinstance(v, torch.Tensor) else v
    return {"model": {k: local(v) for k, v in msd.items()},
            "optim": {"state": {fqn: {k: local(v) for k, v in s.items()}
                                for fqn, s in osd["state"].items()},
                      "param_groups": osd["param_groups"]}}


def load_local_state(model: nn.Module, opt: torch.optim.Optimizer, state: dict) -> None:
    """Inverse of ``local_state``: local shards back into DTensors laid out as this rank's
    parameters (optimizer state tensors shaped like a parameter's shard share its layout)."""
    params = {k: v for k, v in get_state_dict(model, opt)[0].items() if isinstance(v, DTensor)}

    def dtensor(fqn: str, t):
        p = params.get(fqn)
        if p is None or not isinstance(t, torch.Tensor) or t.shape != p.to_local().shape:
            return t
        return DTensor.from_local(t, p.device_mesh, p.placements, shape=p.shape,
                                  stride=p.stride(), run_check=False)

    msd = {k: dtensor(k, v) for k, v in state["model"].items()}
    osd = {"state": {fqn: {k: dtensor(fqn, v) for k, v in s.items()}
                     for fqn, s in state["optim"]["state"].items()},
           "param_groups": state["optim"]["param_groups"]}
    set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)


def shard_hash(model: nn.Module, opt: torch.optim.Optimizer) -> str:
    h = hashlib.sha256()
    s = local_state(model, opt)
    for k in sorted(s["model"]):
        h.update(s["model"][k].cpu().numpy().tobytes())
    for fqn in sorted(s["optim"]["state"]):
        for k, v in sorted(s["optim"]["state"][fqn].items()):
            h.update(v.cpu().numpy().tobytes() if isinstance(v, torch.Tensor)
                     else repr(v).encode())
    return h.hexdigest()[:16]


# -- the cross-replica hook --------------------------------------------------------------------
class CrossReplicaMean:
    """The FSDP all-reduce hook: average each reduce-scattered gradient shard across replica
    groups through the lane's ``ResilientProcessGroup``, launched without waiting (``wait``
    after backward). A failure is latched by the group, never raised into autograd; the step
    guard reads it at the step boundary (the shard then keeps its local gradient, unused: the
    step is redone).

    NOTE [why the hook does not wait]: a blocking all-reduce per FSDP module would make every
    replica group wait for the slowest at each module's hook, so the time each member reports
    to the coordinator (step start to its last collective launch) would be the slowest
    group's for everyone, and no straggler could stand out. Launched asynchronously, each
    member's launches follow its own compute, as DDP's bucket all-reduces do, and the
    all-reduces overlap the rest of backward. It relies on FSDP2 (torch 2.15) making the
    sharded gradients views of the buffer the hook receives (no cast: reduce and parameter
    dtypes equal), so the averaged result written into it later is what the optimizer sees;
    ``wait`` checks, on the first step every hook ran, that each parameter's gradient is a
    view of a buffer this hook averaged, which also proves that no parameter's gradient
    skipped the average (the layout is fixed once FSDP has built its buffers)."""

    def __init__(self, rg: ResilientGroup, model: nn.Module):
        self.rg, self.model, self.pending, self.skipped = rg, model, [], False
        self.checked = False

    def __call__(self, shard_grad: torch.Tensor) -> None:
        try:
            pg = self.rg.torch_group()
        except EpochAborted:          # the epoch is already gone: the step will be redone
            self.skipped = True
            return
        work = dist.all_reduce(shard_grad, op=dist.ReduceOp.AVG, group=pg, async_op=True)
        self.pending.append((shard_grad, work))

    def wait(self) -> None:
        """Every launched all-reduce has ended (succeeded or latched): call after backward."""
        buffers = {t.untyped_storage().data_ptr() for t, _ in self.pending}
        for _, work in self.pending:
            work.wait()
        skipped, self.pending, self.skipped = self.skipped, [], False
        if skipped or self.checked:   # skipped: a hook found no epoch, the step is redone
            return
        self.checked = True
        for name, p in self.model.named_parameters():
            g = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            if g is not None and g.untyped_storage().data_ptr() not in buffers:
                raise RuntimeError(f"{name}: its gradient is not a view of the buffer the "
                                   "FSDP all-reduce hook averaged (NOTE [why the hook does "
                                   "not wait]): this torch's FSDP changed; average in the "
                                   "hook synchronously instead")


def fault_here(spec: str | None, step: int | None = None) -> float | None:
    """Fault injection for the drill (``--fault REPLICA:RANK:RESTART:AT``): the number AT
    when this process is that replica group's rank in that incarnation (and, with ``step``,
    AT equals it), else None."""
    if not spec:
        return None
    replica, rank, restart, at = spec.split(":")
    env = os.environ
    mine = (env.get("XVENDOR_REPLICA_ID") == replica and env.get("RANK") == rank
            and env.get("TORCHELASTIC_RESTART_COUNT", "0") == restart)
    if not mine or (step is not None and int(float(at)) != step):
        return None
    return float(at)


# -- training ---------------------------------------------------------------------------------
def init_replica_group(backend: str) -> None:
    """The replica group's own process group, over torchrun's store.

    NOTE [torchrun restart and stale keys]: measured here (torch 2.15, gloo), after torchrun
    restarts its workers a plain ``init_process_group("gloo")`` reads the previous
    incarnation's addresses from the agent's store (it is kept across restarts and the keys
    carry no attempt number) and fails with "connectFullMesh ... Connection refused". Keying
    the group's rendezvous by ``TORCHELASTIC_RESTART_COUNT`` gives every incarnation fresh keys.
    """
    env = os.environ
    store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=60))
    attempt = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(backend, store=dist.PrefixStore(f"hsdp/attempt{attempt}", store),
                            rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]),
                            timeout=timedelta(seconds=60))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--out", help="directory for per-rank progress and result lines (JSON)")
    p.add_argument("--step-sleep", type=float, default=0.0, help="extra seconds per step")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda: one GPU per process, NCCL/RCCL inside and across replica "
                        "groups (not run here); auto: cuda if torch sees a GPU, else cpu/gloo")
    p.add_argument("--hash-every-step", action="store_true",
                   help="log a hash of this rank's shard (parameters + optimizer state) "
                        "before each step (for checking replicas against each other)")
    p.add_argument("--die-before-vote", metavar="REPLICA:RANK:RESTART:STEP",
                   help="drill: that process SIGKILLs itself 1 s after finishing STEP's "
                        "backward, before its lane votes (the other lane has decided by then)")
    p.add_argument("--delay-join", metavar="REPLICA:RANK:RESTART:SECONDS",
                   help="drill: that process queues for admission SECONDS after the rest of "
                        "its replica group (inside from_env, after the group met)")
    p.add_argument("--data-by-group", action="store_true",
                   help="each replica group trains on its own data (seeded by "
                        "XVENDOR_REPLICA_ID) instead of the same data in every group")
    p.add_argument("--slow", metavar="REPLICA:RANK:RESTART:SECONDS",
                   help="drill: that process sleeps SECONDS at the start of every step (a "
                        "straggler; its group mates wait for it in the group's collectives)")
    a = p.parse_args(argv)

    # NOTE [devices]: on cpu everything is gloo (what the test runs); on cuda (ROCm included)
    # the replica group and the lanes use NCCL/RCCL, a path not run on this CPU-only machine.
    use_cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if use_cuda else \
        torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    # the replica group's own process group (torchrun's env): FSDP shards over it
    init_replica_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("shard",))
    torch.manual_seed(0)                          # the same initial model in every group
    model = TinyMoE().to(device)
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)

    delay = fault_here(a.delay_join)
    if delay:
        os.environ["XV_DRILL_ENQUEUE_DELAY_S"] = str(delay)   # read by ReplicaUnit.enqueue
    # The default group (this replica group) makes this rank one lane of a unit: the lanes
    # share one verdict per step and one admission step (xvendor.distributed.lanes).
    rg = ResilientGroup.from_env(get_state=lambda: local_state(model, opt),
                                 set_state=lambda s: load_local_state(model, opt, s),
                                 model=model, device=device,
                                 backend="nccl" if use_cuda else "gloo")
    # NOTE [a hook per FSDP module]: set_all_reduce_hook covers only the parameters of the
    # module it is called on (its own param group), not its fully_shard-ed children: set on
    # the root alone, the blocks' gradients were never averaged across replica groups
    # (found by the aliasing check in CrossReplicaMean.wait; invisible to the drills, whose
    # data is the same in every group).
    cross = CrossReplicaMean(rg, model)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_all_reduce_hook(cross)
    slow = fault_here(a.slow)
    group_seed = 1 + zlib.crc32(os.environ.get("XVENDOR_REPLICA_ID", "").encode()) \
        if a.data_by_group else 0
    log = open(os.path.join(a.out, f"rank{rank}_{os.environ.get('XVENDOR_REPLICA_ID', 'r')}"
                                   f"_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}.jsonl"),
               "a", buffering=1) if a.out else None
    try:
        while rg.step < a.steps:
            step = int(rg.step)
            before = shard_hash(model, opt) if a.hash_every_step else None
            with rg.step(opt) as guard:
                if slow:
                    time.sleep(slow)
                opt.zero_grad(set_to_none=True)
                tokens = batch(step, rank, group_seed=group_seed).to(device)
                logits = model(tokens[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       tokens[:, 1:].reshape(-1))
                loss.backward()
                cross.wait()
                time.sleep(a.step_sleep)
                if fault_here(a.die_before_vote, step) is not None:
                    time.sleep(1.0)   # the other lane votes and reaches its verdict meanwhile
                    os.kill(os.getpid(), signal.SIGKILL)
            if log:
                log.write(json.dumps({"step": step, "committed": guard.committed,
                                      "lane_commit": guard.lane_commit,
                                      "members": len(rg.members), "loss": loss.item(),
                                      "before": before, "t": time.time()}) + "\n")
    except Excluded as e:
        # Declared dead (a hang seen by heartbeat, a straggler, or a group mate lost): one
        # lane cannot rejoin alone (lanes.py), so leave with an error; torchrun restarts the
        # whole replica group, which is admitted again as one unit.
        if log:
            log.write(json.dumps({"excluded": str(e), "t": time.time()}) + "\n")
        print(f"rank {rank}: excluded ({e}); exiting so that the replica group restarts",
              file=sys.stderr, flush=True)
        os._exit(3)  # skip teardown: the group's other rank may be gone or stuck
    result = {"rank": rank, "step": int(rg.step), "hash": shard_hash(model, opt),
              "pid": os.getpid(), "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))}
    if log:
        log.write(json.dumps({"done": result}) + "\n")
    print(json.dumps(result), flush=True)
    rg.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
