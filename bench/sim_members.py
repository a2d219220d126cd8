"""Simulated members at scale: N protocol-level members against a real coordinator process.

    python bench/sim_members.py --members 1000,10000 [--json out.json]

For each size, in one run: a real ``xvendor coordinator`` process (its CLI, a token file,
the embedded store, loopback), and N simulated members spread over shard processes of
1,000 members each (each one ``selectors`` loop over the members' raw non-blocking sockets,
every member a coroutine it drives: NOTE [one selectors loop per shard]). Measured, in order:

  formed    the shards' first connect -> every member formed epoch 0 (all N admitted,
            the coordinator proposed epoch 0 with all of them, every member saw every
            member's ready flag);
  kill      ``--kill`` members have both sockets torn down at once (as kill -9 would) ->
            the new epoch without them is proposed (agreed), and -> every survivor formed it;
  straggler one member's compute becomes ``--straggler-busy`` s per step -> the coordinator
            evicts it (its death notice), and -> every survivor formed the epoch without it;
  steady    coordinator CPU (cores: utime + stime over wall time, /proc) while the members
            step for ``--steady-s`` s; its resident memory per member (RSS with N members
            minus RSS before the first one, over N); bytes per heartbeat (the request and
            reply frames on the store link, TCP/IP headers not counted; a beat has no reply);
  counts    control-plane store requests (heartbeats not counted) per survivor from the
            kill to its epoch formed (+0.2 s), and per member per step while stepping: what
            the protocol costs, whatever the machine's load (the times are not);
  lag       each shard's loop lag (``Shard.lag``): a simulated member's beat waits
            for its shard's loop, a real member's does not;
  sim CPU   the shards' CPU per member over epoch 0's formation (``form_sim_ms_per_member``)
            and while stepping (``sim_cores``): the simulator's own cost, which shares the
            machine's cores with the coordinator.

What a simulated member reproduces of a real one (``ResilientGroup`` joined through
``env.join`` with the coordinator), message for message on the real sockets:
  - admission on the front port (a TCP connect of its own): the coordinator's greeting,
    the real ``wire.hello`` (token HMAC over the nonce, versions, lane, replica id), the
    reply; the connection stays open
    for the member's life and carries its busy report per step and a goodbye at the end;
  - the store link (``authstore``'s frames; by default the front link itself after the
    reply, NOTE [one link per member]; with ``--two-links`` a connection of its own with
    the nonce and proof), on which:
    its pid key and heartbeat counter (``control.Heartbeat``: a ``BEAT`` frame, no reply,
    every ``hb_interval_s`` of the timing the coordinator handed out, from a timer on the
    shard's loop, whatever the member waits for), the wait for epoch 0
    (``env.join``), epoch agreement and formation (``membership.converge`` and ``form``: the
    latest-epoch probe, the abort flag, the death list, the departed check, the survivors'
    proposal, the ready flags and the poll for every member's, ``plan_transfer`` on them),
    and per step: compute (a sleep), the collective (a server-side wait on the abort flag
    for ``--collective-s``, answered with the flag's value: what the real member's slices
    read off its heartbeat thread's wait, NOTE [the abort watch] in control, reason and
    next epoch included, NOTE [the next epoch in the abort flag]; the real member's other
    reads of an armed flag cost nothing either, here each is a request), the busy report,
    the vote and verdict (``stepguard.verdict``), the step boundary (``commit_step``:
    progress key, join slots, grow decision), and recovery (``recover``: abort, converge);
  - on a kill its sockets are closed at once, nothing more sent (as the kernel closes a
    killed process's); an excluded member (a straggler) closes them after a goodbye.
  Each request is its frame written to the socket and the member's coroutine suspended
  until the reply frame is read off it: one request in flight per member, as a real
  member's main thread has; the bytes are those ``authstore``'s client sends.
What it leaves out: the data plane (no gloo group is built, no collective moves bytes, no
state is sent: the "collective" is a wait of ``--collective-s``), torch and the model, the
flight recorder, newcomers, and the several store connections a real member opens (its
main thread, its heartbeat thread and its data plane each have one; a simulated member
sends all of that on one connection, in order; a beat needs no reply, so it is written
even while a control request of the member waits for its own). Many members share a
process, so one slow loop delays many.

``--store etcd``: the coordinator keeps its state in a local etcd (one replica, leading;
``etcdstore.LocalEtcd``, Debian's etcd-server binary) instead of its memory.

Descriptors: the coordinator holds one per simulated member: its hello asks for
``store_link`` and its front link then carries its store frames, step reports and goodbye
(NOTE [one link per member] in authstore; ``--two-links``: a store connection of its own
beside it, two per member, as before). The bench raises the open-file limit it inherits
to about N + 640, and where the hard limit forbids it (a container without
CAP_SYS_RESOURCE) says how many members fit. Each shard holds one descriptor per member of
its own (1,000 per shard). ``--connect-concurrency`` bounds the admissions in flight, split
over the shards (a member that sends no hello within the coordinator's 5 s handshake window
is closed; one it sent in time is read however late: NOTE [late hellos] in authstore).
"""

from __future__ import annotations

import argparse
import collections
import errno
import heapq
import itertools
import json
import multiprocessing as mp
import os
import resource
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)



def _control_plane_only() -> None:
    """NOTE [torch-free shards]: a shard process speaks the protocol only, yet importing any
    ``xvendor`` module runs ``xvendor/__init__``, which imports torch and registers every op
    (~550 MB and ~6.5 s of CPU per process: 5.4-6.5 GiB for the 10 shards at 10,000 members).
    A spawned shard (``__mp_main__``) gets a bare ``xvendor`` package instead; the
    control-plane modules it uses import no torch (NOTE [a torch-free control plane] in
    xvendor/distributed/__init__). The parent, which runs the coordinator and reads the
    store through ``AuthStore`` (a ``torch.distributed.Store``), imports xvendor as usual."""
    import re
    import types
    pkg = types.ModuleType("xvendor")
    pkg.__path__ = [os.path.join(ROOT, "xvendor")]
    with open(os.path.join(ROOT, "xvendor", "__init__.py")) as f:
        pkg.__version__ = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)
    sys.modules["xvendor"] = pkg


if __name__ == "__mp_main__":
    _control_plane_only()

from xvendor.distributed import storewire as A  # noqa: E402
from xvendor.distributed import control as cp  # noqa: E402
from xvendor.distributed import wire  # noqa: E402
from xvendor.distributed.membership import (_claim_round, decode_plan, encode_plan,  # noqa: E402
                                            plan_transfer)

PER_SHARD = 1000  # members per shard process (one or two sockets each); more, and one busy event loop
# delays the heartbeats of too many members (``Shard.lag``)


class Aborted(Exception):
    pass


class Excluded(Exception):
    pass


# -- the shard's event loop: one ``selectors`` loop, raw non-blocking sockets ---------------
# NOTE [one selectors loop per shard]: a shard ran its members on asyncio streams (a
# StreamReader/StreamWriter pair, a Task, a Lock and several Futures per member, and each
# request a ``readexactly`` twice through the transport's callbacks): the simulator cost
# ~3x the coordinator's CPU per member at 10,000 (2.75 vs 0.89 ms over epoch 0's formation)
# on a machine whose two cores it shares with the coordinator. Each member is still a
# coroutine (the protocol code reads as a real member's), driven by this loop instead: a
# member's socket is a ``Conn`` (a receive buffer that delivers one reply frame, one JSON
# line or n bytes to the coroutine waiting for it), a request is one ``send`` of its frame
# and one ``await`` of the reply, a sleep is a timer heap entry, and a heartbeat is a timer
# that writes its BEAT frame (no coroutine). The bytes on the sockets are the same.
class Killed(Exception):
    pass


@types.coroutine
def _trap(*cmd):
    """Suspend the running member's coroutine until the loop resumes it (``cmd``: what for)."""
    return (yield cmd)


