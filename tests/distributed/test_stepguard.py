"""The step verdict (``stepguard.verdict``) against a real TCPStore in this process (l1):
every member that reaches a verdict reaches the same one, whatever the order of votes,
failures and aborts. The guard around it is exercised by the DDP drills (test_ddp.py)."""

import threading
import time
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


def _every_member(one) -> None:
    """``one(m)`` for every member at once, on threads."""
    threads = [threading.Thread(target=one, args=(m,)) for m in MEMBERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def test_steps_and_epochs_are_separate_verdicts(store):
    assert vote_all(store, {m: True for m in MEMBERS}) == {m: True for m in MEMBERS}
    got = {}

    def one(m: int) -> None:  # epoch 1, same step number: a fresh verdict
        got[m] = verdict(member(store, m, epoch=1, step=5), m != 7)
    _every_member(one)
    assert got == {m: False for m in MEMBERS}


def test_a_dead_decider_is_replaced_by_one_late_claimant_not_by_every_waiter():
    """NOTE [late deciders] in membership: every vote is in and the count reached ``n``,
    but the member whose addition reached it died before posting the verdict (and nothing
    aborted the epoch). After ``hb_timeout_s`` one waiting member a round claims the
    decision and decides; the others keep waiting on the server for the verdict. Before,
    every waiting member checked all ``n`` votes on each wake-up (O(n^2) a step)."""
    from xvendor.distributed import authstore as A

    n, waiting = 40, 8
    wide: list[int] = []

    class KV(A.KV):
        def apply(self, op, f):
            if len(f) >= n:  # a CHECK or MGET of every vote
                wide.append(op)
            return super().apply(op, f)

    server = A.StoreServer("t0k3n-late", "127.0.0.1", 0, KV())
    try:
        members = list(range(n))
        dead_decider = cp.Control(A.LocalStore(server.kv, prefix="p"))
        got: dict[int, bool] = {}

        def one(m: int) -> None:
            ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, "t0k3n-late", prefix="p"))
            rg = types.SimpleNamespace(ctl=ctl, epoch=0, step=5, member=m, members=members,
                                       timing=Timing(hb_timeout_s=0.5))
            got[m] = verdict(rg, True)
        threads = [threading.Thread(target=one, args=(m,)) for m in range(waiting)]
        for t in threads:
            t.start()
        time.sleep(0.2)  # the waiting members voted (count 8 of 40)
        for m in range(waiting, n):  # the rest voted; the last of them died before deciding
            dead_decider.store.set(cp.key_vote(0, 5, m), "1")
        dead_decider.store.add(cp.key_vote_count(0, 5), n - waiting)
        t0 = time.monotonic()
        for t in threads:
            t.join(30)
        assert got == {m: True for m in range(waiting)}, got
        assert time.monotonic() - t0 < 0.5 + 1.0  # one round after hb_timeout_s
        assert len(wide) <= 2, wide  # one claimant: one check and one read of the votes
    finally:
        server.close()


def test_a_late_claim_is_one_member_a_round_and_the_next_round_replaces_it():
    """``LateDecider``: no claim before its round; one winner per round among the members
    that try; a winner that went away is replaced the next round; nothing before the count
    reached ``n``."""
    from xvendor.distributed import authstore as A
    from xvendor.distributed.membership import LateDecider

    kv = A.KV()
    store = A.LocalStore(kv, prefix="p")
    a = LateDecider(store, "cnt", "vote/0/1", 3, 1, 0.2)
    b = LateDecider(store, "cnt", "vote/0/1", 3, 2, 0.2)
    store.add("cnt", 3)
    assert not a.claims() and not b.claims()  # before the first round
    time.sleep(0.25)
    assert a.claims() and not b.claims()  # round 1: a won, b lost
    time.sleep(0.2)  # a went away without deciding; round 2
    assert b.claims()
    c = LateDecider(store, "cnt2", "vote/0/2", 3, 3, 0.05)
    time.sleep(0.06)
    assert not c.claims()  # the count has not reached n: nobody may decide yet


class _Counting:
    """A store client that counts its requests and the keys they name."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        fn = getattr(self.inner, name)
        if not callable(fn):
            return fn

        def call(*a, **k):
            self.calls.append((name, a[0] if a else None))
            return fn(*a, **k)
        return call


def test_a_failed_member_posts_redo_without_voting(store):
    """NOTE [a failed member does not vote]: a member whose collectives failed posts redo at
    once and aborts the epoch, unless its watch saw the flag already; it writes no vote and
    adds nothing to the count (7 requests before: vote, count, delete, abort, verdict read,
    abort check, verdict)."""
    rg = member(store, 7, step=5)
    rg.ctl.store = _Counting(rg.ctl.store)
    assert verdict(rg, False) is False
    names = [c[0] for c in rg.ctl.store.calls]
    assert names == ["compare_set", "delete_key", "compare_set"], names  # verdict, vote of
    # step 3, abort
    assert not store.check([cp.key_vote(0, 5, 7)]) and not store.check([cp.key_vote_count(0, 5)])
    assert cp.Control(store).aborted(0)
    # the others, voting after it, adopt the redo
    assert vote_all(store, {4: True, 9: True}) == {4: False, 9: False}
    # its watch saw the flag (the coordinator set it): the verdict and the old vote only
    rg2 = member(store, 9, epoch=1, step=1)
    rg2.ctl.watch = types.SimpleNamespace(aborted=lambda e: True)
    rg2.ctl.store = _Counting(rg2.ctl.store)
    assert verdict(rg2, False) is False
    assert [c[0] for c in rg2.ctl.store.calls] == ["compare_set"]
    assert not store.check([cp.key_abort(1)])


def test_a_decided_step_deletes_the_previous_steps_count_and_late_claim(store):
    """NOTE [one claim key a decision] in membership: once every vote of step ``s`` is in,
    the member that posts its verdict deletes step ``s - 1``'s count and late claim (a
    claim is one key a decision, its round in the value); the count of every step used to
    stay in the store for good, and a claim key a round."""
    for s in range(4):
        if s == 2:  # step 1's decision went late: its claim (as ``LateDecider`` writes it)
            store.set(cp.key_late("vote/0/1"), "1:4")
        got = {}

        def one(m: int) -> None:
            got[m] = verdict(member(store, m, step=s), True)
        _every_member(one)
        assert got == {m: True for m in MEMBERS}
        assert store.check([cp.key_vote_count(0, s)])  # this step's: still readable
        if s >= 1:
            assert not store.check([cp.key_vote_count(0, s - 1)]), s
    assert not store.check([cp.key_late("vote/0/1")])


def test_a_late_claim_is_one_key_per_decision():
    """NOTE [one claim key a decision]: rounds replace each other's claim in one key."""
    from xvendor.distributed import authstore as A
    from xvendor.distributed.membership import LateDecider, forget_decision

    kv = A.KV()
    store = A.LocalStore(kv, prefix="p")
    store.add("cnt", 2)
    a = LateDecider(store, "cnt", "vote/0/1", 2, 1, 1.0)
    b = LateDecider(store, "cnt", "vote/0/1", 2, 2, 1.0)
    time.sleep(1.05)
    assert a.claims() and not b.claims()
    time.sleep(1.0)
    assert b.claims() and not a.claims()  # round 2: b replaced a, a lost it
    claims = [k for k in kv._d if b"late/" in k]
    assert claims == [b"p/" + cp.key_late("vote/0/1").encode()], claims
    forget_decision(store, "cnt", "vote/0/1")
    assert not [k for k in kv._d if b"late/" in k or k.endswith(b"cnt")]
