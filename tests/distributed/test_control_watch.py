"""NOTE [the abort watch] (``control.Heartbeat``): a member reads its epoch's abort flag
from the heartbeat thread's server-side wait, not with a store request per slice; the
flag is seen within a beat of being set, the beats go on while the wait is held, and the
watch moves on when the next epoch is proposed or stops with the heartbeat."""

import contextlib
import threading
import time

import pytest

from xvendor.distributed import authstore as A
from xvendor.distributed import control as cp

TOKEN = "t0k3n-watch"


class CountingKV(A.KV):
    """Counts the requests that test an abort flag (what a slice of a collective costs)
    and those that read one's value (a reason read)."""

    def __init__(self):
        super().__init__()
        self.abort_reads = self.abort_gets = 0

    def apply(self, op, f):
        if op in (A.CHECK, A.GET) and any(b"/abort/" in k for k in f):
            if op == A.CHECK:
                self.abort_reads += 1
            else:
                self.abort_gets += 1
        return super().apply(op, f)


@contextlib.contextmanager
def _watched(wait_for):
    """A store server counting abort reads, member 3's control plane with its heartbeat's
    watch armed on epoch 0 (one request to look before it was), and another client."""
    kv = CountingKV()
    server = A.StoreServer(TOKEN, "127.0.0.1", 0, kv)
    try:
        other = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        hb = cp.Heartbeat(A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p"), 3, 0.05)
        ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p"))
        ctl.watch = hb
        assert ctl.aborted(0) is False
        wait_for(lambda: hb._armed == 0)
        yield kv, ctl, other, hb
    finally:
        server.close()


@pytest.mark.l1
def test_the_abort_flag_is_read_from_the_heartbeat_wait_without_requests(wait_for):
    with _watched(wait_for) as (kv, ctl, other, hb):
        assert kv.abort_reads == 1  # not watched yet: a request
        before, beats = kv.abort_reads, int(other.add(cp.key_hb(3), 0))
        for _ in range(500):  # 10 s of a collective's 20 ms slices
            assert ctl.aborted(0) is False
        assert kv.abort_reads == before  # not one request
        time.sleep(0.5)
        assert int(other.add(cp.key_hb(3), 0)) - beats >= 5  # beating while the wait is held
        t0 = time.monotonic()
        other.set(cp.key_abort(0), "member 9 died")
        wait_for(lambda: ctl.aborted(0), 2.0)
        print(f"abort seen through the watch after {time.monotonic() - t0:.4f} s")
        assert kv.abort_reads == before  # seen from the wait, not read
        other.set(cp.key_epoch(1), "{}")  # the next epoch: the watch moves when asked
        assert ctl.aborted(1) is False
        wait_for(lambda: hb._armed == 1)
        before = kv.abort_reads
        assert ctl.aborted(1) is False and kv.abort_reads == before
        other.set(cp.key_epoch(2), "{}")  # epoch 1 passed: no longer watched
        wait_for(lambda: 1 in hb._passed)
        assert ctl.aborted(1) is False and kv.abort_reads == before + 1
        hb.stop()
        hb._thread.join(5)
        other.set(cp.key_abort(2), "x")
        assert ctl.aborted(2) is True  # a stopped watch: the store answers


@pytest.mark.l1
def test_without_a_wait_the_store_is_read_as_before():
    """The agent's TCPStore has no server-side wait: every read is a request."""
    kv = CountingKV()
    server = A.StoreServer(TOKEN, "127.0.0.1", 0, kv)
    try:
        ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p"))
        for _ in range(10):
            assert ctl.aborted(0) is False
        assert kv.abort_reads == 10
    finally:
        server.close()


@pytest.mark.l1
def test_the_watch_answer_carries_the_reason_and_the_next_epoch(wait_for):
    """NOTE [the next epoch in the abort flag]: the heartbeat's wait is answered with the
    flag's value; the reason (``sliced_wait``'s error) and the next epoch (``converge``'s
    first look) come from it, not from a request each."""
    with _watched(wait_for) as (kv, ctl, other, hb):
        rec = {"members": [3, 4], "joins": 0, "why": "shrink", "epoch": 1}
        other.set(cp.key_abort(0), cp.abort_value("member(s) [9] dead: killed", (1, rec)))
        wait_for(lambda: ctl.aborted(0), 2.0)
        reads, gets = kv.abort_reads, kv.abort_gets
        assert ctl.abort_reason(0) == "member(s) [9] dead: killed"
        assert ctl.next_from_abort(0) == (1, rec)
        assert (kv.abort_reads, kv.abort_gets) == (reads, gets)  # not one request
        other.set(cp.key_abort(5), "member 2: a collective failed")  # not watched: read
        assert ctl.abort_reason(5) == "member 2: a collective failed"
        assert ctl.next_from_abort(5) is None and kv.abort_gets == gets + 1
        hb.stop()


@pytest.mark.l1
def test_abort_and_propose_wakes_the_waiters_with_the_flag_first():
    """A wait on the abort flag and the next epoch's record (what the watch and the
    simulated collective hold) is answered by the flag, whose value names the epoch that
    was proposed with it, in one step of the store: written apart (the proposal first),
    the store's thread answered such waits with the record before the flag existed."""
    server = A.StoreServer(TOKEN, "127.0.0.1", 0)
    try:
        obs = cp.Control(A.LocalStore(server.kv, prefix="p"))
        for e in range(20):
            box = {}
            members = [e + 1, e + 2, e + 3]
            waiters = [A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
                       for _ in range(3)]
            ths = [threading.Thread(target=lambda i=i, w=w: box.update(
                {i: w.wait_value([cp.key_abort(e), cp.key_epoch(e + 1)], 5.0)}))
                for i, w in enumerate(waiters)]
            for th in ths:
                th.start()
            time.sleep(0.05)
            obs.abort_and_propose(e, f"member(s) [{e}] dead", {"members": members})
            for th in ths:
                th.join(5)
            for got in box.values():
                assert got is not None and got[0] == 0, box
                why, nxt = cp.split_abort(got[1])
                assert why == f"member(s) [{e}] dead" and nxt[0] == e + 1, got
                assert nxt[1]["members"] == members == obs.record(e + 1)["members"]
            assert obs.latest_hint() == e + 1
    finally:
        server.close()


@pytest.mark.l0
def test_a_flag_that_lost_the_race_keeps_its_reason_and_names_nothing():
    """Where a member aborted first (its reason only) or the next epoch was proposed by
    someone else (a grow), the observer's flag and proposal are written apart and the flag
    names no epoch it might not be."""
    kv = A.KV()
    obs = cp.Control(A.LocalStore(kv, prefix="p"))
    obs.abort(0, "member 1: a collective failed")
    obs.abort_and_propose(0, "member(s) [2] dead", {"members": [1, 3]})
    assert cp.split_abort(obs.get(cp.key_abort(0))) == ("member 1: a collective failed", None)
    assert obs.record(1)["members"] == [1, 3]
    obs.propose(2, {"members": [1, 3, 7], "why": "grow"})  # a grow, the flag not set
    obs.abort_and_propose(1, "member(s) [3] dead", {"members": [1]})
    assert cp.split_abort(obs.get(cp.key_abort(1))) == ("member(s) [3] dead", None)
    assert obs.record(2)["members"] == [1, 3, 7]
    assert cp.split_abort("a reason\nnext epoch x {") == ("a reason\nnext epoch x {", None)