def sleep(seconds: float):
    return _trap("sleep", seconds)


class Task:
    """One coroutine driven by ``Loop`` (a member's life)."""
    __slots__ = ("coro", "done", "parked")

    def __init__(self, coro):
        self.coro, self.done, self.parked = coro, False, None  # parked: the Conn it waits on


class Loop:
    """Run ready coroutines, then timers, then wait in ``select`` for the sockets."""

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.timers: list = []  # heap of (when, seq, fn, arg)
        self.ready: collections.deque = collections.deque()  # (task, value, exc)
        self.seq = itertools.count()
        self.current: Task | None = None
        self.stopped = False

    def spawn(self, coro) -> Task:
        t = Task(coro)
        self.ready.append((t, None, None))
        return t

    def call_later(self, delay: float, fn, arg=None) -> None:
        heapq.heappush(self.timers, (time.monotonic() + delay, next(self.seq), fn, arg))

    def resume(self, task: Task, value=None, exc=None) -> None:
        self.ready.append((task, value, exc))

    def kill(self, task: Task) -> None:
        """End a suspended task (its socket is gone): ``Killed`` is raised inside it."""
        if task is not None and not task.done and task is not self.current:
            task.parked = None
            self.ready.append((task, None, Killed()))

    def _step(self, task: Task, value, exc) -> None:
        if task.done:
            return
        self.current = task
        try:
            cmd = task.coro.throw(exc) if exc is not None else task.coro.send(value)
        except BaseException:  # StopIteration, or what the member did not catch (it does)
            task.done = True
            return
        finally:
            self.current = None
        kind = cmd[0]
        if kind == "sleep":
            self.call_later(cmd[1], self._wake, task)
        elif kind == "read":  # ("read", conn, how): a reply frame, a line, n bytes
            conn = cmd[1]
            conn.waiter, conn.how, task.parked = task, cmd[2], conn
            conn.deliver()
        elif kind == "slot":
            cmd[1].acquire(task)
        elif kind == "connect":
            conn = cmd[1]
            conn.waiter, conn.how, task.parked = task, "connect", conn
            self.sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
        else:
            raise RuntimeError(f"unknown trap {cmd!r}")

    def _wake(self, task: Task) -> None:
        self.ready.append((task, None, None))

    def run(self, until) -> None:
        sel, timers, ready = self.sel, self.timers, self.ready
        while not until():
            while ready:
                self._step(*ready.popleft())
            now = time.monotonic()
            while timers and timers[0][0] <= now:
                _, _, fn, arg = heapq.heappop(timers)
                fn(arg)
            if ready:
                wait = 0.0
            else:
                wait = min(0.05, max(0.0, timers[0][0] - time.monotonic())) if timers else 0.05
            for key, mask in sel.select(wait):
                key.data.on_event(mask)


class Slots:
    """At most ``n`` admissions in flight (``--connect-concurrency``)."""

    def __init__(self, loop: Loop, n: int):
        self.loop, self.free, self.queue = loop, n, collections.deque()

    def acquire(self, task: Task) -> None:
        if self.free > 0:
            self.free -= 1
            self.loop.resume(task)
        else:
            self.queue.append(task)

    def take(self):
        return _trap("slot", self)

    def release(self) -> None:
        while self.queue:
            t = self.queue.popleft()
            if not t.done:
                self.loop.resume(t)
                return
        self.free += 1


class Conn:
    """A member's non-blocking TCP socket on the shard's ``Loop``: writes go out at once
    (the rest, if the socket is full, when it is writable again); what arrives is buffered
    and handed to the one coroutine waiting for it (a member has one request in flight;
    its beats have no reply)."""
    __slots__ = ("loop", "sock", "buf", "out", "waiter", "how", "eof", "closed")

    def __init__(self, loop: Loop):
        self.loop = loop
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.buf, self.out = bytearray(), b""
        self.waiter = self.how = None
        self.eof = self.closed = False

    def connect(self, host: str, port: int):
        err = self.sock.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS, errno.EAGAIN):
            raise ConnectionError(f"connect: {os.strerror(err)}")
        self.loop.sel.register(self.sock, selectors.EVENT_WRITE, self)
        return _trap("connect", self)

    def on_event(self, mask: int) -> None:
        if self.closed:
            return
        if self.how == "connect":
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.loop.sel.modify(self.sock, selectors.EVENT_READ, self)
            t, self.waiter, self.how = self.waiter, None, None
            t.parked = None
            self.loop.resume(t, None, ConnectionError(os.strerror(err)) if err else None)
            return
        if mask & selectors.EVENT_WRITE:
            self._flush()
        if mask & selectors.EVENT_READ:
            try:
                data = self.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self.loop.sel.unregister(self.sock)
                self.closed = True  # the peer is gone: nothing more arrives
            else:
                self.buf += data
            self.deliver()

    def deliver(self) -> None:
        """Hand the waiting coroutine what it waits for, if it has arrived."""
        t, how, buf = self.waiter, self.how, self.buf
        if t is None:
            return
        got = None
        if how == "frame":
            if len(buf) >= 4:
                n = int.from_bytes(buf[:4], "big")
                if len(buf) >= 4 + n:
                    got = bytes(buf[4:4 + n])
                    del buf[:4 + n]
        elif how == "line":
            i = buf.find(b"\n")
            if i >= 0:
                got = bytes(buf[:i + 1])
                del buf[:i + 1]
        elif len(buf) >= how:  # n bytes
            got = bytes(buf[:how])
            del buf[:how]
        if got is not None:
            self.waiter = self.how = t.parked = None
            self.loop.resume(t, got)
        elif self.eof:
            self.waiter = self.how = t.parked = None
            self.loop.resume(t, None, ConnectionError("the coordinator closed the link"))

    def read(self, how):
        """Await one reply frame's body (``"frame"``), one line (``"line"``) or n bytes."""
        return _trap("read", self, how)

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionError("closed")
        if self.out:
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(data):
            self.out = data[sent:]
            self.loop.sel.modify(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, self)

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            sent = len(self.out)
        self.out = self.out[sent:]
        if not self.out:
            self.loop.sel.modify(self.sock, selectors.EVENT_READ, self)

    def close(self) -> None:
        """Close now (what is unsent is dropped, as kill -9 drops it)."""
        if not self.closed:
            self.closed = True
            try:
                self.loop.sel.unregister(self.sock)
            except (KeyError, ValueError):
                pass
        self.sock.close()


