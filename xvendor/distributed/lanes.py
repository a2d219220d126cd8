"""The lanes of one replica group act as one unit: one verdict per step, one admission step.

With several processes per replica group (HSDP), rank ``r`` of every replica group forms
lane ``r``'s resilient group. Each lane has its own epochs, votes and verdicts, so left
alone two lanes could (a) admit a restarted replica group's ranks at different steps, or
(b) commit a step in one lane and redo it in another. Either leaves a replica group whose
shards are at different steps. ``ReplicaUnit`` closes both holes:

- verdict: after its lane's verdict, every rank ANDs it over the replica group's own process
  group (a MIN all-reduce). The step guard calls ``agree``.
- admission: a restarted replica group's ranks queue in one job-wide list (``enqueue``); at
  the boundary of step ``s`` every lane reads one job-wide decision ``admit/<s>`` (the first
  proposal wins, as for epochs) naming the replica-group incarnations admitted there, and
  admits its own rank of each. An incarnation is admitted only once all its lanes queued.

NOTE [one unit per replica group] (why this is consistent).
Invariant I: at a step boundary every live rank of every live replica group is at the same
committed step. It holds at epoch 0 (every founder starts at step 0 with synced state).
(b) Within lane r, every live member that settles step s does so in the same epoch e (they
voted there, and a verdict key is written once), so they all read the same verdict V_r. Each
live replica group has exactly one rank per lane, so each computes AND_r V_r over the same
values and gets the same C. A group that loses a rank cannot finish its MIN (it raises, and
its launcher restarts the group whole: its state is discarded), so every surviving rank of
every surviving group commits step s, or every one redoes it. I holds after the step.
(a) By I, the boundary of step s is passed once per job, by every lane. ``admit/<s>`` is
written once, and every decider builds it from ``admit/<s-1>`` (which exists: whoever
reaches boundary s passed boundary s-1 in this store, or s is the first boundary here) plus
the queue entries after it, so every lane admits the same incarnations at s. An incarnation
is listed only when every lane's rank queued, so each lane finds its joiner waiting. The
joiners of lane r receive lane r's state at step s: a restarted group starts whole at s.
Incarnation ids are drawn once per replica group start (rank 0 draws, the group broadcasts),
so a queue entry of an earlier, dead incarnation can never complete a later one.

Epoch 0 holds I too: the coordinator forms every lane's epoch 0 at once from the same replica
groups, those whose every lane arrived; the others join later, whole, as newcomers. A lane
that is excluded alone cannot rejoin alone (``rejoin`` raises): its group must restart.

A verdict on one rank of a replica group (a death, a hang, a straggler) is a verdict on the
group: the coordinator extends it to the group mates in the other lanes (``UnitRoster``,
NOTE [a replica group is evicted whole]).

Verified here: gloo on CPU, real processes, 2 replica groups x 2 lanes under torchrun, with
a rank killed between its lane's verdict and the other lane's, and a restarted group's ranks
queueing seconds apart; a whole group killed, a rank SIGSTOPped, a straggler, the coordinator
restarted (tests/examples/test_train_hsdp.py); the decisions over a real store
(tests/distributed/test_lanes.py); epoch 0 from whole groups (test_coordinator.py).
Not verified: NCCL/RCCL replica groups (the MIN then runs on the group's device).
"""

from __future__ import annotations

import json
import os
import secrets
import time

import torch
import torch.distributed as dist

from . import control as cp

KEY_QUEUE_SEQ = cp.ROOT + "queue_seq"


def key_queue(n: int) -> str: return f"{cp.ROOT}queue/{n}"
def key_admit(step: int) -> str: return f"{cp.ROOT}admit/{step}"


