"""Heartbeats off the request queue (NOTE [heartbeats off the request queue] in
``authstore``): a ``BEAT`` adds 1 without a reply, and a member whose beats queue behind a
slow stretch of the store thread is not judged silent, while one that stops beating still
is within the heartbeat timeout."""

import threading
import time

import pytest

from xvendor.distributed import authstore as A
from xvendor.distributed import control as cp
from xvendor.distributed.verdicts import Verdicts

TOKEN = "t0k3n-beat"


class SlowKV(A.KV):
    """A store whose ``SET`` of ``slow`` holds the serving thread for ``stall_s``: the
    backlog a burst of control requests leaves (a formation at 3,000 members)."""

    stall_s = 2.0

    def apply(self, op, f):
        if op == A.SET and f and f[0].endswith(b"slow"):
            time.sleep(self.stall_s)
        return super().apply(op, f)


@pytest.mark.l1
def test_a_beat_adds_one_without_a_reply_and_requests_after_it_get_theirs():
    server = A.StoreServer(TOKEN, "127.0.0.1", 0)
    try:
        c = A._Client("127.0.0.1", server.port, TOKEN, 5)
        for _ in range(3):
            assert c.call(A.BEAT, [b"p/xv/hb/7"]) is None
        # the next request on the same connection is answered with its own reply
        assert c.call(A.ADD, [b"p/xv/hb/7", b"0"]) == (A.OK, [b"3"])
        store = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        store.beat(cp.key_hb(7))
        deadline = time.monotonic() + 5
        while store.add(cp.key_hb(7), 0) != 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        c.sock.sendall(A._pack(A.BEAT, [b"a", b"b"]))  # malformed: closed, nothing applied
        c.sock.settimeout(5)
        assert c.sock.recv(16) == b""
        assert store.add(cp.key_hb(7), 0) == 4
    finally:
        server.close()


def _drill(clock: bool, beat_s: float = 0.05, hb_timeout_s: float = 0.5, beats: bool = False):
    """One member beats on its own connection; the store thread stalls 2 s (a backlog);
    an observer scans every 50 ms. Returns (death notices during the stall, seconds from
    the member's last beat to its death notice once it stops)."""
    kv = SlowKV()
    server = A.StoreServer(TOKEN, "127.0.0.1", 0, kv)
    stop = threading.Event()
    try:
        member = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        member.add(cp.KEY_NEXT_ID, 1)  # member 0 exists
        member.add(cp.key_hb(0), 1)
        beats = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")

        def beat():
            while not stop.wait(beat_s):
                beats.beat(cp.key_hb(0))
        th = threading.Thread(target=beat, daemon=True)
        th.start()
        ctl = cp.Control(A.LocalStore(kv, prefix="p"))
        timing = cp.Timing(hb_timeout_s=hb_timeout_s, hb_interval_s=beat_s)
        v = Verdicts(ctl, timing, clock=server.caught_up if clock else None,
                     beats=kv if beats else None)

        def scan_for(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end and not v.deaths:
                v.check_heartbeats(time.monotonic())
                time.sleep(0.05)
        scan_for(0.5)
        other = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
        stall = threading.Thread(target=lambda: other.set("slow", "1"), daemon=True)
        stall.start()
        scan_for(SlowKV.stall_s + 0.5)
        stall.join(5)
        during = dict(v.deaths)
        if during:
            return during, None
        stop.set()
        th.join(5)
        t_last = time.monotonic()
        scan_for(10)
        return during, (time.monotonic() - t_last if v.deaths else None)
    finally:
        stop.set()
        server.close()


@pytest.mark.l1
@pytest.mark.parametrize("beats", [False, True], ids=["scan", "beats-in-order"])
def test_a_backlog_in_the_store_is_not_a_silent_member_and_a_stopped_one_is_still_judged(beats):
    during, detected = _drill(clock=True, beats=beats)
    assert during == {}, during  # beats queued behind the stall: not silent
    assert detected is not None and detected < 0.5 + 0.6, detected  # hb timeout + scans
    # judged on the observer's clock (as before), the same stall kills the live member
    during, _ = _drill(clock=False)
    assert 0 in during and "heartbeat stale" in during[0], during


@pytest.mark.l1
def test_a_scan_reads_only_the_silent_members():
    """NOTE [beats in arrival order]: 2,000 members beat; one stops; a scan reads one
    counter (the silent one's left key), not 2,000, and declares it alone."""
    kv = A.KV()
    server = A.StoreServer(TOKEN, "127.0.0.1", 0, kv)
    try:
        ctl = cp.Control(A.LocalStore(kv, prefix="p"))
        local = A.LocalStore(kv, prefix="p")
        n = 2000
        local.add(cp.KEY_NEXT_ID, n)
        timing = cp.Timing(hb_timeout_s=0.3, hb_interval_s=0.05)
        v = Verdicts(ctl, timing, clock=server.caught_up, beats=kv)
        for m in range(n):
            local.beat(cp.key_hb(m))
        served = []
        real_apply = kv.apply
        kv.apply = lambda op, f: (served.append(op), real_apply(op, f))[1]
        end = time.monotonic() + 0.6
        while time.monotonic() < end:
            for m in range(1, n):  # member 0 is silent
                kv.beat(local._k(cp.key_hb(m)))
            served.clear()
            v.check_heartbeats(time.monotonic())
            time.sleep(0.05)
        assert set(v.deaths) == {0}, v.deaths
        assert "heartbeat stale" in v.deaths[0]
        v.check_heartbeats(time.monotonic())
        served.clear()
        v.check_heartbeats(time.monotonic())
        assert len(served) == 0, served  # nothing silent: no read at all
    finally:
        server.close()
