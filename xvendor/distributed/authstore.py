"""The coordinator's control-plane store, behind the job's token.

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

import collections
import datetime
import hashlib
import heapq
import hmac
import secrets
import select
import selectors
import socket
import struct
import threading
import time

import torch.distributed as dist

MAGIC = b"XVS1"
MAX_FRAME = 4 << 20        # control-plane values are small (gloo addresses < 1 KiB)
MAX_CONNS = 4096


def max_conns() -> int:
    """Connections one listener holds: half the open-file limit (the front port and the store
    share it), less a reserve, and never below ``MAX_CONNS``. NOTE [scale]: a fixed 4096 turned
    every member past the 2048th away (each holds a front link and store links)."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MAX_CONNS, (soft - 256) // 2)
# NOTE [late hellos]: the window is the client's to answer in, not the server's to read in.
# Both handshake sweeps (here and the coordinator's front port) read what a client sent
# before closing it: a pass of the serving loop that runs past the window (a connect burst
# of thousands of members: greetings sent, hellos queued behind a backlog) closed clients
# whose answer sat unread in the kernel's buffer. A silent client is still closed.
HANDSHAKE_S = 5.0
_LEN = struct.Struct(">I")

SET, GET, ADD, CAS, CHECK, MGET, DEL, NUM, MSET, WAIT, BEAT = range(1, 12)
# only on a front link handed over to the store (NOTE [one link per member]): no reply
REPORT, BYE = 12, 13
# ``WAIT`` whose answer carries the present key's value: [index, value] (NOTE [one read])
WAITV = 14
MAX_WAIT_S = 10.0
OK, MISSING = 0, 1


def proof(token: str, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), b"xvendor-store:" + nonce, hashlib.sha256).digest()


def _pack(head: int, fields: list[bytes]) -> bytes:
    body = bytes([head]) + b"".join(_LEN.pack(len(f)) + f for f in fields)
    return _LEN.pack(len(body)) + body


def _unpack(body: bytes) -> tuple[int, list[bytes]]:
    if not body:
        raise ValueError("empty frame")
    head, fields, i = body[0], [], 1
    while i < len(body):
        if i + 4 > len(body):
            raise ValueError("truncated field length")
        (n,) = _LEN.unpack_from(body, i)
        if i + 4 + n > len(body):
            raise ValueError("field runs past the frame")
        fields.append(body[i + 4:i + 4 + n])
        i += 4 + n
    return head, fields


def _b(v) -> bytes:
    return v if isinstance(v, bytes) else bytes(v) if isinstance(v, (bytearray, list)) \
        else str(v).encode()


class KV:
    """The key-value map and its operations, shared by the server thread and local users."""

    def __init__(self):
        self._d: dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        self.on_write = None  # called with each key written (StoreServer: wakes waiters)
        # NOTE [beats in arrival order]: key -> when its last beat was applied, oldest first
        self._beat_at: dict[bytes, float] = {}
        self._beat_lock = threading.Lock()

    def beat(self, key: bytes) -> None:
        """A heartbeat: add 1 to ``key`` and note when (``silent_since``)."""
        self.apply(ADD, [key, b"1"])
        with self._beat_lock:
            self._beat_at.pop(key, None)
            self._beat_at[key] = time.monotonic()

    def silent_since(self, before: float) -> list[tuple[bytes, float]]:
        """The beat keys whose last beat was applied before ``before`` (a
        ``time.monotonic()`` time), oldest first, with that time: O(answer), not O(keys).

        NOTE [beats in arrival order]: the coordinator's heartbeat scan read every member's
        counter through the store API every ``hb_interval / 2`` (about 50,000 reads a second
        at 10,000 members, bench/sim_members.py); a beat now moves its key to the end of an
        ordered map, so the silent ones are the map's head and a scan reads only them."""
        out = []
        with self._beat_lock:
            for k, t in self._beat_at.items():
                if t >= before:
                    break
                out.append((k, t))
        return out

    def forget_beat(self, key: bytes) -> None:
        with self._beat_lock:
            self._beat_at.pop(key, None)

    def first_present(self, keys: list[bytes]) -> int | None:
        with self._lock:
            return next((i for i, k in enumerate(keys) if k in self._d), None)

    def _wrote(self, keys) -> None:
        if self.on_write is not None:
            for k in keys:
                self.on_write(k)

    def apply(self, op: int, f: list[bytes]) -> tuple[int, list[bytes]]:
        with self._lock:
            d = self._d
            if op == SET and len(f) == 2:
                d[f[0]] = f[1]
                self._wrote(f[:1])
                return OK, []
            if op == MSET and len(f) % 2 == 0:
                d.update(zip(f[0::2], f[1::2]))
                self._wrote(f[0::2])
                return OK, []
            if op == GET and len(f) == 1:
                return (OK, [d[f[0]]]) if f[0] in d else (MISSING, [])
            if op == ADD and len(f) == 2:
                v = int(d.get(f[0], b"0")) + int(f[1])
                d[f[0]] = str(v).encode()
                self._wrote(f[:1])
                return OK, [d[f[0]]]
            if op == CAS and len(f) == 3:
                cur = d.get(f[0])
                if (cur is None and f[1] == b"") or (cur is not None and cur == f[1]):
                    d[f[0]] = f[2]
                    self._wrote(f[:1])
                    return OK, [f[2]]
                return OK, [f[1] if cur is None else cur]
            if op == CHECK:
                return OK, [b"1" if all(k in d for k in f) else b"0"]
            if op == MGET:
                return (OK, [d[k] for k in f]) if all(k in d for k in f) else (MISSING, [])
            if op == DEL and len(f) == 1:
                return OK, [b"1" if d.pop(f[0], None) is not None else b"0"]
            if op == NUM and not f:
                return OK, [str(len(d)).encode()]
        raise ValueError(f"malformed request: op {op} with {len(f)} fields")

    def __len__(self) -> int:
        return len(self._d)


