"""The coordinator's control-plane store, behind the job's token: this module is its
clients (``AuthStore``, ``LocalStore``) and the public names of the rest, which live in
``storewire`` (framing, ops, the proof, ``HANDSHAKE_S``: patch it there), ``storekv`` (the
map) and ``storeserver`` (the server).

torch's ``TCPStore`` has no authentication, and its server listens on every interface
whatever host it is given: anyone who reached the port could read and rewrite membership,
verdicts and hand-off keys. This store speaks the c10d ``Store`` API to its callers (gloo's
rendezvous included: ``AuthStore`` is a ``torch.distributed.Store`` subclass) and a small
binary protocol on the wire, where every connection must first prove it holds the token:

1. server -> client  ``b"XVS1"`` + a 16-byte random nonce
2. client -> server  HMAC-SHA256(token, ``b"xvendor-store:"`` + nonce)  (32 bytes)
3. then frames both ways: a 4-byte big-endian length, then an op byte and length-prefixed
   fields (requests), or a status byte and fields (replies).

A wrong proof, a frame longer than ``MAX_FRAME``, an unknown op or malformed fields close
that connection and change nothing; so does silence before the proof for ``HANDSHAKE_S``.
At most ``max_conns()`` plain connections are held (half the process's open-file limit, at
least ``MAX_CONNS``: a real member holds two or three besides its front link); more are
closed on accept. Front links handed over (NOTE [one link per member]) are the front port's
to count: it may use what this listener leaves unused. The token never crosses the wire and
is never logged.

Waiting reads (``get`` of a missing key, ``wait``) poll on the client. One request waits on
the server: ``wait_any(keys, timeout)`` is answered as soon as one of the keys exists (its
index) or when the timeout passes (missing). NOTE [scale]: members waiting for an epoch,
a plan or a verdict used to poll the store every few milliseconds each; 1,000 of them
polling kept one store thread busy with nothing, and delayed the requests that mattered.
A connection holds at most one such wait (a second one closes it), up to ``MAX_WAIT_S``.

NOTE [heartbeats off the request queue]: a heartbeat is ``BEAT`` (add 1 to its counter,
no reply): it costs the store thread one read and no write, and its sender never waits
behind the control requests queued ahead of it. Its staleness is judged on the store's own
clock (``StoreServer.caught_up``: every request that reached the server before that time
has been applied), not the observer's: a burst of control requests (a formation, a
recovery at 3,000 members) used to keep the beats unread in the sockets for longer than the
heartbeat timeout, and since death is final every member so delayed was lost
(bench/sim_members.py). A backlog now delays a verdict instead of causing one.

NOTE [one link per member]: a worker whose hello asks for it (``"store_link": true``)
keeps one connection: after the coordinator's reply the front link carries the store's
frames (no nonce or proof: the hello's HMAC already proved the token on this connection),
and its step reports and goodbye as ``REPORT`` / ``BYE`` frames (no reply). The coordinator
hands the socket to this server (``adopt``), which tells it of reports and of the close
(``on_link``). The coordinator then holds one descriptor per such worker instead of two
to four: at 10,000 members two each passed this container's hard ``ulimit -n`` of 20,000
(bench/sim_members.py). A plain store connection cannot send ``REPORT`` or ``BYE``.
"""


from __future__ import annotations

import datetime
import select
import socket
import threading
import time

import torch.distributed as dist

# the public names, wherever they live (storewire: the wire; storekv: the map;
# storeserver: the server); this module is the clients
from .storekv import KV  # noqa: F401
from .storeserver import StoreServer, _Peer  # noqa: F401
from .storewire import (ADD, BEAT, BYE, CAS, CHECK, DEL, GET, HANDSHAKE_S, MAGIC,  # noqa: F401
                        MAX_CONNS, MAX_FRAME, MAX_WAIT_S, MGET, MISSING, MSET, NUM, OK,
                        REPORT, SET, WAIT, WAITV, _LEN, _b, _pack, _unpack, max_conns,
                        proof)


class _Client:
    """One authenticated connection (one per thread: a blocked caller never holds up
    another thread's requests)."""

    def __init__(self, host: str, port: int, token: str, timeout_s: float):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        greet = self._exactly(len(MAGIC) + 16)
        if greet[:4] != MAGIC:
            raise ConnectionError(f"{host}:{port} is not an xvendor store")
        self.sock.sendall(proof(token, greet[4:]))

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the store closed the connection (wrong token, or "
                                      "the coordinator is gone)")
            buf += chunk
        return buf

    def call(self, op: int, fields: list[bytes]) -> tuple[int, list[bytes]] | None:
        self.sock.sendall(_pack(op, fields))
        if op == BEAT:  # no reply (NOTE [heartbeats off the request queue])
            return None
        (n,) = _LEN.unpack(self._exactly(4))
        return _unpack(self._exactly(n))


