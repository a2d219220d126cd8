"""The store's server: serves a ``KV`` to token holders on one thread (handshake, frames,
server-side waits, beats without a reply, front links handed over by the coordinator).
NOTEs: [scale], [heartbeats off the request queue], [late hellos], [one link per member]
in authstore (the public module, which re-exports ``StoreServer``)."""

from __future__ import annotations

import collections
import heapq
import hmac
import secrets
import selectors
import socket
import struct
import threading
import time

from . import storewire as W
from .storekv import KV
from .storewire import (ADD, BEAT, BYE, GET, MAGIC, MAX_FRAME, MAX_WAIT_S, MISSING, OK,
                        REPORT, WAIT, WAITV, _LEN, _pack, _unpack, max_conns, proof)


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
                if now - p.since <= W.HANDSHAKE_S:
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
            self._wake()

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