# -- one member's store link ------------------------------------------------------------
class Store:
    """An ``authstore`` client on the shard's loop (the same handshake and frames as
    ``_Client``): one request in flight (the member's), beats written between."""

    def __init__(self, pre: bytes, stats: dict):
        self.pre, self.stats = pre, stats
        self.sent = 0  # this member's requests (beats not counted)
        self.c: Conn | None = None

    async def open(self, loop: Loop, host: str, port: int, token: str) -> None:
        self.c = Conn(loop)
        await self.c.connect(host, port)
        greet = await self.c.read(len(A.MAGIC) + 16)
        if greet[:4] != A.MAGIC:
            raise ConnectionError("not an xvendor store")
        self.c.write(A.proof(token, greet[4:]))

    async def call(self, op: int, fields: list[bytes], hb: bool = False):
        frame = A._pack(op, fields)
        self.c.write(frame)
        body = await self.c.read("frame")
        s = self.stats
        s["requests"] += 1
        s["ops"][op] = s["ops"].get(op, 0) + 1  # by operation (the kill phase's breakdown)
        self.sent += 1
        if hb:
            s["hb"] += 1
            s["hb_bytes"] += len(frame) + 4 + len(body)
        return A._unpack(body)

    def beat(self, key: str) -> None:
        """A heartbeat: no reply (NOTE [heartbeats off the request queue] in authstore), so
        it is written at once, between a request of the member and its reply."""
        frame = A._pack(A.BEAT, [self.k(key)])
        self.c.write(frame)
        self.stats["requests"] += 1
        self.stats["hb"] += 1
        self.stats["hb_bytes"] += len(frame)

    def k(self, key: str) -> bytes:
        return self.pre + key.encode()

    async def check(self, keys: list[str]) -> bool:
        return (await self.call(A.CHECK, [self.k(x) for x in keys]))[1][0] == b"1"

    async def get(self, key: str) -> bytes | None:
        st, f = await self.call(A.GET, [self.k(key)])
        return f[0] if st == A.OK else None

    async def set(self, key: str, value: str) -> None:
        await self.call(A.SET, [self.k(key), value.encode()])

    async def add(self, key: str, n: int, hb: bool = False) -> int:
        return int((await self.call(A.ADD, [self.k(key), str(n).encode()], hb))[1][0])

    async def cas(self, key: str, expected: str, desired: str) -> bytes:
        return (await self.call(A.CAS, [self.k(key), expected.encode(), desired.encode()]))[1][0]

    async def multi_get(self, keys: list[str]) -> list[bytes] | None:
        st, f = await self.call(A.MGET, [self.k(x) for x in keys])
        return f if st == A.OK else None

    async def wait_any(self, keys: list[str], timeout_s: float) -> int | None:
        ms = str(int(timeout_s * 1000)).encode()
        st, f = await self.call(A.WAIT, [ms] + [self.k(x) for x in keys])
        return int(f[0]) if st == A.OK else None

    async def wait_value(self, keys: list[str], timeout_s: float) -> tuple[int, bytes] | None:
        ms = str(int(timeout_s * 1000)).encode()
        st, f = await self.call(A.WAITV, [ms] + [self.k(x) for x in keys])
        return (int(f[0]), f[1]) if st == A.OK else None

    def close(self) -> None:
        if self.c is not None:
            self.c.close()