class AuthStore(dist.Store):
    """A ``torch.distributed.Store`` client of a ``StoreServer``, usable by gloo's
    rendezvous (under a ``PrefixStore`` too).

    ``prefix`` puts every key under ``prefix/`` as ``PrefixStore`` would: c10d's
    ``PrefixStore`` cannot wrap a Python store for ``check`` (torch 2.15's Python store
    trampoline has no ``check``: "pure virtual function"), which the control plane uses."""

    def __init__(self, host: str, port: int, token: str, timeout_s: float = 60.0,
                 prefix: str = "", link=None):
        super().__init__()
        self._addr, self._token, self._timeout_s = (host, port), token, timeout_s
        # NOTE [following the leader]: with a replicated coordinator (``env.Link`` over
        # several replicas) a request that fails or goes unanswered for ``Link.REQUEST_S``
        # is repeated on whichever replica leads now (``Link.follow``): its state is in
        # etcd, and every control-plane request is safe to repeat (NOTE [fencing] in
        # etcdstore). Callers see a pause, not an error.
        self._link = link if link is not None and link.replicated else None
        self._pre = f"{prefix}/".encode() if prefix else b""
        self._local = threading.local()
        self._call(NUM, [])  # connect now: a wrong address or token fails here, not later

    def _k(self, key) -> bytes:
        return self._pre + _b(key)

    def _client(self) -> "_Client":
        c = getattr(self._local, "client", None)
        if c is not None and self._link is not None and c.gen != self._link.gen:
            # another thread followed the leader: so does this one (a beat sent to the old
            # one would be read by nobody: NOTE [heartbeats off the request queue])
            self._local.client = None
            c.sock.close()
            c = None
        if c is None:
            c = self._local.client = self._open()
        return c

    def _call(self, op: int, fields: list[bytes]) -> tuple[int, list[bytes]] | None:
        while True:
            c = None
            try:
                c = self._client()
                return c.call(op, fields)
            except (OSError, ValueError) as e:
                self._lost(c, e)

    def _lost(self, c, e: Exception) -> None:
        """The connection failed: drop it and follow the leader (replicated; the caller
        retries), or raise ``DistNetworkError``."""
        self._local.client = None
        if c is not None:
            c.sock.close()
        if self._link is not None:  # NOTE [following the leader]
            try:
                self._link.follow(c.gen if c is not None else self._link.gen)
                return
            except Exception as err:
                e = err
        # a RuntimeError, as TCPStore raises: callers treat a lost store alike
        raise dist.DistNetworkError(f"store {self._addr[0]}:{self._addr[1]}: {e}") from e

    def _open(self) -> "_Client":
        if self._link is None:
            return _Client(*self._addr, self._token, self._timeout_s)
        gen, host, port = self._link.current()
        self._addr = (host, port)
        c = _Client(host, port, self._token, min(self._timeout_s, self._link.REQUEST_S))
        c.gen = gen
        return c

    def _poll(self, op: int, fields: list[bytes], timeout=None) -> list[bytes]:
        limit = self._timeout_s if timeout is None else (
            timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout)
        end, pause = time.monotonic() + limit, 0.0005
        while True:
            status, out = self._call(op, fields)
            if status == OK:
                return out
            if time.monotonic() > end:
                raise dist.DistStoreError(f"wait timeout after {limit} s, keys: "
                                          f"{[f.decode(errors='replace') for f in fields]}")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def set(self, key, value) -> None:
        self._call(SET, [self._k(key), _b(value)])

    def multi_set(self, keys, values) -> None:
        self._call(MSET, [x for k, v in zip(keys, values) for x in (self._k(k), _b(v))])

    def get(self, key) -> bytes:
        return self._poll(GET, [self._k(key)])[0]

    def try_get(self, key) -> bytes | None:
        """The value of ``key``, or None when it is missing: one request (``get`` waits for
        the key; a ``check`` then a ``get`` is two: NOTE [scale])."""
        status, f = self._call(GET, [self._k(key)])
        return f[0] if status == OK else None

    def multi_get(self, keys) -> list[bytes]:
        return self._poll(MGET, [self._k(k) for k in keys])

    def wait(self, keys, timeout=None) -> None:
        self._poll(MGET, [self._k(k) for k in keys], timeout)

    def add(self, key, amount) -> int:
        return int(self._call(ADD, [self._k(key), str(int(amount)).encode()])[1][0])

    def compare_set(self, key, expected, desired) -> bytes:
        return self._call(CAS, [self._k(key), _b(expected), _b(desired)])[1][0]

    def check(self, keys) -> bool:
        return self._call(CHECK, [self._k(k) for k in keys])[1][0] == b"1"

    def delete_key(self, key) -> bool:
        return self._call(DEL, [self._k(key)])[1][0] == b"1"

    def wait_any(self, keys, timeout_s: float) -> int | None:
        """The index of the first of ``keys`` that exists, as soon as one does; None after
        ``timeout_s`` (at most ``MAX_WAIT_S``) without any (NOTE [scale])."""
        ms = str(max(0, int(min(timeout_s, MAX_WAIT_S) * 1000))).encode()
        status, f = self._call(WAIT, [ms] + [self._k(k) for k in keys])
        return int(f[0]) if status == OK else None

    def wait_value(self, keys, timeout_s: float) -> tuple[int, bytes] | None:
        """``wait_any`` whose answer carries the present key's value, (index, value): a
        wait then a read in one request (NOTE [one read] in membership). ``timeout_s`` 0:
        which of ``keys`` exists now (the first), and its value, at once."""
        ms = str(max(0, int(min(timeout_s, MAX_WAIT_S) * 1000))).encode()
        status, f = self._call(WAITV, [ms] + [self._k(k) for k in keys])
        return (int(f[0]), f[1]) if status == OK else None

    def num_keys(self) -> int:
        return int(self._call(NUM, [])[1][0])

    def watch(self, keys, timeout_s: float) -> None:
        """Start ``wait_value(keys, timeout_s)`` on the server and return at once: its
        answer is read with ``answer`` (the present key's value with ``answered_value``);
        meanwhile this thread may send ``beat``s only (they have no reply). NOTE [the abort
        watch] and NOTE [the next epoch in the abort flag] in control."""
        ms = str(max(0, int(min(timeout_s, MAX_WAIT_S) * 1000))).encode()
        c = self._client()
        try:
            c.sock.sendall(_pack(WAITV, [ms] + [self._k(k) for k in keys]))
        except OSError as e:
            self._lost(c, e)
            raise ConnectionResetError("the watch was lost with its connection") from e

    def answer(self, timeout_s: float) -> int | None | bool:
        """The answer to this thread's ``watch``: the index of the key that exists, None at
        its timeout, False when none came within ``timeout_s`` (still pending). Raises
        ``ConnectionResetError`` when the watch was lost (the leader changed: watch again)."""
        c = getattr(self._local, "client", None)
        if c is None or (self._link is not None and c.gen != self._link.gen):
            self._client()
            raise ConnectionResetError("the watch was lost with its connection")
        try:
            poll = select.poll()  # not select(): no FD_SETSIZE limit
            poll.register(c.sock, select.POLLIN)
            if not poll.poll(max(0.0, timeout_s) * 1000):
                return False
            (n,) = _LEN.unpack(c._exactly(4))
            status, f = _unpack(c._exactly(n))
        except (OSError, ValueError) as e:
            self._lost(c, e)
            raise ConnectionResetError("the watch was lost with its connection") from e
        self._local.answered = f[1] if status == OK and len(f) > 1 else None
        return int(f[0]) if status == OK else None

    def answered_value(self) -> bytes | None:
        """The value of the key that answered this thread's last ``watch``."""
        return getattr(self._local, "answered", None)

    def beat(self, key) -> None:
        """Add 1 to ``key`` without waiting for a reply: a heartbeat (NOTE [heartbeats off
        the request queue]). Use a connection (a thread) that sends nothing else: the
        server answers nothing on it, so a reply read would wait forever."""
        self._call(BEAT, [self._k(key)])


