"""``ReplicaUnit``'s job-wide admission decision over a real TCPStore (l0: one process, the
decisions are pure store logic), plus the argument rules of ``replica_group``. The shared
verdict (a MIN over the replica group) and the whole protocol under races run on real
processes in tests/examples/test_train_hsdp.py."""

from datetime import timedelta

import pytest
import torch.distributed as dist

from xvendor.distributed import control as cp
from xvendor.distributed.lanes import ReplicaUnit, replica_group_from

pytestmark = pytest.mark.l0


@pytest.fixture
def job():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=10))
    return lambda: cp.Control(dist.PrefixStore("xvj/test/job/", store))


def units(job, inc: str, lanes: int = 2) -> list[ReplicaUnit]:
    """One ``ReplicaUnit`` per lane of one replica-group incarnation (each its own client)."""
    return [ReplicaUnit(None, job(), lane, inc, "cpu", lanes=lanes) for lane in range(lanes)]


def test_an_incarnation_is_admitted_only_once_every_lane_queued(job):
    survivor = units(job, "B/1")          # a live replica group deciding at boundaries
    new = units(job, "A/2")
    new[0].enqueue(10)
    assert survivor[0].admissions(5) == [] and survivor[1].admissions(5) == []
    new[1].enqueue(11)
    # whichever lane decides first, both read the one decision of step 6
    assert survivor[1].admissions(6) == [11]
    assert survivor[0].admissions(6) == [10]
    assert survivor[0].admissions(7) == [] and survivor[1].admissions(7) == []  # once only


def test_the_decision_of_a_step_is_written_once(job):
    survivor, new = units(job, "B/1"), units(job, "A/2")
    new[0].enqueue(10)
    assert survivor[0].admissions(3) == []      # lane 0 passed boundary 3: not complete yet
    new[1].enqueue(11)
    assert survivor[1].admissions(3) == []      # lane 1 at the same boundary: same answer,
    assert survivor[1].admissions(4) == [11]    # even though the group is complete by now
    assert survivor[0].admissions(4) == [10]


def test_a_dead_incarnations_entries_never_complete_a_later_one(job):
    survivor = units(job, "B/1")
    old, new = units(job, "A/aaaa"), units(job, "A/bbbb")   # the same group, restarted twice
    old[0].enqueue(10)                                      # ... died before lane 1 queued
    assert survivor[0].admissions(1) == []
    new[1].enqueue(12)
    assert survivor[0].admissions(2) == []                  # old lane 0 + new lane 1: no
    new[0].enqueue(13)
    assert survivor[1].admissions(3) == [12] and survivor[0].admissions(3) == [13]
    assert survivor[0].decision(3)["pending"] == {"A/aaaa": {"lanes": 2, "members": {"0": 10}}}


def test_two_incarnations_completing_together_are_admitted_together(job):
    survivor = units(job, "C/1", lanes=3)
    a, b = units(job, "A/1", lanes=3), units(job, "B/1", lanes=3)
    for lane in (2, 0, 1):
        a[lane].enqueue(20 + lane)
        b[lane].enqueue(30 + lane)
    assert [survivor[lane].admissions(9) for lane in range(3)] == \
           [[20, 30], [21, 31], [22, 32]]


def test_replica_group_rules(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    if dist.is_initialized():
        pytest.skip("a default process group exists in this process")
    with pytest.raises(ValueError, match="replica_group: WORLD_SIZE > 1"):
        replica_group_from({})
    monkeypatch.setenv("WORLD_SIZE", "1")
    kw = {"replica_group": None, "other": 1}
    assert replica_group_from(kw) is None and kw == {"other": 1}
