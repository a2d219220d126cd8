"""Nothing outside the job gets in (l1, real sockets on 127.0.0.1): every listener of a
coordinator (front port and control-plane store) and of an agent binds the address it was
given; neither port answers a client without the token, and such a client changes nothing;
a bounded wire fuzz of both ports (truncated frames, huge length prefixes, garbage, a
replayed handshake, silent clients, 1,000 connections at once) leaves the coordinator up,
its connection tables back where they were, and two members training through it unaffected.
"""

import json
import random
import socket
import struct
import threading
import time

import pytest
import torch
import torch.distributed as dist

from xvendor.distributed import Agent, Coordinator, Refused, ResilientGroup
from xvendor.distributed import authstore, storewire, wire
from xvendor.distributed.env import Link, join

pytestmark = [pytest.mark.l1, pytest.mark.timeout(120)]

TOKEN = "security-test-token"


@pytest.fixture
def coord(coord):
    """One coordinator for two members (conftest's ``coord``, which also checks that the
    token was never logged)."""
    return coord(min_replicas=2)



def listeners(port: int) -> list[str]:
    """Local addresses listening on ``port`` (IPv4 and IPv6), read from the kernel."""
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.rsplit(":", 1)
                if state == "0A" and int(p, 16) == port:
                    found.append(addr)
    return found


LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it


def test_every_listener_binds_the_address_asked_for(coord):
    assert listeners(coord.port) == [LOOPBACK]
    assert listeners(coord.store_port) == [LOOPBACK]
    with Agent(host="127.0.0.1") as agent:
        assert listeners(agent.port) == [LOOPBACK]


def snapshot(c: Coordinator) -> dict:
    with c._kv._lock:
        return dict(c._kv._d)


def closed_by_peer(s: socket.socket, timeout_s: float = 5.0) -> bool:
    s.settimeout(timeout_s)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_no_port_answers_without_the_token_and_nothing_changes(coord):
    a = Link("127.0.0.1", coord.port, TOKEN, replica="a")
    b = Link("127.0.0.1", coord.port, TOKEN, replica="b")
    end = time.monotonic() + 10
    while coord.lane(0).ctl.record(0) is None:
        assert time.monotonic() < end
        time.sleep(0.01)
    time.sleep(0.3)  # the coordinator's own heartbeat scans create the members' hb keys
    before, arrivals, refused = snapshot(coord), list(coord.lane(0).arrivals), coord.store.refused
    # the store: a plain TCPStore client, a wrong token, a raw request without a proof
    with pytest.raises(Exception):
        dist.TCPStore("127.0.0.1", coord.store_port, is_master=False, wait_for_workers=False,
                      timeout=__import__("datetime").timedelta(seconds=2))
    with pytest.raises(dist.DistNetworkError, match="closed the connection"):
        authstore.AuthStore("127.0.0.1", coord.store_port, "wrong-token").set("x", "1")
    s = socket.create_connection(("127.0.0.1", coord.store_port))
    s.recv(20)
    s.sendall(b"\0" * 32 + authstore._pack(authstore.SET, [b"xv/ep/0", b"forged"]))
    assert closed_by_peer(s)
    # a replayed store proof: valid for another connection's nonce only
    s1 = socket.create_connection(("127.0.0.1", coord.store_port))
    nonce1 = s1.recv(20)[4:]
    s2 = socket.create_connection(("127.0.0.1", coord.store_port))
    s2.recv(20)
    s2.sendall(authstore.proof(TOKEN, nonce1) + authstore._pack(authstore.SET, [b"k", b"v"]))
    assert closed_by_peer(s2)
    s1.close()
    # the front port: a wrong token, and a replayed hello (its MAC answers another nonce)
    with pytest.raises(Refused, match="wrong token"):
        Link("127.0.0.1", coord.port, "wrong-token")
    f1 = socket.create_connection(("127.0.0.1", coord.port))
    n1 = wire.recv_one(f1, wire.LineReader(), 5)["nonce"]
    f2 = socket.create_connection(("127.0.0.1", coord.port))
    r2 = wire.LineReader()
    wire.recv_one(f2, r2, 5)
    wire.send(f2, wire.hello(TOKEN, n1, lane=0, replica="replay", restart=0, fingerprint=None))
    reply = wire.recv_one(f2, r2, 5)
    assert not reply["ok"] and "wrong token" in reply["error"]
    f1.close()
    assert snapshot(coord) == before
    assert coord.lane(0).arrivals == arrivals
    assert coord.store.refused >= refused + 3
    a.close(), b.close()


