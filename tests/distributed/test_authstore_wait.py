"""``AuthStore.wait_any``: a wait held on the server (NOTE [scale] in ``authstore``), woken
by a write from another client and by one from the coordinator's own thread (``LocalStore``),
answered missing at its timeout, and a second wait on one connection closes it."""

import socket
import threading
import time

import pytest

from xvendor.distributed import authstore as A

TOKEN = "t0k3n-wait"


@pytest.fixture
def server():
    s = A.StoreServer(TOKEN, "127.0.0.1", 0)
    yield s
    s.close()


@pytest.mark.l1
def test_a_wait_returns_when_a_key_is_written_and_times_out_without(server):
    waiter = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
    writer = A.AuthStore("127.0.0.1", server.port, TOKEN, prefix="p")
    local = A.LocalStore(server.kv, prefix="p")
    t0 = time.monotonic()
    assert waiter.wait_any(["a", "b"], 0.3) is None  # nothing written: the timeout
    assert 0.25 < time.monotonic() - t0 < 2.0
    for store, key, index in ((writer, "b", 1), (local, "a", 0)):  # a client; this process
        got = {}
        th = threading.Thread(target=lambda: got.setdefault("i", waiter.wait_any(["a", "b"], 5)))
        th.start()
        time.sleep(0.3)
        assert "i" not in got  # held on the server, not answered early
        t1 = time.monotonic()
        store.set(key, "x")
        th.join(5)
        assert got["i"] == index and time.monotonic() - t1 < 1.0, got
        waiter.delete_key(key)
    writer.set("b", "y")
    assert waiter.wait_any(["a", "b"], 5) == 1  # present already: at once
    assert server.kv.first_present([b"p/b"]) == 0


@pytest.mark.l1
def test_a_second_wait_on_one_connection_closes_it(server):
    c = A._Client("127.0.0.1", server.port, TOKEN, 5)
    req = A._pack(A.WAIT, [b"2000", b"never"])
    c.sock.sendall(req + req)
    c.sock.settimeout(5)
    assert c.sock.recv(16) == b""  # closed, no answer
    assert A.AuthStore("127.0.0.1", server.port, TOKEN).check([]) is not None  # still serving
