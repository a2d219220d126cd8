"""The coordinator: the part of the job that lives outside every replica group.

- Hosts the control-plane TCPStore (on ``store_port``, by default the front port + 1).
- Admits workers through its front port (``wire``): token (HMAC challenge), protocol and
  xvendor version, and, per lane, the model fingerprint must match; a refusal names the rule.
- Watches liveness with the worker's own connection: a process that dies (kill -9 included)
  closes it, seen at once; a hung one (SIGSTOP) by its store heartbeat going stale.
- Forms epoch 0 of each lane from whoever arrives: as soon as ``min_replicas`` are in, or
  with whoever is there after ``join_timeout_s``. Later arrivals queue as newcomers and are
  admitted by the members at a step boundary. With several processes per replica group
  (``lanes`` > 1 in the hello), epoch 0 of every lane is formed at once from the same
  replica groups, counting only groups whose every lane arrived: a group split between
  founders and newcomers would have its shards at different steps (``lanes``).
- Evicts stragglers: a member whose busy time (step start to its last collective launch) is
  over ``factor`` x the median (and ``min_s`` over it) for ``steps`` consecutive steps is
  declared dead like a failed one, and the flight recorder says so.
- Evicts a replica group whole: with several lanes, a verdict on one process of a group is
  extended to its mates in the other lanes (``lanes.UnitRoster``). Every verdict is logged
  with the member's replica group and the reason.

A lane is one rank position inside the replica groups (``RANK`` under torchrun): lane ``r``'s
resilient group joins rank ``r`` of every replica group. A pure DDP job has one lane.

It starts and signals no process: launchers (torchrun, Slurm, Kubernetes) restart workers.

NOTE [scale]: one Python process serves every member (10,000 simulated ones in
``bench/sim_members.py``), so nothing it does per message may cost O(members): connections
still in their handshake are kept apart (the silent-client sweep looks at them only), a
replaced link is found by its member id, epoch 0's founders are counted only once enough
arrived, and a step report costs O(1) (each epoch's record is parsed once; reports are
counted). Members heartbeat every ``hb_timeout / 8`` s (``coordinator_timing``), the
heartbeat scan reads only the silent members (NOTE [beats in arrival order] in storekv),
a worker may keep one connection for admission, liveness and the store (NOTE [one link per
member] in authstore: one descriptor per worker), and the listeners hold as many
connections as the open-file limit allows (``authstore.max_conns``).

With ``--store etcd://...`` the state lives in etcd v3 and two or three replicas take
turns leading (``etcdstore``: election, fencing, adoption; NOTE [replicated state]); workers
follow the leader (``env.Link.follow``). The rest of this paragraph is the embedded store's
case (``--store embedded``, the default: one job on one machine).

It is a single point, with its store, but a restartable one: when it dies, workers under
the step guard notice (their connection closes), keep retrying its address for the join
timeout, are admitted again by the new instance (same ports, same token), form a fresh
epoch 0 and take the state of the most advanced member (ResilientGroup.reconnect). Verified
here with a kill -9 of the coordinator mid-run (tests/distributed/test_ddp.py). Hand-written
loops without the guard must call ``rg.reconnect()`` themselves.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import selectors
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field


from . import authstore, storewire
from . import control as cp
from . import wire
from .control import Timing
from .lanes import UnitRoster
from .verdicts import Verdicts


@dataclass(frozen=True)
class StragglerPolicy:
    factor: float = 3.0   # busy > factor x median ...
    steps: int = 10       # ... for this many consecutive steps: evicted
    min_s: float = 0.1    # and at least this many seconds over the median (noise floor)

    @property
    def enabled(self) -> bool:
        return self.factor > 0 and self.steps > 0


@dataclass
class _Lane:
    index: int
    prefix: str
    ctl: cp.Control
    verdicts: Verdicts
    arrivals: list[int] = field(default_factory=list)
    arrived: set[int] = field(default_factory=set)  # the same ids: O(1) membership
    first_arrival: float | None = None
    formed: bool = False
    fingerprint: str | None = None
    busy: dict[tuple[int, int], dict[int, float]] = field(default_factory=dict)
    slow: dict[int, list[float]] = field(default_factory=dict)
    # epoch -> its members, a set (records are written once: NOTE [scale] in Coordinator)
    members_of: dict[int, tuple[list[int], set[int]]] = field(default_factory=dict)


@dataclass
class _Conn:
    nonce: str
    reader: wire.LineReader = field(default_factory=wire.LineReader)
    lane: int | None = None
    member: int | None = None
    bye: bool = False
    peer: str = ""
    since: float = field(default_factory=time.monotonic)


class Coordinator:
    def __init__(self, token: str, host: str = "0.0.0.0", port: int = 0,
                 store_port: int | None = None, min_replicas: int = 1,
                 join_timeout_s: float = 60.0, timing: Timing = Timing(),
                 straggler: StragglerPolicy = StragglerPolicy(), fr_dir: str | None = None,
                 log=None, incarnation: int | None = None, kv: authstore.KV | None = None):
        if not token:
            raise ValueError("token must be a non-empty string (XVENDOR_TOKEN or --token-file)")
        if min_replicas < 1:
            raise ValueError(f"min_replicas must be >= 1, got {min_replicas}")
        from .. import __version__
        self.version, self.token, self.timing = __version__, token, timing
        self.min_replicas, self.join_timeout_s = min_replicas, join_timeout_s
        self.straggler, self.fr_dir = straggler, fr_dir
        # NOTE [incarnations]: a restarted coordinator knows nothing of the old one and
        # numbers epochs and members from 0 again. Its incarnation (default: its start time
        # in ms, increasing across restarts while the clock does not step back) is in every
        # epoch record, flight-recorder dump name and log line, so two failures in two
        # incarnations are never merged (``xvendor fr analyze`` keeps them apart).
        self.incarnation = int(time.time() * 1000) if incarnation is None else int(incarnation)
        if self.incarnation < 0:
            raise ValueError(f"incarnation must be >= 0, got {incarnation}")
        inc = self.incarnation
        self._log = log or (lambda msg: print(f"xvendor coordinator [incarnation {inc}]: {msg}",
                                              file=sys.stderr, flush=True))
        # NOTE [admissions logged per pass]: one line per admitted worker, as before, but
        # the default log writes a pass's lines in one write (10,000 flushed writes to
        # stderr were one system call per hello on the serving thread); a caller's ``log``
        # gets each line as it happens
        self._admit_log = None if log is not None else []
        self._log_prefix = f"xvendor coordinator [incarnation {inc}]: "
        self._front = socket.create_server((host, port), reuse_port=False, backlog=1024)
        self._front.setblocking(False)
        self.port = self._front.getsockname()[1]
        sp = store_port if store_port is not None else (self.port + 1 if port else 0)
        # NOTE [the store behind the token]: not a TCPStore (no authentication, and its
        # server binds every interface whatever host it is given): ``authstore`` binds
        # ``host`` and serves only connections that prove they hold the token.
        # ``kv``: where the state lives (NOTE [replicated state] below); default in memory
        self._kv = kv if kv is not None else authstore.KV()
        self.store = authstore.StoreServer(token, host, sp, self._kv)
        self.store_port = self.store.port
        self._client = authstore.LocalStore(self._kv)
        self.lanes: dict[int, _Lane] = {}
        # several lanes per replica group: arrivals by (replica, restart) -> {lane: member}
        self.groups: dict[tuple[str, int], dict[int, int]] = {}
        self.group_lanes: int | None = None
        self.roster = UnitRoster()  # NOTE [a replica group is evicted whole] in lanes
        self._groups_since: float | None = None
        self.refusals: list[str] = []
        self._conns: dict[socket.socket, _Conn] = {}
        self._pending: dict[socket.socket, _Conn] = {}  # not admitted yet, oldest first
        self._by_member: dict[tuple[int, int], socket.socket] = {}  # (lane, member) -> link
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._front, selectors.EVENT_READ)
        self._max_conns = authstore.max_conns()
        # NOTE [one link per member] in authstore: front links handed to the store, and
        # what the store's thread reports of them (drained by the serving loop)
        self._links: dict[tuple[int, int], _Conn] = {}  # (lane, member) -> its link's state
        self._link_events: collections.deque = collections.deque()
        self.store.on_link = lambda tag, kind, arg: self._link_events.append((tag, kind, arg))
        self._closed = self._serving = False
        # the same in every hello's reply: computed once (NOTE [admissions logged per pass])
        self._job_prefix = wire.job_prefix(self.token, None)
        self._timing_dict = self.timing.as_dict()
        self._reply_tails: dict = {}

    # -- lanes --------------------------------------------------------------------------
    def lane(self, r: int) -> _Lane:
        if r not in self.lanes:
            prefix = wire.job_prefix(self.token, r)
            ctl = cp.Control(self._client.prefixed(prefix), self.incarnation)
            # the beats' own record where the state is this process's (NOTE [beats in
            # arrival order] in storekv); a replicated store's is scanned as before
            beats = self._kv if type(self._kv) is authstore.KV else None
            self.lanes[r] = _Lane(r, prefix, ctl, Verdicts(ctl, self.timing, self.fr_dir, lane=r,
                                                           incarnation=self.incarnation,
                                                           clock=self.store.caught_up,
                                                           beats=beats))
            # NOTE [replicated state]: with ``--store etcd://`` a new leader finds the lane's
            # epochs and verdicts already in the store (etcdstore); none in memory
            if ctl.record(0) is not None:
                self.lanes[r].formed = True
                self.lanes[r].verdicts.deaths.update(ctl.dead())
        return self.lanes[r]

    def deaths(self, lane: int = 0) -> dict[int, str]:
        return dict(self.lane(lane).verdicts.deaths)

    # -- the loop -----------------------------------------------------------------------
    def serve(self, until=lambda: False) -> None:
        """Run until ``until()`` is true or ``close()`` (from another thread)."""
        last_hb = 0.0
        tick = min(self.timing.agent_tick_s * 5, 0.05)
        self._serving = True
        try:
            while not self._closed and not until():
                for key, _ in self._sel.select(timeout=tick):
                    try:
                        if key.fileobj is self._front:
                            for _ in range(256):  # a burst is accepted in one pass
                                if not self._accept():
                                    break
                        else:
                            self._readable(key.fileobj)
                    except Exception as e:  # one bad connection must not stop the job
                        self._log(f"connection error: {e!r}")
                        self._forget(key.fileobj)
                self._drain_links()
                now = time.monotonic()
                self._drop_silent(now)
                self._form_epoch0_of_groups(now)
                for lane in list(self.lanes.values()):
                    self._form_epoch0(lane, now)
                if now - last_hb >= max(self.timing.hb_interval_s / 2, 0.05):
                    last_hb = now
                    for lane in list(self.lanes.values()):
                        lane.verdicts.check_heartbeats(now)
                        lane.verdicts.abort_epochs_with_dead()
                self.roster.settle(self.lanes, self.lane, self._log)
                for lane in list(self.lanes.values()):  # NOTE [the observer proposes the
                    lane.verdicts.propose_survivors()     # shrink] in verdicts
                self._flush_admit_log()
        finally:
            self._flush_admit_log()
            self._serving = False
            if self._closed:
                self._release()

    def _note_admitted(self, msg: str) -> None:
        if self._admit_log is None:
            self._log(msg)
        else:  # NOTE [admissions logged per pass]
            self._admit_log.append(f"{self._log_prefix}{msg}\n")

    def _flush_admit_log(self) -> None:
        if self._admit_log:
            lines, self._admit_log = "".join(self._admit_log), []
            try:
                sys.stderr.write(lines)
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def _reply(self, lane: _Lane, member: int, link: bool) -> bytes:
        """The hello's reply: the lane's part encoded once, the member's id spliced in
        (encoding the whole reply, the timing included, was a sixth of the admitting
        thread's samples at 10,000 members)."""
        tail = self._reply_tails.get((lane.index, link))
        if tail is None:
            tail = self._reply_tails[(lane.index, link)] = json.dumps(
                {"store_port": self.store_port, "store_link": link, "prefix": lane.prefix,
                 "job_prefix": self._job_prefix, "timing": self._timing_dict,
                 "incarnation": self.incarnation})[1:]
        return f'{{"ok": true, "member": {int(member)}, {tail}\n'.encode()

    def _send_small(self, sock: socket.socket, msg) -> None:
        """A greeting or a hello's reply on a non-blocking socket: a few hundred bytes fit
        a fresh connection's send buffer, so one ``send``; blocking only for a rest (before:
        two ``fcntl`` calls around every send). ``msg``: a dict, or its line encoded."""
        data = msg if isinstance(msg, bytes) else (json.dumps(msg) + "\n").encode()
        try:
            sent = sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(data):
            sock.setblocking(True)
            try:
                sock.sendall(data[sent:])
            finally:
                sock.setblocking(False)

    def _drop_silent(self, now: float) -> None:
        """A connection that has not passed the handshake within ``HANDSHAKE_S`` is closed:
        a client that connects and sends nothing holds nothing for long. Only the
        connections still in their handshake are looked at, oldest first (NOTE [scale]).
        What arrived is read first: silence is the client's, not this loop's (NOTE [late
        hellos] in authstore)."""
        for sock, c in list(self._pending.items()):
            if now - c.since <= storewire.HANDSHAKE_S:
                break
            if sock in self._pending:
                try:
                    self._readable(sock)  # nothing arrived: recv fails and drops it
                except Exception as e:
                    self._log(f"connection error: {e!r}")
            if sock in self._pending:  # a partial hello after the window: too slow
                self._forget(sock)

    def _accept(self) -> bool:
        """Accept one pending connection; False when none is pending."""
        try:
            sock, addr = self._front.accept()
        except OSError:  # nothing pending, or out of descriptors: try again next tick
            return False
        # adopted links are the front port's too (NOTE [one link per member] in authstore)
        if len(self._conns) + self.store.adopted >= self._max_conns + self._spare():
            sock.close()
            return True
        sock.setblocking(False)
        c = _Conn(nonce=wire.new_nonce(), peer=f"{addr[0]}:{addr[1]}")
        try:
            self._send_small(sock, {"coordinator": wire.PROTO, "nonce": c.nonce})
        except OSError:
            sock.close()
            return True
        self._conns[sock] = c
        self._pending[sock] = c
        self._sel.register(sock, selectors.EVENT_READ)
        return True

    def _readable(self, sock: socket.socket) -> None:
        c = self._conns[sock]
        try:
            data = sock.recv(65536)
            msgs = c.reader.feed(data) if data else None
        except (OSError, ValueError):
            data, msgs = b"", None
        if not data:
            self._drop(sock, c)
            return
        for m in msgs:
            if sock not in self._conns:  # handed to the store (NOTE [one link per member])
                return
            if c.member is None:
                if not self._admit(sock, c, m):
                    return
            elif m.get("bye"):
                c.bye = True
            elif "busy" in m:
                self._step_report(c, m)

    def _spare(self) -> int:
        """Descriptors the store's own listener leaves unused, lent to the front port: with
        one link per member the front port holds nearly all of them."""
        return max(0, self.store.max_conns - (self.store.connections - self.store.adopted))

    def _hand_over(self, sock: socket.socket, c: _Conn) -> None:
        """The admitted link carries the member's store frames from now on (NOTE [one link
        per member] in authstore): the store's thread serves it and reports it back."""
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        self._conns.pop(sock, None)
        self._pending.pop(sock, None)
        self._by_member[(c.lane, c.member)] = c  # not a socket: the store holds it
        self._links[(c.lane, c.member)] = c
        self.store.adopt(sock, (c.lane, c.member, id(c)), c.reader.take())

    def _drain_links(self) -> None:
        while self._link_events:
            (lane, member, cid), kind, arg = self._link_events.popleft()
            c = self._links.get((lane, member))
            if c is None or id(c) != cid:
                continue  # a link since replaced
            if kind == "report":
                try:
                    m = json.loads(arg)
                    self._step_report(c, m)
                except (ValueError, KeyError, TypeError) as e:
                    self._log(f"lane {lane}: member {member}: bad step report: {e!r}")
                continue
            del self._links[(lane, member)]
            if self._by_member.get((lane, member)) is c:
                del self._by_member[(lane, member)]
            c.bye = bool(arg)
            self._gone(c)

    def _forget(self, sock) -> None:
        if sock is self._front:
            return
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()
        self._conns.pop(sock, None)
        self._pending.pop(sock, None)

    def _drop(self, sock: socket.socket, c: _Conn) -> None:
        self._forget(sock)
        if self._by_member.get((c.lane, c.member)) is sock:
            del self._by_member[(c.lane, c.member)]
        self._gone(c)

    def _gone(self, c: _Conn) -> None:
        if c.member is not None and not c.bye:
            lane = self.lane(c.lane)
            if not lane.ctl.store.check([cp.key_left(c.member)]):
                lane.verdicts.declare(c.member, f"connection from {c.peer} closed without a "
                                                "goodbye: the process died (kill -9, crash) "
                                                "or its host failed")
                self._log(f"lane {c.lane}: member {c.member} failed: connection closed")

    def _refuse(self, sock: socket.socket, c: _Conn, why: str) -> bool:
        self.refusals.append(why)
        self._log(f"refused {c.peer}: {why}")
        try:
            sock.setblocking(True)
            wire.send(sock, {"ok": False, "error": why})
        except OSError:
            pass
        self._forget(sock)
        return False

    def _admit(self, sock: socket.socket, c: _Conn, m: dict) -> bool:
        why = wire.check_hello(m, self.token, c.nonce, self.version)
        if why is None and m.get("lanes", 1) > 1 and self.group_lanes not in (None, m["lanes"]):
            why = (f"lanes mismatch: this replica group has {m['lanes']} processes "
                   f"(WORLD_SIZE), the job's have {self.group_lanes}")
        if why is None:
            lane = self.lane(m["lane"])
            why = self._resumable(lane, m.get("resume"))
            fp = m.get("fingerprint")
            if fp is not None and lane.fingerprint is not None and fp != lane.fingerprint:
                why = (f"model mismatch in lane {m['lane']}: parameter fingerprint {fp[:16]} "
                       f"differs from the job's {lane.fingerprint[:16]} (different parameter "
                       "names, shapes or dtypes)")
        if why is not None:
            return self._refuse(sock, c, why)
        if fp is not None:
            lane.fingerprint = fp
        resumed = m.get("resume") is not None
        self._pending.pop(sock, None)
        c.lane, c.member = m["lane"], m["resume"] if resumed else lane.ctl.new_id()
        old = self._by_member.get((c.lane, c.member))  # a link it replaced: not a death
        if isinstance(old, _Conn):  # handed to the store (NOTE [one link per member])
            self._links.pop((c.lane, c.member), None)
            self.store.release((c.lane, c.member, id(old)))
        elif old is not None and old is not sock and old in self._conns:
            self._conns[old].bye = True
            self._forget(old)
        self._by_member[(c.lane, c.member)] = sock
        self.roster.admit(c.lane, c.member, str(m.get("replica")), int(m.get("restart") or 0),
                          int(m.get("lanes", 1)))
        if m.get("lanes", 1) > 1:
            self.group_lanes = m["lanes"]
            if not lane.formed:  # else a newcomer, admitted with its group's other lanes
                self.groups.setdefault((str(m.get("replica")), int(m.get("restart") or 0)),
                                       {})[c.lane] = c.member
                self._groups_since = self._groups_since or time.monotonic()
        elif not lane.formed and c.member not in lane.arrived:
            lane.arrivals.append(c.member)
            lane.arrived.add(c.member)
            lane.first_arrival = lane.first_arrival or time.monotonic()
        self._send_small(sock, self._reply(lane, c.member, m.get("store_link") is True))
        if m.get("store_link") is True:
            self._hand_over(sock, c)
        self._note_admitted(f"lane {c.lane}: member {c.member} = replica {m.get('replica')!r} pid "
                  f"{m.get('pid')} on {m.get('host')} (restart {m.get('restart')})"
                  + (" resumed its link (it followed the leading replica)" if resumed else ""))
        return True

    def _resumable(self, lane: _Lane, member) -> str | None:
        """Why a worker may not resume ``member`` here (it followed a new leader), or None."""
        if member is None:
            return None
        if not isinstance(member, int) or not 0 <= member < int(lane.ctl.store.add(
                cp.KEY_NEXT_ID, 0)):
            return f"resume: member {member!r} was never admitted in lane {lane.index}"
        if lane.ctl.is_dead(member):
            return (f"resume: member {member} of lane {lane.index} was declared dead: "
                    f"{lane.ctl.get(cp.key_dead(member))}")
        return None

    # -- epoch 0 ------------------------------------------------------------------------
    def _form_epoch0(self, lane: _Lane, now: float) -> None:
        if lane.formed or not lane.arrivals:
            return
        late = now - lane.first_arrival >= self.join_timeout_s
        if len(lane.arrivals) < self.min_replicas and not late:
            return  # NOTE [scale]: O(1) per pass until enough arrived
        alive = [i for i in lane.arrivals if i not in lane.verdicts.deaths]
        if len(alive) < self.min_replicas and not (late and alive):
            return
        won = lane.ctl.propose(0, {"members": alive, "joins": 0, "why":
                                   f"founders: {len(alive)} arrived (min {self.min_replicas})"
                                   + ("; join timeout" if len(alive) < self.min_replicas else "")})
        lane.formed = True
        self._log(f"lane {lane.index}: epoch 0 = members {won['members']}")

    def _form_epoch0_of_groups(self, now: float) -> None:
        """Epoch 0 of every lane at once, from the replica groups whose every lane arrived
        (and none of them died): the same groups in every lane, in arrival order."""
        n = self.group_lanes
        if n is None or not self.groups or all(self.lane(r).formed for r in range(n)):
            return
        whole = [g for g in self.groups.values() if len(g) == n and
                 not any(m in self.lane(r).verdicts.deaths for r, m in g.items())]
        late = now - self._groups_since >= self.join_timeout_s
        if len(whole) < self.min_replicas and not (late and whole):
            return
        why = (f"founders: {len(whole)} whole replica groups of {n} (min {self.min_replicas})"
               + ("; join timeout" if len(whole) < self.min_replicas else ""))
        for r in range(n):
            lane = self.lane(r)
            won = lane.ctl.propose(0, {"members": [g[r] for g in whole], "joins": 0,
                                       "why": why})
            lane.formed = True
            self._log(f"lane {r}: epoch 0 = members {won['members']}")

    # -- stragglers ---------------------------------------------------------------------
    def _step_report(self, c: _Conn, m: dict) -> None:
        if not self.straggler.enabled:
            return
        lane = self.lane(c.lane)
        key = (int(m["epoch"]), int(m["step"]))
        got = lane.members_of.get(key[0])
        if got is None:  # NOTE [scale]: each epoch's record parsed once, not per report
            rec = lane.ctl.record(key[0])
            if rec is None:
                return
            got = lane.members_of[key[0]] = (rec["members"], set(rec["members"]))
            for old in [e for e in lane.members_of if e < key[0] - 2]:
                del lane.members_of[old]
        if c.member not in got[1]:
            return
        times = lane.busy.setdefault(key, {})
        times[c.member] = float(m["busy"])
        deaths = lane.verdicts.deaths
        if len(times) + sum(1 for x in deaths if x in got[1] and x not in times) < len(got[0]):
            return  # O(deaths) per report: not every live member reported yet
        members = [x for x in got[0] if x not in deaths]
        if len(members) < 2 or not all(x in times for x in members):
            return
        lane.busy.pop(key)
        for old in [k for k in lane.busy if k < key]:
            del lane.busy[old]
        med = statistics.median_low(times[x] for x in members)
        p = self.straggler
        for x in members:
            slow = times[x] > p.factor * med and times[x] - med > p.min_s
            lane.slow[x] = lane.slow.get(x, []) + [times[x]] if slow else []
            if len(lane.slow[x]) >= p.steps:
                ts = ", ".join(f"{t:.3f}" for t in lane.slow[x])
                lane.verdicts.declare(x, f"straggler: busy {ts} s in {p.steps} consecutive "
                                         f"steps vs median {med:.3f} s (factor {p.factor}, "
                                         f"floor {p.min_s} s); evicted")
                self._log(f"lane {lane.index}: member {x} evicted as a straggler")

    def close(self) -> None:
        """Stop serving; the serving thread (if any) releases the sockets when it leaves."""
        self._closed = True
        if not self._serving:
            self._release()

    def _release(self) -> None:
        for s in list(self._conns):
            s.close()
        self._conns.clear()
        self._front.close()
        self.store.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="0.0.0.0",
                   help="address both ports bind (default: all interfaces)")
    p.add_argument("--port", type=int, required=True,
                   help="the front port workers connect to (XVENDOR_COORDINATOR=host:port)")
    p.add_argument("--store-port", type=int, default=None,
                   help="the control-plane store's port (default: --port + 1); both must be "
                        "reachable from every worker")
    p.add_argument("--token-file", default=None,
                   help="file holding the shared token (default: env XVENDOR_TOKEN)")
    p.add_argument("--min-replicas", type=int, default=1,
                   help="form epoch 0 as soon as this many replica groups arrived")
    p.add_argument("--join-timeout", type=float, default=60.0,
                   help="form epoch 0 with whoever arrived after this many seconds")
    p.add_argument("--hb-timeout", type=float, default=3.0,
                   help="seconds without a heartbeat before a worker counts as hung")
    p.add_argument("--hb-interval", type=float, default=None,
                   help="seconds between a worker's heartbeats (default: --hb-timeout / 8; "
                        "each costs the coordinator a store request: NOTE [scale])")
    p.add_argument("--straggler-factor", type=float, default=3.0,
                   help="evict a member busy longer than this x the median (0: never)")
    p.add_argument("--straggler-steps", type=int, default=10,
                   help="... for this many consecutive steps")
    p.add_argument("--straggler-min-s", type=float, default=0.1,
                   help="... and by at least this many seconds over the median")
    p.add_argument("--fr-dir", default=None, help="where to write the coordinator's dump")
    p.add_argument("--incarnation", type=int, default=None,
                   help="this run's incarnation number, in every epoch record, dump name and "
                        "log line (default: the start time in ms, increasing across restarts)")
    p.add_argument("--store", default="embedded",
                   help="where membership, epochs, verdicts and admission live: 'embedded' "
                        "(this process's memory: one job on one machine) or "
                        "etcd://host:port[,host:port...] (etcd v3: run 2 or 3 replicas of this "
                        "command, each with its own --port; one leads, the others stand by; "
                        "workers list them all in XVENDOR_COORDINATOR, comma-separated)")
    p.add_argument("--lease-ttl", type=int, default=1,
                   help="with --store etcd://: the leader's lease in seconds; a standby leads "
                        "about this long after the leader dies (etcd raises a TTL below its "
                        "own minimum, 1.5 x its --election-timeout)")
    p.add_argument("--etcd-user", default=None,
                   help="with --store etcd://: etcd user (password in env XVENDOR_ETCD_PASSWORD)")
    p.add_argument("--etcd-cacert", default=None, metavar="PEM",
                   help="with --store etcd://: talk TLS to etcd, trusting this CA for its "
                        "server certificate")
    p.add_argument("--etcd-cert", default=None, metavar="PEM",
                   help="with --etcd-cacert: this replica's client certificate (etcd "
                        "--client-cert-auth); needs --etcd-key")
    p.add_argument("--etcd-key", default=None, metavar="PEM",
                   help="with --etcd-cert: the client certificate's private key")
    p.add_argument("--etcd-server-name", default=None,
                   help="with --etcd-cacert: the name etcd's certificate must carry, when it "
                        "is not the endpoint's host")
    p.add_argument("--name", default=None,
                   help="this replica's name in the logs and the leader key (default host:port)")