# -- one member ----------------------------------------------------------------------------
class Member:
    def __init__(self, shard: "Shard", idx: int):
        self.shard, self.idx = shard, idx
        self.member = None
        self.link = None  # the front link (a ``Conn``)
        self.task: Task | None = None
        self.busy = shard.spec["step_s"]
        self.killed = False
        self.step = 0
        self.epoch = -1
        self.abort_seen = -1  # the latest epoch whose abort flag this member saw
        self.abort_raw: dict[int, bytes] = {}  # the values of the abort flags it read
        self.members: list[int] = []
        self.dead_seen, self.dead = 0, {}
        self.left_seen, self.left = 0, set()
        self._members_set: tuple = (None, set())  # (list, its set): departed() in O(deaths)

    # control-plane reads, as ``Control`` does them
    async def record(self, e: int) -> dict | None:
        raw = await self.s.get(cp.key_epoch(e))  # Control.get: one GET (try_get)
        return self.shard.parse(raw) if raw is not None else None

    async def latest_epoch(self) -> int:
        raw = await self.s.get(cp.KEY_LATEST)
        e = int(raw) if raw else 0
        while await self.s.check([cp.key_epoch(e + 1)]):
            e += 1
        return e

    async def aborted(self, e: int) -> bool:
        return await self.s.check([cp.key_abort(e)])

    async def abort(self, e: int, why: str) -> None:
        await self.s.cas(cp.key_abort(e), "", why)

    async def propose(self, e: int, rec: dict) -> None:
        rec = dict(rec, epoch=e, incarnation=self.incarnation)
        await self.s.cas(cp.key_epoch(e), "", cp.encode_record(rec))
        raw = await self.s.get(cp.KEY_LATEST)
        if e > (int(raw) if raw else 0):
            await self.s.set(cp.KEY_LATEST, str(e))

    async def dead_list(self) -> dict:
        n = await self.s.add(cp.KEY_DEAD_SEQ, 0)
        while self.dead_seen < n:
            raw = await self.s.get(f"{cp.ROOT}deadlist/{self.dead_seen}")
            if raw is None:
                break
            m = int(raw)
            self.dead[m] = (await self.s.get(cp.key_dead(m))).decode()
            self.dead_seen += 1
        return self.dead

    async def left_list(self) -> set:
        n = await self.s.add(cp.KEY_LEFT_SEQ, 0)
        while self.left_seen < n:
            raw = await self.s.get(f"{cp.ROOT}leftlist/{self.left_seen}")
            if raw is None:
                break
            self.left.add(int(raw))
            self.left_seen += 1
        return self.left

    async def departed(self, members: list[int]) -> set[int]:
        """``membership.departed``: the same requests and answer, computed over the few
        departed instead of the n members (a real member's O(n) is O(n^2) for a process
        simulating n: it starved the shard's event loop, heartbeats included)."""
        dead, left = await self.dead_list(), await self.left_list()
        if not dead and not left:
            return set()
        if self._members_set[0] is not members:  # one set per shard and epoch (a set of
            self._members_set = self.shard.member_set(members)  # 10,000 is ~0.5 MB)
        inside = self._members_set[1]
        return {m for m in dead if m in inside} | {m for m in left if m in inside}



    # the member's life
    async def run(self) -> None:
        sp = self.shard.spec
        try:
            slots = self.shard.connect_slots
            await slots.take()
            try:
                await self.admit(sp)
                self.s = Store(f"{self.prefix}/".encode(), self.shard.stats)
                if self.one_link:  # NOTE [one link per member] in authstore
                    self.s.c = self.link
                else:
                    await self.s.open(self.shard.loop, sp["host"], self.store_port, sp["token"])
                await self.s.set(cp.key_pid(self.member), str(os.getpid()))
                await self.s.add(cp.key_hb(self.member), 1, hb=True)
            finally:
                slots.release()
            self.shard.event("admitted", self.idx, self.member, time.time())
            self.shard.loop.call_later(self.timing["hb_interval_s"], self.heartbeat)
            t0 = time.monotonic()
            rec, checked = None, False
            keys = [cp.key_dead(self.member), cp.key_epoch(1), cp.key_abort(0), cp.key_epoch(0)]
            while rec is None:  # env.join: the wait answers with the record (NOTE [one read])
                got = await self.s.wait_value(keys, 5.0)
                if got and got[0] == len(keys) - 1:
                    rec, checked = self.shard.parse(got[1]), len(keys) == 4
                elif got:
                    rec = await self.record(0)
                    keys = [cp.key_epoch(0)]
                if rec is None and time.monotonic() - t0 > self.timing["join_timeout_s"]:
                    raise TimeoutError("no epoch 0")
            await self.converge(after=-1, known=(0, rec, checked))
            while True:
                await self.one_step()
        except Excluded as e:
            self.shard.event("excluded", self.idx, self.member, str(e))
            self.close(hard=False)
        except Killed:
            pass
        except Exception as e:  # noqa: BLE001 -- reported to the parent, which fails the run
            if not self.killed and not self.shard.stopping:
                self.shard.event("error", self.idx, self.member, f"{type(e).__name__}: {e}")
            self.close(hard=True)

    async def admit(self, sp: dict) -> None:
        self.link = c = Conn(self.shard.loop)
        await c.connect(sp["host"], sp["port"])
        greet = json.loads(await c.read("line"))
        hello = wire.hello(sp["token"], greet["nonce"], lane=0, replica=f"sim-{self.idx}",
                           restart=0, fingerprint=None, versions=sp["versions"])
        if sp["one_link"]:
            hello["store_link"] = True
        c.write((json.dumps(hello) + "\n").encode())
        reply = json.loads(await c.read("line"))
        if not reply.get("ok"):
            raise RuntimeError(f"refused: {reply.get('error')}")
        self.member, self.store_port = int(reply["member"]), int(reply["store_port"])
        self.prefix, self.timing = reply["prefix"], reply["timing"]
        self.incarnation = reply.get("incarnation")
        self.one_link = bool(reply.get("store_link"))
        if sp["one_link"] and not self.one_link:
            raise RuntimeError("the coordinator did not grant one link per member")

    def report(self, msg: dict) -> None:
        """A step report (busy time) or a goodbye on the front link: JSON lines, or store
        frames once the link carries the store (NOTE [one link per member])."""
        if self.one_link:
            self.s.c.write(A._pack(A.BYE, []) if msg.get("bye") else
                           A._pack(A.REPORT, [json.dumps(msg).encode()]))
        else:
            self.link.write((json.dumps(msg) + "\n").encode())

    def heartbeat(self, _=None) -> None:
        """Every ``hb_interval_s``: a timer on the shard's loop (a real member's heartbeat
        thread), writing its BEAT frame whatever the member's coroutine waits for."""
        if self.killed:
            return
        if self.shard.frozen != self.member:
            try:
                self.s.beat(cp.key_hb(self.member))
            except Exception:
                return
        self.shard.loop.call_later(self.timing["hb_interval_s"], self.heartbeat)

    def close(self, hard: bool) -> None:
        """``hard``: kill -9 (both sockets closed at once, nothing more sent); else a
        goodbye first. The member's coroutine, if suspended, ends (``Killed``)."""
        if self.killed:
            return
        self.killed = True
        if not hard and self.link is not None and not self.link.closed:
            try:
                self.report({"bye": True})
            except Exception:
                pass
        if self.link is not None:
            self.link.close()
        if getattr(self, "s", None) is not None and not getattr(self, "one_link", False):
            self.s.close()
        self.shard.loop.kill(self.task)

    async def converge(self, after: int, known: tuple | None = None) -> None:
        t = self.timing
        settle: dict[int, float] = {}
        t0 = time.monotonic()
        from_flag = True
        while True:
            if self.killed:
                raise Killed()
            if time.monotonic() - t0 > t["join_timeout_s"]:
                raise RuntimeError("membership did not converge")
            nxt = None  # NOTE [the next epoch in the abort flag] in control
            if known is None and after >= 0 and from_flag and after in self.abort_raw:
                nxt = self.shard.next_from_abort(self.abort_raw[after])
            from_flag = False
            if nxt is not None and nxt[0] == after + 1:
                known = (after + 1, nxt[1], True)
            if known is None and after >= 0:  # membership._next_epoch
                got = await self.s.wait_value([cp.key_dead(self.member), cp.key_epoch(after + 2),
                                               cp.key_abort(after + 1),
                                               cp.key_epoch(after + 1)], 0)
                if got and got[0] == 3:
                    known = (after + 1, self.shard.parse(got[1]), True)
            if known is not None:  # membership.converge's first look with a known record
                (e, rec, checked), known = (tuple(known) + (False,))[:3], None
                if e > after and self.member in rec["members"] and (checked or await
                        self.s.wait_value([cp.key_dead(self.member), cp.key_epoch(e + 1),
                                           cp.key_abort(e)], 0) is None):
                    try:
                        await self.form(e, rec)
                        return
                    except Aborted:
                        continue
            if await self.s.check([cp.key_dead(self.member)]):
                raise Excluded(f"member {self.member} was declared dead")
            latest = await self.latest_epoch()
            rec = await self.record(latest)
            if self.member not in rec["members"]:
                raise Excluded(f"not in epoch {latest}")
            if latest > after and not await self.aborted(latest):
                try:
                    await self.form(latest, rec)
                    return
                except Aborted:
                    continue
            await self.abort(latest, f"member {self.member} left epoch {latest}")
            gone = await self.departed(rec["members"])
            first = settle.setdefault(latest, time.monotonic())
            if not gone and time.monotonic() - first < t["hb_timeout_s"] + t["margin_s"]:
                await sleep(t["slice_s"])
                continue
            await self.propose(latest + 1, {"members": [m for m in rec["members"]
                                                        if m not in gone],
                                            "joins": rec.get("joins", 0),
                                            "news": [self.dead_seen, self.left_seen],
                                            "why": f"shrink after epoch {latest}: {sorted(gone)}"})

    async def form(self, e: int, rec: dict) -> None:
        t = self.timing
        members = rec["members"]
        news = rec.get("news") or (0, 0)  # NOTE [news after the record] in membership
        self.shard.event("seen", self.idx, self.member, e, time.time())
        n = len(members)  # the keys are built only by a member that decides (a real member
        # builds them up front: O(n) for it, but O(n^2) for a process simulating n)
        await self.s.set(cp.key_ready(self.member), cp.ready_value(  # NOTE [one ready key
            e, f"1:{self.step}" + (":synced" if self.epoch >= 0 else "")))  # a member]
        mine = await self.s.add(cp.key_ready_count(e), 1)
        t0 = time.monotonic()
        plan_key, decider, keys = cp.key_plan(e), mine >= n, None
        late = LateDecider(self.s, cp.key_ready_count(e), f"ready/{e}", n, self.member,
                           t["hb_timeout_s"])
        while True:  # membership.meet (_meet_on_news: NOTE [one read])
            if self.killed:
                raise Killed()
            decider = decider or await late.claims()  # NOTE [late deciders]
            if decider and await self.s.check(keys := keys or [cp.key_ready(m) for m in members]) \
                    and (flags := cp.ready_flags(await self.s.multi_get(keys), e)) is not None:
                src, need = plan_transfer(flags)
                won = await self.s.cas(plan_key, "", encode_plan(src, need, n))
                if e > 0:
                    await forget_decision(self.s, cp.key_ready_count(e - 1), f"ready/{e - 1}")
                src = self.shard.plan_src(won, n)
                break
            wait = 0.5 if decider else min(5.0, max(t["slice_s"],
                                                    late.next_at() - time.monotonic()))
            got = await self.s.wait_value([plan_key, cp.key_abort(e),  # NOTE [waits on news]
                                           f"{cp.ROOT}deadlist/{max(self.dead_seen, news[0])}",
                                           f"{cp.ROOT}leftlist/{max(self.left_seen, news[1])}"],
                                          wait)
            if got is not None and got[0] == 0:
                src = self.shard.plan_src(got[1], n)
                break
            if got is not None and got[0] == 1:
                raise Aborted()
            gone = await self.departed(members)
            if gone or time.monotonic() - t0 > t["join_timeout_s"]:
                await self.abort(e, f"members {sorted(gone)} will not arrive at epoch {e}")
                raise Aborted()
        if src is None:
            raise RuntimeError(f"epoch {e}: no member holds state")
        self.epoch, self.members, self.record_ = e, members, rec
        if e == 0:  # requests from admission to epoch 0 formed (the store link's)
            self.shard.stats["form_req"] += self.s.sent
            self.shard.stats["form_n"] += 1
        self.shard.event("formed", self.idx, self.member, e, time.time(), len(members))

    async def sliced_wait(self, seconds: float) -> None:
        """The collective: ``seconds`` of waiting for the abort flag on the server (a real
        member's heartbeat thread holds that wait for up to 10 s and its slices read the
        flag off it: NOTE [the abort watch] in control; here one wait per collective)."""
        e = self.epoch  # the watch's answer carries the flag's value (NOTE [the next epoch
        got = await self.s.wait_value([cp.key_abort(e), cp.key_epoch(e + 1)], seconds)  # in
        if got is not None and got[0] == 0:  # the abort flag] in control)
            self.abort_seen = e  # what a real member's watch saw (NOTE [the abort watch])
            self.abort_raw = {e: got[1]}
            raise Aborted()

    async def one_step(self) -> None:
        e, s, me = self.epoch, self.step, self.member
        t0 = time.monotonic()
        ok = True
        try:
            await sleep(self.busy)  # compute
            busy = time.monotonic() - t0
            await self.sliced_wait(self.shard.spec["collective_s"])
        except Aborted:
            ok = False
        if ok:
            self.report({"busy": round(busy, 6), "step": s, "epoch": e})
        commit = await self.verdict(ok)
        if commit:  # commit_step
            self.step += 1
            await self.s.set(cp.key_progress(me), str(self.step))
            k0 = self.record_.get("joins", 0)
            seen = 0
            while await self.s.check([cp.key_join(k0 + seen)]):
                seen += 1
            await self.s.cas(cp.key_grow(e, self.step), "", str(seen))
            if seen:
                raise RuntimeError("the simulation starts no newcomers")
            return
        if self.abort_seen != e:  # recover (NOTE [a failed member does not vote])
            await self.abort(e, f"member {me} entered recovery")
        await self.converge(after=e)

    async def verdict(self, ok: bool) -> bool:
        e, s, me = self.epoch, self.step, self.member
        if not ok:  # NOTE [a failed member does not vote] in stepguard
            won = await self.s.cas(cp.key_verdict(e, s), "", "redo")
            if s >= 2:
                await self.s.call(A.DEL, [self.s.k(cp.key_vote(e, s - 2, me))])
            if self.abort_seen != e:
                await self.abort(e, f"member {me}: a collective of step {s} failed")
            return won == b"commit"
        await self.s.set(cp.key_vote(e, s, me), "1")
        mine, t0 = await self.s.add(cp.key_vote_count(e, s), 1), time.monotonic()
        if s >= 2:
            await self.s.call(A.DEL, [self.s.k(cp.key_vote(e, s - 2, me))])
        key, n = cp.key_verdict(e, s), len(self.members)  # votes: see form()
        decider, votes, got = mine >= n, None, None
        late = LateDecider(self.s, cp.key_vote_count(e, s), f"vote/{e}/{s}", n, me,
                           self.timing["hb_timeout_s"])
        bound = (self.timing["hb_timeout_s"] + 0.05 + self.timing["agent_tick_s"]
                 + self.timing["slice_s"] + self.timing["margin_s"])  # call_bound_s
        first = True
        while True:  # stepguard.verdict
            if self.killed:
                raise Killed()
            if first and (raw := await self.s.get(key)) is not None:
                return raw == b"commit"
            decider = decider or await late.claims()  # NOTE [late deciders]
            if decider and await self.s.check(
                    votes := votes or [cp.key_vote(e, s, m) for m in self.members]):
                got = await self.s.multi_get(votes)
                want = "commit" if got and all(v == b"1" for v in got) else "redo"
                won = await self.s.cas(key, "", want)
                if s >= 1:  # NOTE [one claim key a decision]
                    await forget_decision(self.s, cp.key_vote_count(e, s - 1), f"vote/{e}/{s - 1}")
                return won == b"commit"
            if first and await self.aborted(e):
                self.abort_seen = e
                return (await self.s.cas(key, "", "redo")) == b"commit"
            first = False
            now = time.monotonic()
            if now - t0 > bound:
                await self.abort(e, f"member {me}: no verdict on step {s} within the call bound")
            wait = 0.5 if decider else min(5.0, late.next_at() - now, t0 + bound - now)
            got = await self.s.wait_value([key, cp.key_abort(e)],
                                          max(self.timing["slice_s"] / 4, wait))
            if got is not None:
                if got[0] == 0:
                    return got[1] == b"commit"
                self.abort_seen, self.abort_raw = e, {e: got[1]}
                return (await self.s.cas(key, "", "redo")) == b"commit"