def _fuzz_store(port: int, rng: random.Random) -> None:
    cases = [
        lambda s, g: s.sendall(b"\x00" * rng.randint(1, 31)),              # truncated proof
        lambda s, g: s.sendall(rng.randbytes(rng.randint(1, 5000))),       # garbage
        lambda s, g: s.sendall(b"\xff" * 4 + b"x" * 100),                  # huge prefix, no proof
        lambda s, g: s.sendall(authstore.proof(TOKEN, g[4:]) + struct.pack(">I", 1 << 31)),
        lambda s, g: s.sendall(authstore.proof(TOKEN, g[4:]) + struct.pack(">I", 10) + b"\x01"),
        lambda s, g: s.sendall(authstore.proof(TOKEN, g[4:]) + authstore._pack(99, [b"k"])),
    ]
    for _ in range(60):
        with socket.create_connection(("127.0.0.1", port)) as s:
            g = s.recv(20)
            rng.choice(cases)(s, g)


def _fuzz_front(port: int, rng: random.Random) -> None:
    cases = [
        lambda s: s.sendall(b'{"proto": 1, "mac": "'),                          # truncated
        lambda s: s.sendall(b"x" * (wire.LineReader.MAX_LINE + 10)),             # no newline
        lambda s: s.sendall(rng.randbytes(rng.randint(1, 3000)) + b"\n"),        # garbage
        lambda s: s.sendall(rng.choice([b"[1, 2]\n", b'"x"\n', b"5\n", b"null\n"])),
        lambda s: s.sendall(json.dumps({"proto": 1, "mac": "0" * 64, "lane": 0}).encode()
                            + b"\n"),
    ]
    for _ in range(60):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.recv(200)
            try:
                rng.choice(cases)(s)
            except OSError:  # the coordinator may close first: that is the point
                pass


def _train(coord: Coordinator, i: int, stop: threading.Event, out: dict) -> None:
    link = Link("127.0.0.1", coord.port, TOKEN, replica=f"r{i}")
    state = {"w": torch.zeros(4)}
    rg = join(ResilientGroup, link, get_state=lambda: state, set_state=state.update)
    wrong, steps = 0, 0
    while not stop.is_set() or steps < 30:
        s = int(rg.step)
        got = rg.all_reduce(torch.full((4,), float((s + 1) * (rg.rank + 1))))
        wrong += int(not bool((got == 3 * (s + 1)).all()))
        rg.commit_step()
        steps += 1
        time.sleep(0.005)
    out[i] = {"steps": steps, "wrong": wrong, "epoch": rg.epoch, "recoveries":
              rg.stats["recoveries"], "max_call_s": rg.stats["max_call_s"]}
    rg.close()


def test_wire_fuzz_leaves_the_coordinator_up_and_training_unaffected(coord, monkeypatch):
    # the flood's silent clients must all be open at once (under a loaded machine the
    # 1,000 accepts may take seconds): a long handshake window while they connect, then a
    # 3 s one (read on every sweep), longer than a loaded member needs to prove a new link
    monkeypatch.setattr(storewire, "HANDSHAKE_S", 60.0)
    stop, out = threading.Event(), {}
    members = [threading.Thread(target=_train, args=(coord, i, stop, out)) for i in (0, 1)]
    for t in members:
        t.start()
    end = time.monotonic() + 30
    while coord.lane(0).ctl.record(0) is None:
        assert time.monotonic() < end, "epoch 0 did not form"
        time.sleep(0.01)
    base_front, base_store = len(coord._conns), coord.store.connections
    rng = random.Random(20261201)
    _fuzz_store(coord.store_port, rng)
    _fuzz_front(coord.port, rng)
    many = []  # 1,000 connections at once, half per port, all silent
    for k in range(1000):
        many.append(socket.create_connection(("127.0.0.1", (coord.port, coord.store_port)[k % 2])))
    end = time.monotonic() + 15
    # every one of them held at once: 500 beyond the front's members, 500 on the store
    # (whose own count moves while the members' threads open and close their links)
    while len(coord._conns) < base_front + 500 or coord.store.connections < 500:
        assert time.monotonic() < end, (len(coord._conns), coord.store.connections)
        time.sleep(0.05)
    for s in many:
        s.close()
    monkeypatch.setattr(storewire, "HANDSHAKE_S", 3.0)
    silent = [socket.create_connection(("127.0.0.1", p)) for p in (coord.port, coord.store_port)]
    assert all(closed_by_peer(s, 8.0) for s in silent), "a silent client was kept"
    end = time.monotonic() + 10  # (the members' new threads open their own store links)
    while len(coord._conns) > base_front or coord.store.connections > base_store + 8:
        assert time.monotonic() < end, (len(coord._conns), coord.store.connections)
        time.sleep(0.05)
    late = Link("127.0.0.1", coord.port, TOKEN, replica="late")  # still admits
    late.close()
    stop.set()
    for t in members:
        t.join(60)
    assert sorted(out) == [0, 1], out
    for r in out.values():
        assert r["wrong"] == 0 and r["epoch"] == 0 and r["recoveries"] == [], r
    assert coord.deaths() == {}
    prefix = wire.job_prefix(TOKEN, None)[:len("xvj/") + 16].encode()
    assert all(k.startswith(prefix) for k in snapshot(coord)), "a key from outside the job"