class ReplicaUnit:
    """This rank's view of its replica group as one unit (see the module docstring)."""

    def __init__(self, pg, job: cp.Control, lane: int, incarnation: str,
                 device: torch.device, lanes: int | None = None):
        self.pg, self.job, self.lane, self.incarnation = pg, job, lane, incarnation
        self.device = torch.device(device)
        self.lanes = lanes if lanes is not None else dist.get_world_size(pg)

    @classmethod
    def create(cls, pg, job: cp.Control, lane: int, replica: str,
               device: torch.device) -> "ReplicaUnit":
        """Collective over ``pg``: every rank of the replica group must call it."""
        if dist.get_rank(pg) != lane:
            raise ValueError(f"replica_group: this process is rank {dist.get_rank(pg)} of the "
                             f"replica group but lane {lane} (RANK) of the job: pass the "
                             "replica group's own process group, whose ranks are the lanes")
        box = [f"{replica}/{secrets.token_hex(8)}"]
        dist.broadcast_object_list(box, src=dist.get_global_rank(pg, 0), group=pg)
        return cls(pg, job, lane, box[0], device)

    # -- (b) one verdict --------------------------------------------------------------------
    def agree(self, commit: bool) -> bool:
        """AND of this step's lane verdicts over the replica group (every rank calls it once
        per settled step). Raises if a rank of the group died: the group restarts whole."""
        t = torch.tensor([1 if commit else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.pg)
        return bool(t.item())

    # -- (a) one admission step ---------------------------------------------------------------
    def enqueue(self, member: int) -> None:
        """A newcomer of this incarnation, lane ``self.lane``, is waiting as ``member``."""
        delay = float(os.environ.get("XV_DRILL_ENQUEUE_DELAY_S") or 0)
        if delay > 0:  # drill hook: this lane queues late (the admission race, made certain)
            time.sleep(delay)
        n = int(self.job.store.add(KEY_QUEUE_SEQ, 1)) - 1
        self.job.store.set(key_queue(n), json.dumps(
            {"inc": self.incarnation, "lane": self.lane, "member": member,
             "lanes": self.lanes}))

    def admissions(self, step: int) -> list[int]:
        """Member ids this lane admits at the boundary of ``step`` (the job-wide decision)."""
        d = self.decision(step)
        return [int(m[str(self.lane)]) for _, m in sorted(d["admit"].items())]

    def decision(self, step: int) -> dict:
        store = self.job.store
        raw = self.job.get(key_admit(step))
        if raw is not None:
            return json.loads(raw)
        prev = self.job.get(key_admit(step - 1))
        prev = json.loads(prev) if prev else {"seen": 0, "pending": {}}
        pending = {inc: {"lanes": p["lanes"], "members": dict(p["members"])}
                   for inc, p in prev["pending"].items()}
        seen, n = prev["seen"], int(store.add(KEY_QUEUE_SEQ, 0))
        while seen < n and store.check([key_queue(seen)]):  # stop at one between add and set
            e = json.loads(store.get(key_queue(seen)))
            p = pending.setdefault(e["inc"], {"lanes": e["lanes"], "members": {}})
            p["members"][str(e["lane"])] = e["member"]
            seen += 1
        admit = {inc: p["members"] for inc, p in pending.items()
                 if len(p["members"]) >= p["lanes"]}
        rest = {inc: p for inc, p in pending.items() if inc not in admit}
        mine = json.dumps({"admit": admit, "pending": rest, "seen": seen})
        return json.loads(store.compare_set(key_admit(step), "", mine).decode())

    def rebind(self, job: cp.Control) -> None:
        """After a coordinator restart: the job-wide keys live in the new store."""
        self.job = job


def replica_group_from(kw: dict):
    """Pop ``replica_group`` from ``from_env``'s keywords. Default: the default process group
    when it spans more than one process (torchrun's ``WORLD_SIZE`` > 1)."""
    pg = kw.pop("replica_group", "auto")
    if isinstance(pg, str) and pg == "auto":
        pg = dist.group.WORLD if dist.is_initialized() and dist.get_world_size() > 1 else None
    if pg is None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("replica_group: WORLD_SIZE > 1 means several processes per replica "
                         "group (lanes), which must share verdicts and admissions: initialise "
                         "the replica group's process group before from_env(), or pass "
                         "replica_group=<its ProcessGroup>")
    return pg if pg is not None and dist.get_world_size(pg) > 1 else None


class UnitRoster:
    """The coordinator's side of the unit: which processes form each replica-group
    incarnation, so that a verdict on one of them is extended to the others.

    NOTE [a replica group is evicted whole]: a lane's verdict names one process, but its
    replica group cannot go on without it: the group's own collectives (FSDP's all-gathers
    and reduce-scatters, ``agree``) need every rank. Left a member of its lane, a mate of a
    hung or evicted process stays connected and heartbeating while it sits in those
    collectives (until the group's op timeout), so its lane cannot shrink around it and every
    healthy group stalls with it. Measured here before this rule (the SIGSTOP drill in
    tests/examples/test_train_hsdp.py): the healthy group resumed 61 s after the SIGSTOP,
    the replica group's gloo timeout. So the mates are declared dead too, with the reason;
    they find themselves excluded, exit, and the launcher restarts the group, which is
    admitted again as one unit. A mate that already left cleanly is not declared."""

    def __init__(self):
        self._unit_of: dict[tuple[int, int], dict] = {}   # (lane, member) -> incarnation
        self._units: dict[tuple[str, int], dict] = {}     # (replica, restart) -> newest
        self.who: dict[tuple[int, int], str] = {}         # (lane, member) -> for the log
        self._settled: set[tuple[int, int]] = set()

    def admit(self, lane: int, member: int, replica: str, restart: int, lanes: int) -> None:
        self.who[(lane, member)] = f"replica {replica!r}, restart {restart}"
        if lanes <= 1:
            return
        unit = self._units.get((replica, restart))
        if unit is None or lane in unit["lanes"]:  # a new incarnation under an old name
            unit = self._units[(replica, restart)] = {"replica": replica, "restart": restart,
                                                      "lanes": {}}
        unit["lanes"][lane] = member
        self._unit_of[(lane, member)] = unit

    def settle(self, lanes: dict, lane_of, log) -> None:
        """Log each new verdict in ``lanes`` (index -> the coordinator's lane record) and
        declare its group mates dead through ``lane_of(index)``'s verdicts."""
        changed = True
        while changed:
            changed = False
            for lane in list(lanes.values()):
                for member, why in list(lane.verdicts.deaths.items()):
                    if (lane.index, member) in self._settled:
                        continue
                    self._settled.add((lane.index, member))
                    changed = True
                    log(f"lane {lane.index}: member {member} "
                        f"({self.who.get((lane.index, member), 'unknown')}) declared dead: {why}")
                    unit = self._unit_of.get((lane.index, member), {"lanes": {}})
                    for r, mate in unit["lanes"].items():
                        other = lane_of(r)
                        if r == lane.index or other.ctl.store.check([cp.key_left(mate)]):
                            continue
                        other.verdicts.declare(
                            mate, f"replica group {unit['replica']!r} (restart "
                                  f"{unit['restart']}) lost its lane {lane.index} (member "
                                  f"{member}: {why}); a lane cannot go on alone: evicted with it")