class LateDecider:
    """``membership.LateDecider`` on the simulated member's link (NOTE [late deciders]):
    one claim attempt a ``hb_timeout_s`` round, O(1) requests; only the winner checks."""

    def __init__(self, s: "Store", count_key: str, what: str, n: int, me: int, period_s: float):
        self.s, self.count_key, self.what, self.n = s, count_key, what, n
        self.me, self.period = str(me).encode(), max(period_s, 1e-3)
        self.began, self.round = time.monotonic(), 0

    def next_at(self) -> float:
        return self.began + (self.round + 1) * self.period

    async def claims(self) -> bool:
        now = time.monotonic()
        if now < self.next_at():
            return False
        self.round = int((now - self.began) / self.period)
        if await self.s.add(self.count_key, 0) < self.n:
            return False
        key, mine = cp.key_late(self.what), f"{self.round}:{self.me.decode()}".encode()
        won = await self.s.cas(key, "", mine.decode())  # NOTE [one claim key a decision]
        if won != mine and _claim_round(won.decode()) < self.round:
            won = await self.s.cas(key, won.decode(), mine.decode())
        return won == mine


async def forget_decision(s: "Store", count_key: str, what: str) -> None:
    """``membership.forget_decision`` (NOTE [one claim key a decision])."""
    await s.call(A.DEL, [s.k(count_key)])
    await s.call(A.DEL, [s.k(cp.key_late(what))])


# -- a shard process: many members on one event loop ----------------------------------------
class Shard:
    def __init__(self, conn, spec: dict):
        self.conn, self.spec = conn, spec
        self.members: dict[int, Member] = {}  # by index
        self.by_id: dict[int, Member] = {}
        self.stats = {"requests": 0, "hb": 0, "hb_bytes": 0, "lag_max_s": 0.0, "lag_s": 0.0,
                      "ops": {},
                      "form_req": 0, "form_n": 0}
        self.out: list = []
        self.stopping = False
        self.frozen = None
        self._parsed: dict = {}
        self._plans: dict = {}
        self._sets: dict = {}

    def parse(self, raw: bytes) -> dict:
        """An epoch record, parsed once per shard: every member of a shard reads the same
        O(n)-byte record, and a real member parses its own in its own process; here 1,000
        parses of it on one loop cost the simulator, not the protocol (at 10,000 members
        ~0.6 ms each). Read-only for the members."""
        got = self._parsed.get(raw)
        if got is None:
            if len(self._parsed) > 8:
                self._parsed.clear()
            got = self._parsed[raw] = cp.decode_record(raw)  # NOTE [compact epoch record]
        return got

    def next_from_abort(self, raw: bytes):
        """``control.split_abort``'s next epoch and record, once per shard (as ``parse``)."""
        key = ("abort", raw)
        if key not in self._parsed:
            if len(self._parsed) > 8:
                self._parsed.clear()
            self._parsed[key] = cp.split_abort(raw)[1]
        return self._parsed[key]

    def member_set(self, members: list) -> tuple:
        """(members, set(members)), shared by the shard's members (as ``parse``)."""
        got = self._sets.get(id(members))
        if got is None or got[0] is not members:
            if len(self._sets) > 8:
                self._sets.clear()
            got = self._sets[id(members)] = (members, set(members))
        return got

    def plan_src(self, raw: bytes, n: int):
        """``decode_plan``'s source member, once per shard (as ``parse``: O(n) each)."""
        key = (raw, n)
        if key not in self._plans:
            if len(self._plans) > 8:
                self._plans.clear()
            self._plans[key] = decode_plan(raw.decode(), n)[0]
        return self._plans[key]

    def event(self, *ev) -> None:
        self.out.append(ev)
        if ev[0] == "admitted":
            self.by_id[ev[2]] = self.members[ev[1]]

    def lag(self, t0: float) -> None:
        """How late this process's loop runs a 0.1 s timer: a late loop delays every
        member's heartbeat here, which a real member (a process of its own) would not see.
        ``lag_s`` the latest, ``lag_max_s`` the worst (the parent reports both)."""
        late = time.monotonic() - t0 - 0.1
        self.stats["lag_s"] = late
        self.stats["lag_max_s"] = max(self.stats["lag_max_s"], late)
        self.loop.call_later(0.1, self.lag, time.monotonic())

    def flush(self, _=None) -> None:
        batch, self.out = self.out, []
        self.conn.send(("events", batch, dict(self.stats)))
        self.loop.call_later(0.05, self.flush)

    def on_event(self, mask: int) -> None:  # the parent's pipe is readable
        while self.conn.poll():
            cmd = self.conn.recv()
            if cmd[0] == "kill":
                for m in cmd[1]:
                    if m in self.by_id:
                        self.by_id[m].close(hard=True)
            elif cmd[0] == "slow":
                if cmd[1] in self.by_id:
                    self.by_id[cmd[1]].busy = cmd[2]
            elif cmd[0] == "stop":
                self.stopping = True

    def main(self) -> None:
        self.loop = loop = Loop()
        self.connect_slots = Slots(loop, self.spec["connect_concurrency"])
        self.conn.send(("ready",))
        while not self.conn.poll(0.01):  # wait for "go"
            pass
        assert self.conn.recv() == ("go",)
        loop.sel.register(self.conn.fileno(), selectors.EVENT_READ, self)
        loop.call_later(0.05, self.flush)
        loop.call_later(0.1, self.lag, time.monotonic())
        for i in range(self.spec["first"], self.spec["first"] + self.spec["count"]):
            m = self.members[i] = Member(self, i)
            m.task = loop.spawn(m.run())
        loop.run(until=lambda: self.stopping)
        for m in self.members.values():
            m.close(hard=False)
        end = time.monotonic() + 0.1  # the members' coroutines end (Killed)
        loop.run(until=lambda: time.monotonic() > end)
        self.conn.send(("events", self.out, dict(self.stats)))
        self.conn.send(("bye",))


