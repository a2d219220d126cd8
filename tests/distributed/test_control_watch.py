"""NOTE [the abort watch] (``control.Heartbeat``): a member reads its epoch's abort flag
from the heartbeat thread's server-side wait, not with a store request per slice; the
flag is seen within a beat of being set, the beats go on while the wait is held, and the
watch moves on when the next epoch is proposed or stops with the heartbeat."""

import time

import pytest

from xvendor.distributed import authstore as A
from xvendor.distributed import control as cp

TOKEN = "t0k3n-watch"


class CountingKV(A.KV):
    """Counts the requests that read an abort flag (what a slice of a collective costs)."""

    def __init__(self):
        super().__init__()
        self.abort_reads = 0

    def apply(self, op, f):
        if op == A.CHECK and any(b"/abort/" in k for k in f):
            self.abort_reads += 1
        return super().apply(op, f)


@pytest.mark.l1
def test_the_abort_flag_is_read_from_the_heartbeat_wait_without_requests(wait_for):
    kv = CountingKV()
    server = A.StoreServer(TOKEN, "127.0.0.1", 0, kv)
    try:
        main = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        other = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        hb = cp.Heartbeat(A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p"), 3, 0.05)
        ctl = cp.Control(main)
        ctl.watch = hb
        assert ctl.aborted(0) is False and kv.abort_reads == 1  # not watched yet: a request
        wait_for(lambda: hb._armed == 0)
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
    finally:
        server.close()


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
