"""NOTE [one link per member] in authstore, over real sockets on 127.0.0.1 (l1): a worker
whose hello asks for ``store_link`` keeps one connection; after the reply it carries the
store's frames (requests, server-side waits, beats), the step reports and the goodbye; the
coordinator holds one descriptor for it; a close without a goodbye is a death, a goodbye is
not; a plain store connection cannot send a report; a resumed link replaces the old one
without a death."""

import json
import os
import socket
import threading
import time

import pytest

from xvendor.distributed import Coordinator, StragglerPolicy, authstore as A, wire
from xvendor.distributed import control as cp

pytestmark = [pytest.mark.l1, pytest.mark.timeout(60)]

TOKEN = "t0k3n-one-link"


class OneLink:
    """A worker on one connection: the hello, then store frames on the same socket."""

    def __init__(self, c: Coordinator, **override):
        self.sock = socket.create_connection(("127.0.0.1", c.port), timeout=10)
        reader = wire.LineReader()
        greet = wire.recv_one(self.sock, reader, 10)
        msg = wire.hello(TOKEN, greet["nonce"], lane=0, replica=f"r{id(self)}", restart=0,
                         fingerprint=None)
        msg["store_link"] = True
        msg.update(override)
        wire.send(self.sock, msg)
        self.reply = wire.recv_one(self.sock, reader, 10)
        assert reader.take() == b""
        self.member = self.reply.get("member")
        self.pre = (self.reply.get("prefix", "") + "/").encode()
        self.sock.settimeout(10)

    def send(self, op: int, fields: list[bytes]) -> None:
        self.sock.sendall(A._pack(op, fields))

    def call(self, op: int, fields: list[bytes]):
        self.send(op, fields)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + A._LEN.unpack_from(buf)[0]:
            data = self.sock.recv(4096)
            if not data:
                return None
            buf += data
        return A._unpack(buf[4:])

    def k(self, key: str) -> bytes:
        return self.pre + key.encode()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_one_link_carries_the_store_and_the_coordinator_holds_one_descriptor(coord, wait_for):
    c = coord(min_replicas=3)
    before = _fds()
    links = [OneLink(c) for _ in range(3)]
    assert all(x.reply["ok"] and x.reply["store_link"] for x in links)
    ctl = c.lane(0).ctl
    wait_for(lambda: ctl.record(0) is not None, what="epoch 0")
    # store requests on the front link: a write, a read, a beat (no reply), a server wait
    a = links[0]
    assert a.call(A.SET, [a.k("x"), b"1"]) == (A.OK, [])
    assert a.call(A.GET, [a.k("x")]) == (A.OK, [b"1"])
    a.send(A.BEAT, [a.k(cp.key_hb(a.member))])
    assert a.call(A.GET, [a.k(cp.key_hb(a.member))]) == (A.OK, [b"1"])
    assert ctl.get("x") == "1"  # the same namespace the coordinator reads
    raw = a.call(A.GET, [a.k(cp.key_epoch(0))])
    assert raw[0] == A.OK and cp.decode_record(raw[1][0])["members"] == [x.member for x in links]
    t0 = time.monotonic()
    threading.Timer(0.2, lambda: ctl.store.set("later", "v")).start()
    assert a.call(A.WAIT, [b"5000", a.k("nothing"), a.k("later")]) == (A.OK, [b"1"])
    assert 0.15 < time.monotonic() - t0 < 2.0
    # the coordinator's process: 3 workers cost 3 descriptors (the test's own 3 ends, in
    # the same process, are the other 3), not 6
    wait_for(lambda: c.store.adopted == 3, what="three links handed to the store")
    assert c.store.connections == 3 and not c._conns  # one socket per worker, in the store
    wait_for(lambda: _fds() - before <= 3 + 3, what="six descriptors, not nine")
    for x in links:
        x.sock.close()


def test_a_close_without_goodbye_is_a_death_and_a_goodbye_is_not(coord, wait_for):
    c = coord(min_replicas=2)
    a, b = OneLink(c), OneLink(c)
    ctl = c.lane(0).ctl
    wait_for(lambda: ctl.record(0) is not None, what="epoch 0")
    t0 = time.monotonic()
    a.sock.close()  # what the kernel does for a process killed with SIGKILL
    wait_for(lambda: a.member in c.deaths(), what="the death notice")
    print(f"dropped one-link connection -> death notice in {time.monotonic() - t0:.3f} s")
    assert "closed without a goodbye" in c.deaths()[a.member]
    wait_for(lambda: ctl.record(1) is not None, what="the survivors' epoch")
    assert ctl.record(1)["members"] == [b.member]
    b.send(A.BYE, [])
    b.sock.close()
    time.sleep(0.3)
    assert b.member not in c.deaths()


def test_step_reports_on_one_link_evict_a_straggler(coord, wait_for):
    c = coord(min_replicas=3, straggler=StragglerPolicy(factor=3.0, steps=3, min_s=0.1))
    links = [OneLink(c) for _ in range(3)]
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0")
    for step in range(3):
        for i, x in enumerate(links):
            busy = 0.5 if i == 2 else 0.02
            x.send(A.REPORT, [json.dumps({"busy": busy, "step": step, "epoch": 0}).encode()])
        time.sleep(0.05)
    wait_for(lambda: links[2].member in c.deaths(), what="the straggler's eviction")
    assert "straggler" in c.deaths()[links[2].member]
    assert set(c.deaths()) == {links[2].member}


def test_a_plain_store_connection_cannot_report_and_a_resumed_link_is_no_death(coord, wait_for):
    c = coord(min_replicas=1)
    a = OneLink(c)
    ctl = c.lane(0).ctl
    wait_for(lambda: ctl.record(0) is not None, what="epoch 0")
    # a plain (proved) store connection sending a REPORT is closed, and nothing changes
    s = socket.create_connection(("127.0.0.1", c.store_port), timeout=5)
    greet = b""
    while len(greet) < 20:
        greet += s.recv(64)
    s.sendall(A.proof(TOKEN, greet[4:]) + A._pack(A.REPORT, [b'{"busy": 9, "step": 0, '
                                                             b'"epoch": 0}']))
    s.settimeout(5)
    assert s.recv(64) == b""
    s.close()
    # the same member resumes on a new link (a worker that followed a new leader): the old
    # link is closed by the coordinator and that is not a death
    b = OneLink(c, resume=a.member)
    assert b.reply["ok"] and b.member == a.member
    assert a.sock.recv(64) == b""  # the old link was closed
    time.sleep(0.3)
    assert a.member not in c.deaths()
    assert b.call(A.GET, [b.k(cp.key_epoch(0))])[0] == A.OK
    b.sock.close()
    wait_for(lambda: a.member in c.deaths(), what="the resumed link's death")