def _shard_main(conn, spec: dict) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    try:
        Shard(conn, spec).main()
    except BaseException:  # say why before the pipe closes (the parent reports it)
        import traceback
        try:
            conn.send(("crashed", traceback.format_exc()[-3000:]))
        except Exception:
            pass
        raise


# -- the parent: coordinator, shards, phases -------------------------------------------------
def _free_port_pair() -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free pair of ports")


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_sched(pid: int) -> tuple[float, float]:
    """(on CPU, waiting runnable on a run queue) in seconds, over every thread of ``pid``
    so far (/proc/<pid>/task/*/schedstat): how much of a phase the process could have run
    but the machine's other work had the cores."""
    run = wait = 0.0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                a, b = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        run, wait = run + int(a) / 1e9, wait + int(b) / 1e9
    return run, wait


def _proc_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def raise_fd_limit(n: int, per_member: int = 1) -> None:
    """The coordinator holds one connection per simulated member (the front link, which
    carries its store frames: NOTE [one link per member] in authstore; two with
    ``--two-links``; a real member holds three or four) and the store's own listener
    keeps half the open-file limit for plain connections (``authstore.max_conns``; the
    front port borrows what it leaves unused): raise the limit it inherits, or say how far
    it goes."""
    need = per_member * (n + 128) + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(need, hard)))
    except (ValueError, OSError):
        most = (hard - 512) // per_member - 128
        raise ValueError(f"--members {n}: the coordinator needs about {need} open files "
                         f"(ulimit -n), this process may raise it only to {hard}: at most "
                         f"{most} members here (raise the hard limit, as root with "
                         f"CAP_SYS_RESOURCE)") from None


