"""The handshake window of both ports (NOTE [late hellos] in authstore): a client whose
answer arrived within the window is served even when the server's loop reads it late
(a pass of the loop longer than the window: a connect burst), and a silent client is
still closed."""

import socket
import threading
import time

import pytest

from xvendor.distributed import Coordinator, StragglerPolicy, authstore as A, storewire, wire

pytestmark = [pytest.mark.l1, pytest.mark.timeout(60)]

TOKEN = "t0k3n-window"
WINDOW_S = 0.5


class SlowKV(A.KV):
    """``SET`` of ``slow`` holds the store's serving thread (a long pass of its loop)."""

    stall_s = 3 * WINDOW_S

    def apply(self, op, f):
        if op == A.SET and f and f[0].endswith(b"slow"):
            time.sleep(self.stall_s)
        return super().apply(op, f)


def _reply(sock: socket.socket, timeout_s: float = 5.0) -> tuple[int, list[bytes]] | None:
    """The store's reply to one request, or None when the server closed the connection."""
    sock.settimeout(timeout_s)
    buf = b""
    try:
        while len(buf) < 4 or len(buf) < 4 + A._LEN.unpack_from(buf)[0]:
            data = sock.recv(4096)
            if not data:
                return None
            buf += data
    except ConnectionResetError:
        return None
    return A._unpack(buf[4:])


def test_the_store_serves_a_proof_that_arrived_while_its_loop_was_busy(monkeypatch):
    monkeypatch.setattr(storewire, "HANDSHAKE_S", WINDOW_S)
    server = A.StoreServer(TOKEN, "127.0.0.1", kv=SlowKV())
    try:
        late = socket.create_connection(("127.0.0.1", server.port))
        silent = socket.create_connection(("127.0.0.1", server.port))
        greet = b""
        while len(greet) < len(A.MAGIC) + 16:
            greet += late.recv(64)
        busy = A.AuthStore("127.0.0.1", server.port, TOKEN)
        stall = threading.Thread(target=lambda: busy.set("slow", "1"), daemon=True)
        stall.start()
        time.sleep(WINDOW_S / 2)  # the serving thread is in its stall now
        # the proof and a request arrive within the window, while no one reads them
        late.sendall(A.proof(TOKEN, greet[4:]) + A._pack(A.SET, [b"k", b"v"]))
        stall.join(10)
        assert _reply(late) == (0, []), "a client that answered in time was closed"
        assert server.kv.apply(A.GET, [b"k"])[1] == [b"v"]
        assert _reply(silent) is None, "a silent client was kept"
        assert server.refused == 1  # the silent one only
        late.close()
        silent.close()
    finally:
        server.close()


def test_the_coordinator_admits_a_hello_that_arrived_while_its_loop_was_busy(monkeypatch):
    monkeypatch.setattr(storewire, "HANDSHAKE_S", WINDOW_S)
    c = Coordinator(TOKEN, "127.0.0.1", 0, min_replicas=2, straggler=StragglerPolicy(0, 0),
                    log=lambda _: None)
    try:
        # the coordinator's loop is driven by hand: accept, then a pass longer than the
        # window during which the hello arrives, then the sweep that ends that pass
        late = socket.create_connection(("127.0.0.1", c.port))
        silent = socket.create_connection(("127.0.0.1", c.port))
        end = time.monotonic() + 5
        while len(c._pending) < 2 and time.monotonic() < end:
            c._accept()
        assert len(c._pending) == 2
        reader = wire.LineReader()
        greet = wire.recv_one(late, reader, 5.0)
        wire.send(late, wire.hello(TOKEN, greet["nonce"], lane=0, replica="r0", restart=0,
                                   fingerprint=None))
        time.sleep(2 * WINDOW_S)
        c._drop_silent(time.monotonic())
        reply = wire.recv_one(late, reader, 5.0)
        assert reply["ok"] and reply["member"] == 0, reply
        assert not c._pending, "a silent client was kept"
        silent.settimeout(5.0)
        assert wire.recv_one(silent, wire.LineReader(), 5.0)["coordinator"]  # the greeting
        assert silent.recv(64) == b""  # then closed
        late.close()
        silent.close()
    finally:
        c.close()
