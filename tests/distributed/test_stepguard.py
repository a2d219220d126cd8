"""The step verdict (``stepguard.verdict``) against a real TCPStore in this process (l1):
every member that reaches a verdict reaches the same one, whatever the order of votes,
failures and aborts. The guard around it is exercised by the DDP drills (test_ddp.py)."""

import threading
import types

import pytest
import torch.distributed as dist

from xvendor.distributed import Timing
from xvendor.distributed import control as cp
from xvendor.distributed.stepguard import verdict

pytestmark = pytest.mark.l1

MEMBERS = [4, 7, 9]


@pytest.fixture
def store():
    s = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    yield s


def member(store, m: int, epoch=0, step=5):
    client = cp.connect("127.0.0.1", store.port)
    return types.SimpleNamespace(ctl=cp.Control(client), epoch=epoch, step=step, member=m,
                                 members=MEMBERS, timing=Timing(hb_timeout_s=1.0))


def vote_all(store, oks: dict[int, bool]) -> dict[int, bool]:
    got: dict[int, bool] = {}
    def one(m: int, ok: bool) -> None:
        got[m] = verdict(member(store, m), ok)
    threads = [threading.Thread(target=one, args=(m, ok)) for m, ok in oks.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return got


def test_all_ok_commits_everywhere(store):
    assert vote_all(store, {m: True for m in MEMBERS}) == {m: True for m in MEMBERS}


def test_one_failed_collective_means_redo_everywhere(store):
    got = vote_all(store, {4: True, 7: False, 9: True})
    assert got == {m: False for m in MEMBERS}
    assert cp.Control(store).aborted(0)  # the failing member stopped the epoch for all


def test_a_member_dead_before_voting_means_redo_and_a_late_voter_adopts_it(store):
    ctl = cp.Control(store)
    ctl.abort(0, "member 9 dead")  # what the coordinator posts for a member that died
    got = vote_all(store, {4: True, 7: True})
    assert got == {4: False, 7: False}
    # a slow member that still reaches the boundary cannot turn the verdict into a commit
    assert verdict(member(store, 9), True) is False


def test_votes_complete_before_an_abort_commit(store):
    got = vote_all(store, {m: True for m in MEMBERS})
    cp.Control(store).abort(0, "member 9 died after voting")
    assert got == {m: True for m in MEMBERS}
    assert verdict(member(store, 4), True) is True  # the verdict is written once


def test_steps_and_epochs_are_separate_verdicts(store):
    assert vote_all(store, {m: True for m in MEMBERS}) == {m: True for m in MEMBERS}
    got = {}

    def one(m: int) -> None:  # epoch 1, same step number: a fresh verdict
        got[m] = verdict(member(store, m, epoch=1, step=5), m != 7)
    threads = [threading.Thread(target=one, args=(m,)) for m in MEMBERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == {m: False for m in MEMBERS}