class Run:
    """One size: the coordinator process, the shards, and what they reported."""

    def __init__(self, n: int, args, log=lambda msg: None):
        self.n, self.args, self.log = n, args, log
        self.tmp = tempfile.mkdtemp(prefix="xv-sim-")
        self.token = secrets.token_hex(16)
        tf = os.path.join(self.tmp, "token")
        with open(tf, "w") as f:
            f.write(self.token)
        os.chmod(tf, 0o600)
        raise_fd_limit(n, 2 if args.two_links else 1)
        self.port = _free_port_pair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
        self.coord_log = open(os.path.join(self.tmp, "coordinator.log"), "w")
        cmd = [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
               "--port", str(self.port), "--token-file", tf, "--min-replicas", str(n),
               "--join-timeout", str(args.timeout), "--hb-timeout", str(args.hb_timeout),
               "--straggler-steps", str(args.straggler_steps)]
        self.etcd = None
        if args.store == "etcd":  # one replica on a local etcd (NOTE [replicated state])
            from xvendor.distributed.etcdstore import LocalEtcd
            self.etcd = LocalEtcd()
            cmd += ["--store", self.etcd.url]
        self.coord = subprocess.Popen(cmd, env=env, stdout=self.coord_log, stderr=subprocess.STDOUT)
        self.prefix = wire.job_prefix(self.token, 0)
        self.events: dict[str, list] = {"seen": [], "formed": [], "excluded": [], "error": []}
        self.id_of: dict[int, int] = {}
        self.shard_of: dict[int, int] = {}
        self.shard_stats: dict[int, dict] = {}
        self.lag_max = 0.0  # the worst event-loop lag of a shard (``Shard.lag``)
        self.admitted_at = 0.0  # when the last member was admitted (wall clock)
        self._wait_listening()
        from xvendor.distributed.authstore import AuthStore
        self.ctl = cp.Control(AuthStore("127.0.0.1", self.port + 1, self.token,
                                          prefix=self.prefix))
        self.rss0 = _proc_rss(self.coord.pid)
        self.fds0 = len(os.listdir(f"/proc/{self.coord.pid}/fd"))

    def _wait_listening(self) -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if self.coord.poll() is not None:
                raise RuntimeError(f"the coordinator exited {self.coord.returncode}: "
                                   + open(self.coord_log.name).read()[-2000:])
            try:
                socket.create_connection(("127.0.0.1", self.port + 1), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the coordinator never listened")

    def start_shards(self) -> None:
        import torch

        import xvendor
        ctx = mp.get_context("spawn")
        k = max(1, -(-self.n // PER_SHARD))
        self.shards = []
        spec = {"host": "127.0.0.1", "port": self.port, "token": self.token,
                "step_s": self.args.step_s, "collective_s": self.args.collective_s,
                # in flight over all shards: more shards must not mean more at once (a
                # member's hello must leave it within the coordinator's 5 s window)
                "connect_concurrency": max(1, self.args.connect_concurrency // k),
                "one_link": not self.args.two_links,
                # the hello's versions, as a real member's (NOTE [torch-free shards])
                "versions": (str(xvendor.__version__), str(torch.__version__))}  # TorchVersion
                # would import torch in the shard when unpickled
        first = 0
        for j in range(k):
            count = self.n // k + (1 if j < self.n % k else 0)
            a, b = ctx.Pipe()
            p = ctx.Process(target=_shard_main, args=(b, dict(spec, first=first, count=count)),
                            daemon=True)
            p.start()
            self.shards.append((p, a))
            first += count
        for p, a in self.shards:
            if not a.poll(120) or a.recv() != ("ready",):
                raise RuntimeError("a shard did not start")
        self.t_go = time.time()
        for p, a in self.shards:
            a.send(("go",))

    def pump(self, timeout: float = 0.05) -> None:
        from multiprocessing.connection import wait
        ready = wait([a for _, a in self.shards], timeout)
        for a in ready:
            j = [x for _, x in self.shards].index(a)
            while a.poll():
                try:
                    msg = a.recv()
                except (EOFError, OSError):
                    raise RuntimeError(f"shard {j} exited (code "
                                       f"{self.shards[j][0].exitcode})") from None
                if msg[0] == "crashed":
                    raise RuntimeError(f"shard {j} crashed: {msg[1]}")
                if msg[0] != "events":
                    continue
                self.shard_stats[j] = msg[2]
                self.lag_max = max(self.lag_max, msg[2].get("lag_max_s", 0.0))
                for ev in msg[1]:
                    if ev[0] == "admitted":
                        self.id_of[ev[1]] = ev[2]
                        self.admitted_at = max(self.admitted_at, ev[3])
                        self.shard_of[ev[2]] = j
                    else:
                        self.events[ev[0]].append(ev)
        if self.events["error"]:
            raise RuntimeError(f"{len(self.events['error'])} members failed, first: "
                               f"{self.events['error'][:3]}")
        if self.coord.poll() is not None:
            raise RuntimeError(f"the coordinator exited {self.coord.returncode}")

    def formed(self, e: int) -> list:
        return [ev for ev in self.events["formed"] if ev[3] == e]

    def wait_formed(self, e: int, count: int, what: str) -> float:
        return self.wait_formed_after(e - 1, count, what)[0]

    def wait_formed_after(self, after: int, count: int, what: str) -> tuple[float, int]:
        """Until ``count`` members formed one epoch newer than ``after`` that has ``count``
        members (deaths seen apart make an epoch each: the last one counts); (when the
        last of them formed it, that epoch)."""
        end = time.monotonic() + self.args.timeout
        last, e = -1, after + 1
        while True:
            self.pump()
            by: dict[int, list] = {}
            for ev in self.events["formed"]:
                if ev[3] > after and ev[5] == count:
                    by.setdefault(ev[3], []).append(ev)
            got = max(by.values(), key=len) if by else []
            e = got[0][3] if got else e
            if len(got) >= count:
                return max(ev[4] for ev in got), e
            if len(got) != last or len(self.id_of) < self.n:
                last = len(got)
                self.log(f"{self.n} members, {what}: {len(self.id_of)} admitted, "
                         f"{len(got)}/{count} formed epoch {e}, shard loop lag max "
                         f"{self.lag_max:.2f} s")
            if time.monotonic() > end:
                raise TimeoutError(f"{what}: {len(got)} of {count} members formed epoch {e} "
                                   f"within {self.args.timeout} s ({len(self.id_of)} admitted)")

    def ops(self) -> dict:
        """Requests by operation name so far (beats and step reports included)."""
        names = {getattr(A, k): k for k in ("SET", "GET", "ADD", "CAS", "CHECK", "MGET", "DEL",
                                             "WAIT", "WAITV")}
        got: dict = {}
        for st in self.shard_stats.values():
            for op, c in st.get("ops", {}).items():
                got[names.get(op, str(op))] = got.get(names.get(op, str(op)), 0) + c
        return got

    def requests(self) -> int:
        """Control-plane store requests every shard sent so far (heartbeats not counted)."""
        return sum(s["requests"] - s["hb"] for s in self.shard_stats.values())

    def send(self, member: int, cmd: tuple) -> None:
        self.shards[self.shard_of[member]][1].send(cmd)

    def close(self) -> None:
        for p, a in getattr(self, "shards", []):
            try:
                a.send(("stop",))
            except OSError:
                pass
        for p, a in getattr(self, "shards", []):
            p.join(20)
            if p.is_alive():
                p.kill()
        if self.coord.poll() is None:
            self.coord.send_signal(signal.SIGINT)
            try:
                self.coord.wait(20)
            except subprocess.TimeoutExpired:
                self.coord.kill()
        self.coord_log.close()
        if self.etcd is not None:
            self.etcd.close()
        # the token file and the coordinator's log: nothing is left in /tmp (the figures
        # that need the log are read before this, ``measure``)
        shutil.rmtree(self.tmp, ignore_errors=True)


def measure(n: int, args, log=lambda msg: None, out: dict | None = None) -> dict:
    """One size, every phase; the figures as a dict (see the module docstring). ``out``
    receives them as they are measured (what a failed phase left is kept there)."""
    out = {} if out is None else out
    out["members"] = n
    run = Run(n, args, log)
    try:
        pid = run.coord.pid
        cpu0 = _proc_cpu(pid)
        run.start_shards()
        sched0 = _proc_sched(pid)
        sim0 = sum(_proc_cpu(p.pid) for p, _ in run.shards)  # after their start (imports)
        t_formed = run.wait_formed(0, n, "epoch 0")
        # the shards' CPU over the formation, per member: the simulator's own cost, which
        # shares the machine's cores with the coordinator (NOTE [torch-free shards])
        out["form_sim_ms_per_member"] = 1000 * (sum(_proc_cpu(p.pid) for p, _ in run.shards)
                                                - sim0) / n
        rec0 = run.ctl.record(0)
        out["formed_s"] = t_formed - run.t_go
        # the last member admitted (its pid key and first beat written): the rest of
        # ``formed_s`` is epoch 0's proposal and formation
        out["admitted_s"] = run.admitted_at - run.t_go
        out["epoch0_members"] = len(rec0["members"])
        out["form_cpu_s"] = _proc_cpu(pid) - cpu0
        out["form_cores"] = out["form_cpu_s"] / out["formed_s"]
        out["form_coord_ms_per_member"] = 1000 * out["form_cpu_s"] / n
        sched1 = _proc_sched(pid)  # the coordinator's threads, runnable but not running
        out["form_coord_runq_wait_s"] = sched1[1] - sched0[1]
        out["form_coord_run_s"] = sched1[0] - sched0[0]
        time.sleep(0.1)
        run.pump()
        fr = sum(s.get("form_req", 0) for s in run.shard_stats.values())
        fn = sum(s.get("form_n", 0) for s in run.shard_stats.values())
        out["form_requests_per_member"] = fr / fn if fn else None
        ids = sorted(run.id_of.values())
        assert sorted(rec0["members"]) == ids, "epoch 0 is not every admitted member"

        # steady: the members step; coordinator CPU, memory, heartbeat bytes
        time.sleep(0.5)
        run.pump()
        hb0 = {j: dict(s) for j, s in run.shard_stats.items()}
        keys0 = run.ctl.store.num_keys()
        shard_cpu = lambda: sum(_proc_cpu(p.pid) for p, _ in run.shards)  # noqa: E731
        c0, s0, t0 = _proc_cpu(pid), shard_cpu(), time.monotonic()
        step0 = int(run.ctl.get(cp.key_progress(ids[0])) or 0)
        end = t0 + args.steady_s
        while time.monotonic() < end:
            run.pump()
        c1, s1, t1 = _proc_cpu(pid), shard_cpu(), time.monotonic()
        steps = int(run.ctl.get(cp.key_progress(ids[0])) or 0) - step0
        out["steady_steps"] = steps
        out["store_keys_per_step"] = ((run.ctl.store.num_keys() - keys0) / steps
                                      if steps else None)
        out["sim_cores"] = (s1 - s0) / (t1 - t0)
        run.pump()
        hb = sum(s["hb"] - hb0.get(j, {}).get("hb", 0) for j, s in run.shard_stats.items())
        hbb = sum(s["hb_bytes"] - hb0.get(j, {}).get("hb_bytes", 0)
                  for j, s in run.shard_stats.items())
        req = sum(s["requests"] - hb0.get(j, {}).get("requests", 0)
                  for j, s in run.shard_stats.items())
        out["steady_cores"] = (c1 - c0) / (t1 - t0)
        out["steady_store_requests_per_s"] = req / (t1 - t0)
        out["steady_requests_per_member_step"] = req / n / steps if steps else None
        out["heartbeats_per_s"] = hb / (t1 - t0)
        out["bytes_per_heartbeat"] = hbb / hb if hb else None
        out["coordinator_fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        out["coordinator_fds_per_member"] = (out["coordinator_fds"] - run.fds0) / n
        out["shard_fds_max"] = max(len(os.listdir(f"/proc/{p.pid}/fd")) for p, _ in run.shards)
        rss = _proc_rss(pid)
        out["coordinator_rss_mib"] = rss / 2**20
        out["rss_per_member_kib"] = (rss - run.rss0) / n / 1024
        out["steps_done"] = int(run.ctl.get(cp.key_progress(ids[0])) or 0)

        # kill: both sockets of --kill members torn down at once
        victims = ids[1:1 + args.kill]
        e = run.ctl.latest_epoch()
        survivors = [m for m in ids if m not in victims]
        run.pump()
        req_kill, ops_kill = run.requests(), run.ops()
        t_kill = time.time()
        by_shard: dict[int, list] = {}
        for v in victims:  # one command per shard: torn down in one pass of its loop
            by_shard.setdefault(run.shard_of[v], []).append(v)
        for vs in by_shard.values():
            run.send(vs[0], ("kill", vs))
        t_new, e_new = run.wait_formed_after(e, len(survivors), "kill")
        rec = run.ctl.record(e_new)
        seen = [ev[4] for ev in run.events["seen"] if ev[3] == e_new]
        out["kill_epochs"] = e_new - e  # 1 unless the deaths were seen apart
        out["kill"] = len(victims)
        out["killed"], out["kill_epoch"] = victims, rec["members"]
        out["kill_members"] = len(rec["members"])
        out["kill_agreed_s"] = min(seen) - t_kill
        out["kill_formed_s"] = t_new - t_kill
        time.sleep(0.2)  # the shards' last counts (flushed every 50 ms)
        run.pump()
        out["kill_requests_per_member"] = (run.requests() - req_kill) / len(survivors)
        out["kill_ops_per_member"] = {k: round((v - ops_kill.get(k, 0)) / len(survivors), 2)
                                      for k, v in run.ops().items() if v > ops_kill.get(k, 0)}
        assert sorted(rec["members"]) == survivors, "the new epoch is not the survivors"

        # straggler: one member computes --straggler-busy s per step
        e = e_new
        slow = survivors[len(survivors) // 2]
        rest = [m for m in survivors if m != slow]
        t_slow = time.time()
        run.send(slow, ("slow", slow, args.straggler_busy))
        deadline = time.monotonic() + args.timeout
        while not run.ctl.is_dead(slow):
            run.pump(0.01)
            log(f"{n} members, straggler: member {slow} slow for {time.time() - t_slow:.1f} s, "
                f"not evicted yet (--straggler-steps {args.straggler_steps} of "
                f"{args.straggler_busy} s), shard loop lag max {run.lag_max:.2f} s")
            if time.monotonic() > deadline:
                raise TimeoutError("the straggler was never evicted")
        t_evicted = time.time()
        why = run.ctl.get(cp.key_dead(slow))
        assert "straggler" in why, why
        t_new = run.wait_formed(e + 1, len(rest), "straggler")
        rec = run.ctl.record(e + 1)
        assert sorted(rec["members"]) == rest, "the epoch after the straggler is wrong"
        out["straggler_evicted_s"] = t_evicted - t_slow
        out["straggler_formed_after_verdict_s"] = t_new - t_evicted
        out["straggler_why"] = why
        out["straggler"], out["straggler_epoch"] = slow, rec["members"]
        out["coordinator_cpu_total_s"] = _proc_cpu(pid) - cpu0
        # the straggler learns its exclusion at its next look (after its slow compute),
        # possibly after the others formed the epoch without it
        end = time.monotonic() + args.straggler_busy + 10
        while slow not in [ev[2] for ev in run.events["excluded"]] and time.monotonic() < end:
            run.pump(0.05)
        out["excluded"] = [ev[2] for ev in run.events["excluded"]]
    finally:
        out["sim_loop_lag_max_s"] = run.lag_max
        run.coord_log.flush()
        with open(run.coord_log.name) as f:  # members declared hung (before the shards stop)
            out["stale_deaths"] = sum("heartbeat stale" in line for line in f)
        run.close()
    return out


def table(rows: list[dict]) -> str:
    cols = [("members", "members", "{:d}"), ("formed_s", "epoch 0 formed s", "{:.2f}"),
            ("admitted_s", "all admitted s", "{:.2f}"),
            ("kill_agreed_s", "kill->agreed s", "{:.3f}"),
            ("kill_formed_s", "kill->formed s", "{:.3f}"),
            ("straggler_evicted_s", "straggler evicted s", "{:.2f}"),
            ("straggler_formed_after_verdict_s", "evicted->formed s", "{:.3f}"),
            ("form_cores", "coord cores formation", "{:.2f}"),
            ("form_requests_per_member", "req/member to form 0", "{:.1f}"),
            ("coordinator_fds_per_member", "coord fds/member", "{:.2f}"),
            ("steady_cores", "coord cores", "{:.2f}"), ("sim_cores", "sim cores", "{:.2f}"),
            ("steady_steps", "steps", "{:d}"), ("store_keys_per_step", "keys/step", "{:.0f}"),
            ("rss_per_member_kib", "coord KiB/member", "{:.1f}"),
            ("bytes_per_heartbeat", "B/heartbeat", "{:.0f}"),
            ("heartbeats_per_s", "heartbeats/s", "{:.0f}"),
            ("steady_store_requests_per_s", "store req/s", "{:.0f}"),
            ("kill_requests_per_member", "kill ctl req/member", "{:.1f}"),
            ("steady_requests_per_member_step", "req/member/step", "{:.1f}"),
            ("stale_deaths", "stale deaths", "{:d}"),
            ("sim_loop_lag_max_s", "sim lag max s", "{:.2f}")]
    head = " | ".join(h for _, h, _ in cols)
    lines = [head, " | ".join("-" * len(h) for _, h, _ in cols)]
    for r in rows:
        lines.append(" | ".join(
            (f.format(r[k]) if r.get(k) is not None else "-").rjust(len(h)) for k, h, f in cols))
    lines.append("(coord cores, sim cores: CPU of the coordinator process and of the simulating "
                 "processes during the steady phase; B/heartbeat: store request + reply frames)")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", default="1000,10000",
                   help="comma-separated member counts, one run each")
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--kill", type=int, default=1, help="members killed at once")
    p.add_argument("--step-s", type=float, default=0.5, help="each member's compute per step")
    p.add_argument("--collective-s", type=float, default=0.1,
                   help="each step's collective wait (abort flag read every slice)")
    p.add_argument("--straggler-busy", type=float, default=2.0,
                   help="the straggler's compute per step (s)")
    p.add_argument("--straggler-steps", type=int, default=3,
                   help="the coordinator's --straggler-steps")
    p.add_argument("--hb-timeout", type=float, default=3.0, help="the coordinator's --hb-timeout")
    p.add_argument("--steady-s", type=float, default=5.0, help="seconds of the steady phase")
    p.add_argument("--timeout", type=float, default=300.0, help="limit of each phase (s)")
    p.add_argument("--store", choices=("embedded", "etcd"), default="embedded",
                   help="the coordinator's state: in its memory, or in a local etcd (Debian's "
                        "etcd-server; one coordinator replica, leading)")
    p.add_argument("--two-links", action="store_true",
                   help="each member opens a store connection of its own beside its front "
                        "link (the coordinator holds two descriptors per member), instead of "
                        "its store frames on the front link (NOTE [one link per member])")
    p.add_argument("--connect-concurrency", type=int, default=1024,
                   help="admissions in flight, split over the shard processes")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        sizes = [int(x) for x in args.members.split(",")]
    except ValueError:
        raise SystemExit(f"--members must be comma-separated integers, got {args.members!r}")
    if any(n < 3 for n in sizes):
        raise SystemExit("--members: every size must be >= 3 (a kill and a straggler leave "
                         "at least one member)")
    if not 1 <= args.kill <= min(sizes) - 2:
        raise SystemExit(f"--kill must be between 1 and the smallest size - 2, got {args.kill}")
    rows = []
    last = [0.0]

    def log(msg: str) -> None:
        if time.monotonic() - last[0] > 1.0:
            last[0] = time.monotonic()
            print(f"  ... {msg}", file=sys.stderr, flush=True)
    for n in sizes:
        print(f"{n} members ...", file=sys.stderr, flush=True)
        part: dict = {}
        try:
            rows.append(measure(n, args, log, part))
        except (TimeoutError, RuntimeError, AssertionError, ValueError) as e:
            rows.append(dict(part, error=str(e)))
            print(f"{n} members: FAILED: {e}", file=sys.stderr, flush=True)
        print(table(rows[-1:]), file=sys.stderr, flush=True)
    print(table(rows))
    for r in rows:
        if "error" in r:
            print(f"{r['members']} members: {r['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