class LocalStore(AuthStore):
    """The coordinator's own view of its ``KV``: the same API, no socket."""

    def __init__(self, kv: KV, timeout_s: float = 60.0, prefix: str = ""):
        dist.Store.__init__(self)
        self._kv, self._timeout_s, self._addr = kv, timeout_s, ("local", 0)
        self._pre = f"{prefix}/".encode() if prefix else b""

    def prefixed(self, prefix: str) -> "LocalStore":
        return LocalStore(self._kv, self._timeout_s, prefix)

    def abort_and_propose(self, abort_key, abort_value, epoch_key, record) -> bool | None:
        """``KV.abort_and_propose`` under this view's prefix; None where the map cannot
        (a replicated coordinator's: NOTE [the next epoch in the abort flag] in control)."""
        fn = getattr(self._kv, "abort_and_propose", None)
        if fn is None:
            return None
        return fn(self._k(abort_key), _b(abort_value), self._k(epoch_key), _b(record))

    def _call(self, op: int, fields: list[bytes]) -> tuple[int, list[bytes]]:
        if op == BEAT:
            return self._kv.beat(fields[0])
        return self._kv.apply(op, fields)

    def wait_any(self, keys, timeout_s: float) -> int | None:
        end = time.monotonic() + timeout_s
        while True:
            i = self._kv.first_present([self._k(k) for k in keys])
            if i is not None or time.monotonic() >= end:
                return i
            time.sleep(0.005)

    def wait_value(self, keys, timeout_s: float) -> tuple[int, bytes] | None:
        i = self.wait_any(keys, timeout_s)
        if i is None:
            return None
        st, got = self._kv.apply(GET, [self._k(keys[i])])
        return i, (got[0] if st == OK else b"")