class _Peer:
    __slots__ = ("nonce", "authed", "buf", "out", "since", "wait", "writing", "tag", "bye")

    def __init__(self, nonce: bytes):
        self.nonce, self.authed, self.buf, self.out = nonce, False, b"", b""
        self.tag = None  # a front link handed over (``adopt``): the owner's name for it
        self.bye = False
        self.writing = False  # registered for EVENT_WRITE (a reply did not fit the socket)
        self.since = time.monotonic()
        self.wait = None  # its pending wait_any: [sock, keys, done]


class StoreServer:
    """Serves a ``KV`` on ``(host, port)`` to token holders, on a daemon thread."""

    def __init__(self, token: str, host: str, port: int = 0, kv: KV | None = None):
        if not token:
            raise ValueError("token must be a non-empty string")
        self._token, self.kv = token, kv if kv is not None else KV()
        self._listen = socket.create_server((host, port), backlog=1024)
        self._listen.setblocking(False)
        self.host, self.port = host, self._listen.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ)
        self._peers: dict[socket.socket, _Peer] = {}
        self._unauthed: dict[socket.socket, _Peer] = {}  # oldest first: the handshake sweep
        self._waiters: dict[bytes, dict[int, list]] = {}  # key -> {id(wait): wait}
        self._deadlines: list = []  # heap of (deadline, id, wait)
        self._written: collections.deque = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self.kv.on_write = self._on_write
        self.max_conns = max_conns()
        # NOTE [one link per member]: front links handed over by the coordinator
        self.on_link = None  # called (tag, "report", payload) / (tag, "gone", said_bye)
        self._adopt_q: collections.deque = collections.deque()
        self._release_q: collections.deque = collections.deque()
        self._by_tag: dict = {}
        self.adopted = 0
        self.refused = 0  # connections closed for a failed proof or a protocol error
        self._stop = False
        # NOTE [heartbeats off the request queue]: the store's clock (``caught_up``)
        self._mark, self._idle = time.monotonic(), False
        self._thread = threading.Thread(target=self._serve, name="xv-store", daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        return len(self._peers)

    def _serve(self) -> None:
        while not self._stop:
            wait = 0.5 if not self._deadlines else \
                max(0.0, min(0.5, self._deadlines[0][0] - time.monotonic()))
            self._idle = True  # blocked in select: nothing received is left unread
            ready = self._sel.select(timeout=wait)
            began, self._idle = time.monotonic(), False
            for key, mask in ready:
                if key.fileobj is self._listen:
                    self._accept()
                elif key.fileobj is self._wake_r:
                    try:
                        self._wake_r.recv(4096)
                    except OSError:
                        pass
                elif mask & selectors.EVENT_READ:
                    self._read(key.fileobj)
                if mask & selectors.EVENT_WRITE and key.fileobj in self._peers:
                    self._flush(key.fileobj)
            self._take_links()
            self._wake_written()
            now = time.monotonic()
            while self._deadlines and self._deadlines[0][0] <= now:
                _, _, w = heapq.heappop(self._deadlines)
                self._answer(w, None)
            for s, p in list(self._unauthed.items()):  # a client that never proves itself
                if now - p.since <= HANDSHAKE_S:
                    break
                if s in self._unauthed:  # NOTE [late hellos]: read what arrived first
                    self._read(s)
                if s in self._unauthed:
                    self._close(s, refused=True)
            self._mark = began  # what had arrived when this pass began is applied now

    def caught_up(self) -> float:
        """A ``time.monotonic()`` time such that every request that reached this server
        before it has been applied: now while the serving thread waits for input, else the
        start of the last pass it finished (NOTE [heartbeats off the request queue])."""
        return time.monotonic() if self._idle else self._mark

    # -- front links handed over (NOTE [one link per member]) ----------------------------
    def adopt(self, sock: socket.socket, tag, buf: bytes = b"") -> None:
        """Serve ``sock``, a front link whose hello the coordinator checked (the token's
        HMAC over its nonce), as an authenticated store connection from now on: the
        member's store requests, and ``REPORT`` / ``BYE`` (no reply) passed to ``on_link``
        with ``tag``, as its close is. Any thread; ``buf``: bytes already read off it."""
        self._adopt_q.append((sock, tag, buf))
        self._wake()

    def release(self, tag) -> None:
        """Close the adopted link ``tag`` without reporting it gone (it was replaced)."""
        self._release_q.append(tag)
        self._wake()

    def _wake(self) -> None:
        if threading.get_ident() != self._thread.ident:
            try:
                self._wake_w.send(b"!")
            except OSError:  # the pipe is full: a wake-up is pending anyway
                pass

    def _take_links(self) -> None:
        while self._adopt_q:
            s, tag, buf = self._adopt_q.popleft()
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            p = _Peer(b"")
            p.authed, p.tag, p.buf = True, tag, buf
            self._peers[s] = p
            self._by_tag[tag] = s
            self.adopted += 1
            self._sel.register(s, selectors.EVENT_READ)
            if buf:
                try:
                    self._process(s, p)
                except Exception:
                    self._close(s, refused=True)
        while self._release_q:
            s = self._by_tag.get(self._release_q.popleft())
            if s is not None and s in self._peers:
                self._peers[s].bye = None  # replaced: not gone
                self._close(s)

    def _link_event(self, tag, kind: str, arg) -> None:
        if self.on_link is not None:
            try:
                self.on_link(tag, kind, arg)
            except Exception:  # the owner's bug must not stop the store
                pass

    # -- waits (NOTE [scale] above) --------------------------------------------------------
    def _on_write(self, key: bytes) -> None:
        """A key was written (by any thread): wake its waiters from the serving thread."""
        if key in self._waiters:
            self._written.append(key)
            if threading.get_ident() != self._thread.ident:
                try:
                    self._wake_w.send(b"!")
                except OSError:  # the pipe is full: a wake-up is pending anyway
                    pass

    def _wake_written(self) -> None:
        while self._written:
            key = self._written.popleft()
            for w in list(self._waiters.get(key, {}).values()):
                self._answer(w, w[1].index(key))

    def _found(self, keys: list[bytes], i: int, value: bool) -> bytes:
        """The answer to a wait whose key ``i`` exists (with its value for ``WAITV``)."""
        if not value:
            return _pack(OK, [str(i).encode()])
        st, got = self.kv.apply(GET, [keys[i]])
        return _pack(OK, [str(i).encode(), got[0] if st == OK else b""])

    def _start_wait(self, s: socket.socket, p: _Peer, f: list[bytes],
                    value: bool = False) -> None:
        if p.wait is not None:
            raise ValueError("a second wait on one connection")
        if not f:
            raise ValueError("a wait without a timeout")
        timeout, keys = min(int(f[0]) / 1000, MAX_WAIT_S), f[1:]
        i = self.kv.first_present(keys)
        if i is not None or timeout <= 0 or not keys:
            self._send(s, p, self._found(keys, i, value) if i is not None
                       else _pack(MISSING, []))
            return
        w = p.wait = [s, keys, False, value]
        for k in keys:
            self._waiters.setdefault(k, {})[id(w)] = w
        heapq.heappush(self._deadlines, (time.monotonic() + timeout, id(w), w))
        # written between the check and the registration (another thread): answer now
        i = self.kv.first_present(keys)
        if i is not None:
            self._answer(w, i)

    def _answer(self, w: list, index: int | None) -> None:
        if w[2]:
            return
        w[2] = True
        for k in w[1]:
            ws = self._waiters.get(k)
            if ws is not None:
                ws.pop(id(w), None)
                if not ws:
                    del self._waiters[k]
        p = self._peers.get(w[0])
        if p is None or p.wait is not w:
            return
        p.wait = None
        self._send(w[0], p, self._found(w[1], index, w[3]) if index is not None
                   else _pack(MISSING, []))

    def _accept(self) -> None:
        while True:  # drain the backlog: a burst of connections is served in one pass
            try:
                s, _ = self._listen.accept()
            except OSError:  # none pending, or out of descriptors: next pass
                return
            self._admit(s)

    def _admit(self, s: socket.socket) -> None:
        if len(self._peers) - self.adopted >= self.max_conns:
            s.close()
            self.refused += 1
            return
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        p = _Peer(secrets.token_bytes(16))
        self._peers[s] = p
        self._unauthed[s] = p
        self._sel.register(s, selectors.EVENT_READ)
        self._send(s, p, MAGIC + p.nonce)

    def _read(self, s: socket.socket) -> None:
        p = self._peers.get(s)
        if p is None:
            return
        try:
            data = s.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(s)
            return
        p.buf += data
        try:
            self._process(s, p)
        except (ValueError, struct.error):
            self._close(s, refused=True)
        except Exception:  # the state store refused (etcdstore.Fenced): serve no more
            self._close(s)

    def _process(self, s: socket.socket, p: _Peer) -> None:
        if not p.authed:
            if len(p.buf) < 32:
                return
            if not hmac.compare_digest(p.buf[:32], proof(self._token, p.nonce)):
                raise ValueError("wrong proof")
            p.authed, p.buf = True, p.buf[32:]
            self._unauthed.pop(s, None)
        while len(p.buf) >= 4:
            (n,) = _LEN.unpack_from(p.buf)
            if n > MAX_FRAME:
                raise ValueError(f"frame of {n} bytes")
            if len(p.buf) < 4 + n:
                return
            body, p.buf = p.buf[4:4 + n], p.buf[4 + n:]
            op, f = _unpack(body)
            if op in (WAIT, WAITV):
                self._start_wait(s, p, f, op == WAITV)
                continue
            if op == BEAT:  # no reply (NOTE [heartbeats off the request queue])
                if len(f) != 1:
                    raise ValueError(f"a beat with {len(f)} fields")
                self.kv.beat(f[0])
                continue
            if op in (REPORT, BYE):  # a front link's own messages (NOTE [one link per member])
                if p.tag is None or (op == REPORT and len(f) != 1):
                    raise ValueError(f"op {op} on a plain store connection")
                if op == BYE:
                    p.bye = True
                self._link_event(p.tag, "report", f[0]) if op == REPORT else None
                continue
            status, fields = self.kv.apply(op, f)
            self._send(s, p, _pack(status, fields))

    def _send(self, s: socket.socket, p: _Peer, data: bytes) -> None:
        p.out += data
        self._flush(s)

    def _flush(self, s: socket.socket) -> None:
        p = self._peers.get(s)
        if p is None:  # closed meanwhile
            return
        try:
            sent = s.send(p.out) if p.out else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(s)
            return
        p.out = p.out[sent:]
        if bool(p.out) != p.writing:  # NOTE [scale]: no epoll_ctl per reply
            p.writing = bool(p.out)
            self._sel.modify(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if p.out else 0))

    def _close(self, s: socket.socket, refused: bool = False) -> None:
        self.refused += refused
        p = self._peers.pop(s, None)
        self._unauthed.pop(s, None)
        if p is not None and p.wait is not None:
            w, p.wait = p.wait, None
            self._answer(w, None)
        if p is not None and p.tag is not None:
            self.adopted -= 1
            if self._by_tag.get(p.tag) is s:
                del self._by_tag[p.tag]
            if p.bye is not None:  # None: released (replaced), not gone
                self._link_event(p.tag, "gone", p.bye)
        try:
            self._sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        for s in list(self._peers):
            self._close(s)
        self._listen.close()
        self._wake_r.close()
        self._wake_w.close()


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
        """Start ``wait_any(keys, timeout_s)`` on the server and return at once: its answer
        is read with ``answer``; meanwhile this thread may send ``beat``s only (they have no
        reply). NOTE [the abort watch] in control."""
        ms = str(max(0, int(min(timeout_s, MAX_WAIT_S) * 1000))).encode()
        c = self._client()
        try:
            c.sock.sendall(_pack(WAIT, [ms] + [self._k(k) for k in keys]))
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
        return int(f[0]) if status == OK else None

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