def coordinator_timing(args) -> Timing:
    """The timing handed to every worker at admission. NOTE [scale]: a heartbeat every
    ``hb_timeout / 8`` s (0.375 s at the default 3 s) instead of ``Timing``'s 0.1 s: a hung
    worker is still judged after ``hb_timeout`` (plus one interval), and 10,000 workers send
    27,000 heartbeats a second instead of 100,000, which one Python store thread cannot serve
    (bench/sim_members.py)."""
    hb = args.hb_interval if getattr(args, "hb_interval", None) is not None else args.hb_timeout / 8
    if not 0 < hb < args.hb_timeout:
        raise ValueError(f"--hb-interval must be > 0 and below --hb-timeout "
                         f"({args.hb_timeout}), got {hb}")
    return Timing(hb_timeout_s=args.hb_timeout, hb_interval_s=hb)


def read_token(token_file: str | None) -> str:
    if token_file:
        with open(token_file) as f:
            token = f.read().strip()
        if not token:
            raise ValueError(f"--token-file {token_file}: the file is empty")
        return token
    token = os.environ.get("XVENDOR_TOKEN", "")
    if not token:
        raise ValueError("no token: set XVENDOR_TOKEN or pass --token-file (every worker "
                         "must present the same one)")
    return token


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="xvendor coordinator", description=__doc__.split("\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args) -> int:
    """``xvendor coordinator`` with parsed arguments (the CLI's ``fn``)."""
    if getattr(args, "store", "embedded") != "embedded":
        return _run_replica(args)
    try:
        from .etcdstore import tls_from_args
        tls_from_args(args)  # TLS options without an etcd store: an error, not ignored
        token = read_token(args.token_file)
        c = Coordinator(token, args.host, args.port, args.store_port, args.min_replicas,
                        args.join_timeout, coordinator_timing(args),
                        StragglerPolicy(args.straggler_factor, args.straggler_steps,
                                        args.straggler_min_s), args.fr_dir,
                        incarnation=args.incarnation)
    except (ValueError, OSError) as e:
        print(f"xvendor coordinator: {e}", file=sys.stderr)
        return 2
    print(f"xvendor coordinator [incarnation {c.incarnation}]: listening on {args.host}:{c.port} "
          f"(store {c.store_port}), min replicas {args.min_replicas}", file=sys.stderr, flush=True)
    # NOTE [GIL hand-offs]: this process runs two busy threads, the front port's loop (this
    # one) and the store's. A thread leaving a system call (send, recv, accept, epoll) waits
    # for the GIL until the other thread's switch interval ends (5 ms by default), so under a
    # burst each of a hello's system calls could cost the admitting thread up to 5 ms while
    # the store thread served beats. A shorter interval bounds that wait; the price is more
    # GIL hand-offs on a busy store thread (bench/sim_members.py, bench/RESULTS.md).
    sys.setswitchinterval(0.0005)
    try:
        c.serve()
    except KeyboardInterrupt:
        return 0
    finally:
        c.close()
    return 0


def _run_replica(args) -> int:
    """One replica of a coordinator whose state is in etcd (``etcdstore``)."""
    from . import etcdstore
    try:
        token = read_token(args.token_file)
        etcdstore.parse_url(args.store)
        etcdstore.tls_from_args(args)
        coordinator_timing(args)
    except ValueError as e:
        print(f"xvendor coordinator: {e}", file=sys.stderr)
        return 2
    log = [None]

    def say(msg: str) -> None:
        (log[0] or (lambda m: print(f"xvendor coordinator: {m}", file=sys.stderr,
                                    flush=True)))(msg)

    def make(kv, incarnation: int) -> Coordinator:
        c = Coordinator(token, args.host, args.port, args.store_port, args.min_replicas,
                        args.join_timeout, coordinator_timing(args),
                        StragglerPolicy(args.straggler_factor, args.straggler_steps,
                                        args.straggler_min_s), args.fr_dir,
                        incarnation=incarnation, kv=kv)
        log[0] = c._log
        return c
    return etcdstore.run_replica(args, token, make, say)


if __name__ == "__main__":
    sys.exit(main())
