"""The control plane: membership epochs, death notices, abort flags and joins, kept in a
TCPStore that a process outside the training ranks hosts (``Agent``).

Every key lives under ``xv/``. The protocol, in store terms:

- ``xv/ep/<e>``       the membership record of epoch ``e`` (JSON: members in rank order, how
                      many join slots it consumed, why it exists). Written once, by
                      ``compare_set(key, "", proposal)``: the first proposal wins and every
                      proposer adopts the winner, so all survivors agree without a leader.
- ``xv/latest``       a hint: the newest epoch known to be proposed (probe forward from it).
- ``xv/abort/<e>``    set once epoch ``e`` must stop (a death, a collective error, a member
                      that will never arrive): its reason, and when the observer set it, the
                      next epoch's number and record after it (NOTE [the next epoch in the
                      abort flag]). Ranks poll it between wait slices.
- ``xv/dead/<id>``    a death notice (reason); final: a dead id is never admitted again.
                      ``xv/dead_seq`` + ``xv/deadlist/<n>`` list them in order.
- ``xv/left/<id>``    the member left cleanly; ``xv/left_seq`` + ``xv/leftlist/<n>`` list
                      them in order (read incrementally, as the death list: NOTE [scale])
- ``xv/hb/<id>``      a heartbeat counter; the agent judges staleness by its own clock.
- ``xv/join/<k>``     join slot ``k`` holds a newcomer id (claimed with compare_set).
- ``xv/gb/<e>/<s>``   the grow decision of epoch ``e`` at step ``s`` (first proposal wins).
- ``xv/ready/<id>``    the latest formation the member arrived at: ``<e>/<flag>`` ("1": it
                      holds state); ``xv/readyn/<e>`` counts epoch ``e``'s (a hint),
                      ``xv/plan/<e>`` the state transfer plan the last to arrive read off
                      them (NOTE [scale], NOTE [one ready key a member] in membership).
- ``xv/vote/<e>/<s>/<id>`` a member's collectives of guarded step ``s`` succeeded ("1") or not;
                      ``xv/verdict/<e>/<s>`` "commit" or "redo", first proposal wins;
                      ``xv/voten/<e>/<s>`` counts the votes (a hint). A member deletes its
                      vote of step ``s - 2`` when it votes at ``s`` (NOTE [scale] in
                      stepguard): no key per member per step is kept.

With a ``Coordinator`` every key sits under a job- and lane-specific prefix (``wire``).

Member ids identify one process incarnation: a process that is excluded and rejoins gets a
new id, so nothing it did under the old one can count again.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
from dataclasses import dataclass


ROOT = "xv/"


@dataclass(frozen=True)
class Timing:
    """Detection and wait bounds, in seconds.

    A collective call returns or raises within ``call_bound_s``: a dead process is noticed
    at once (the agent sees it exit), a hung one when its heartbeat is ``hb_timeout_s`` old.
    """

    slice_s: float = 0.02          # one slice of a wait; the abort flag is read between slices
    hb_interval_s: float = 0.1
    hb_timeout_s: float = 3.0      # a heartbeat this old marks a process hung
    agent_tick_s: float = 0.01
    op_timeout_s: float = 30.0     # gloo's own timeout: a retired group's stuck op ends by then
    join_timeout_s: float = 120.0
    margin_s: float = 1.5

    @property
    def call_bound_s(self) -> float:
        return self.hb_timeout_s + 0.05 + self.agent_tick_s + self.slice_s + self.margin_s

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class EpochAborted(RuntimeError):
    """The current epoch stopped (a member died, hung or failed): call ``recover()``."""


class Excluded(RuntimeError):
    """This process is no longer a member (declared dead, or left out by agreement).
    It may rejoin as a newcomer with a new id: ``ResilientGroup.rejoin()``."""


def key_epoch(e: int) -> str: return f"{ROOT}ep/{e}"
def key_abort(e: int) -> str: return f"{ROOT}abort/{e}"
def key_dead(i: int) -> str: return f"{ROOT}dead/{i}"
def key_hb(i: int) -> str: return f"{ROOT}hb/{i}"
def key_pid(i: int) -> str: return f"{ROOT}pid/{i}"
def key_left(i: int) -> str: return f"{ROOT}left/{i}"
def key_join(k: int) -> str: return f"{ROOT}join/{k}"
def key_grow(e: int, step: int) -> str: return f"{ROOT}gb/{e}/{step}"
def key_ready(i: int) -> str: return f"{ROOT}ready/{i}"
def ready_value(e: int, flag: str) -> str: return f"{e}/{flag}"  # NOTE [one ready key a member]


def ready_flags(values: list, e: int) -> list[str] | None:
    """The members' ready flags for epoch ``e`` from their ``ready/<id>`` values, or None
    while one of them holds another epoch's (it has not arrived at ``e`` yet)."""
    pre, out = f"{e}/", []
    for v in values:
        v = v.decode() if isinstance(v, bytes) else v
        if not v.startswith(pre):
            return None
        out.append(v[len(pre):])
    return out
def key_ready_count(e: int) -> str: return f"{ROOT}readyn/{e}"
def key_plan(e: int) -> str: return f"{ROOT}plan/{e}"
def key_progress(i: int) -> str: return f"{ROOT}progress/{i}"
def key_vote(e: int, step: int, i: int) -> str: return f"{ROOT}vote/{e}/{step}/{i}"
def key_verdict(e: int, step: int) -> str: return f"{ROOT}verdict/{e}/{step}"
def key_vote_count(e: int, step: int) -> str: return f"{ROOT}voten/{e}/{step}"
def key_late(what: str) -> str: return f"{ROOT}late/{what}"


KEY_LATEST = ROOT + "latest"
KEY_NEXT_ID = ROOT + "next_id"
KEY_DEAD_SEQ = ROOT + "dead_seq"
KEY_LEFT_SEQ = ROOT + "left_seq"


def encode_record(record: dict) -> str:
    """An epoch record as stored under ``ep/<e>``, with its members as runs of consecutive
    ids when that is shorter (``decode_record`` reverses it).

    NOTE [compact epoch record]: every member reads the record of each epoch it forms
    (one read: NOTE [one read] in membership), and the record listed every member id: about
    60 KB at 10,000 members, 600 MB sent by the coordinator's store thread (and received
    by the members) at each formation of 10,000, and again after each kill. Members are
    listed in rank order, and ids are handed out in admission order: founders arrive in id
    order, a shrink removes ids from that order and a grow appends newer ids, so the list
    is a few runs of consecutive ids (one for founders, one more per member lost). Each
    run is ``[first id, count]``; a record whose runs would not be shorter keeps the list.
    Only the stored form changes: readers get ``members`` back from ``decode_record``."""
    members = record.get("members")
    if isinstance(members, list) and len(members) > 4:
        runs: list[list[int]] = []
        for m in members:
            if not isinstance(m, int) or isinstance(m, bool):
                runs = []
                break
            if runs and runs[-1][0] + runs[-1][1] == m:
                runs[-1][1] += 1
            else:
                runs.append([m, 1])
        if runs and 2 * len(runs) < len(members):
            rec = {k: v for k, v in record.items() if k != "members"}
            rec["runs"] = runs
            return json.dumps(rec)
    return json.dumps(record)


def decode_record(raw: str | bytes) -> dict:
    """An epoch record as ``encode_record`` stored it, with ``members`` listed again."""
    rec = json.loads(raw)
    runs = rec.pop("runs", None)
    if runs is not None:
        rec["members"] = [m for first, count in runs for m in range(first, first + count)]
    return rec


# NOTE [the next epoch in the abort flag]: after a death the observer proposes the
# survivors' epoch (NOTE [the observer proposes the shrink] in verdicts) and sets the old
# epoch's abort flag in the same step (``abort_and_propose``), the flag's value its reason
# followed by ``_NEXT``, the new epoch's number and its record (compact: NOTE [compact
# epoch record]). A member learns of the abort from its heartbeat's watch, whose answer
# carries the flag's value (NOTE [the abort watch]), or reads the value for its reason
# anyway; ``membership._next_epoch`` then finds the epoch it is to form there, without a
# request. Before, every survivor asked for it (one request each: 10,000 on the store's one
# thread after a kill at 10,000 simulated members), and read the reason (one more). One
# step, because written apart either order is wrong: the record first, and the store's
# thread answers the watches (which wait on the flag and on the next record) with the
# record before the flag exists; the flag first, and it may name a record that then loses
# the proposal to a member's (a grow's). Where the store cannot (etcd, the agent's
# TCPStore), or a member's flag or proposal came first, the flag carries its reason only
# and the members ask, as before.
_NEXT = "\nnext epoch "


def abort_value(reason: str, nxt: tuple[int, dict] | None = None) -> str:
    """An abort flag's value: ``reason``, then the next epoch and its record if given."""
    return reason if nxt is None else f"{reason}{_NEXT}{nxt[0]} {encode_record(nxt[1])}"


def split_abort(raw) -> tuple[str, tuple[int, dict] | None]:
    """(reason, (next epoch, its record) or None) from an abort flag's value."""
    v = raw.decode() if isinstance(raw, (bytes, bytearray)) else str(raw)
    i = v.find(_NEXT)
    if i < 0:
        return v, None
    try:
        e, rec = v[i + len(_NEXT):].split(" ", 1)
        return v[:i], (int(e), decode_record(rec))
    except ValueError:  # json's errors are ValueErrors too: a reason that only looks so
        return v, None


def connect(host: str, port: int, timeout_s: float = 60.0, prefix: str = "",
            token: str | None = None, link=None) -> "dist.Store":
    """A store client: the coordinator's token-guarded store when ``token`` is given
    (``authstore``; ``link``: follow a replicated coordinator's leader through it), else the
    agent's TCPStore (``xvendor run``, loopback)."""
    if token:
        from .authstore import AuthStore
        return AuthStore(host, port, token, timeout_s, prefix=prefix, link=link)
    import torch.distributed as dist  # NOTE [a torch-free control plane] in __init__
    store = dist.TCPStore(host, port, is_master=False, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=timeout_s))
    return dist.PrefixStore(prefix, store) if prefix else store


class Control:
    """One process's view of the control plane (a store client plus small caches)."""

    def __init__(self, store: "dist.Store", incarnation: int | None = None):
        self.store = store
        self.incarnation = incarnation  # stamped on every epoch record this view proposes
        self.watch = None  # a member's Heartbeat: abort flags without a request
        self._aborts: dict[int, str] = {}  # abort flags' values read (NOTE [the next epoch
        # in the abort flag])
        self._dead: dict[int, str] = {}
        self._dead_seen = 0
        self._left: set[int] = set()
        self._left_seen = 0

    # -- plain reads -------------------------------------------------------------------
    def get(self, key: str) -> str | None:
        fn = getattr(self.store, "try_get", None)  # the coordinator's store: one request
        if fn is not None:
            raw = fn(key)
            return raw.decode() if raw is not None else None
        return self.store.get(key).decode() if self.store.check([key]) else None

    def new_id(self) -> int:
        return int(self.store.add(KEY_NEXT_ID, 1)) - 1

    # -- epochs ------------------------------------------------------------------------
    def record(self, e: int) -> dict | None:
        raw = self.get(key_epoch(e))
        return decode_record(raw) if raw else None  # NOTE [compact epoch record]

    def latest_epoch(self) -> int:
        raw = self.get(KEY_LATEST)
        e = int(raw) if raw else 0
        while self.store.check([key_epoch(e + 1)]):
            e += 1
        return e

    def propose(self, e: int, record: dict) -> dict:
        """First proposal for epoch ``e`` wins; returns the winning record."""
        record = dict(record, epoch=e)
        if self.incarnation is not None:
            record["incarnation"] = self.incarnation
        won = self.store.compare_set(key_epoch(e), "", encode_record(record)).decode()
        if e > self.latest_hint():  # a hint only: readers probe forward from it
            self.store.set(KEY_LATEST, str(e))
        return decode_record(won)  # NOTE [compact epoch record]

    def wait_any(self, keys: list[str], timeout_s: float, poll_s: float) -> bool:
        """Until one of ``keys`` exists or ``timeout_s`` passed: True if the store waited on
        the server (the coordinator's, ``authstore.wait_any``: NOTE [scale] there), False
        after sleeping ``poll_s`` (a store that cannot, the agent's TCPStore): the caller
        polls as before."""
        fn = getattr(self.store, "wait_any", None)
        if fn is None:
            time.sleep(poll_s)
            return False
        fn(keys, timeout_s)
        return True

    def wait_value(self, keys: list[str], timeout_s: float,
                   poll_s: float) -> tuple[int, str] | None | bool:
        """Until one of ``keys`` exists or ``timeout_s`` passed: (its index, its value), in
        one request on the coordinator's store (``AuthStore.wait_value``: NOTE [one read] in
        membership); None at the timeout; False on a store that cannot (the agent's
        TCPStore: it slept ``poll_s``, the caller reads for itself). ``timeout_s`` 0: the
        first of ``keys`` that exists now, at once."""
        fn = getattr(self.store, "wait_value", None)
        if fn is None:
            if timeout_s > 0:
                time.sleep(poll_s)
            return False
        got = fn(keys, timeout_s)
        return (got[0], got[1].decode()) if got is not None else None

    def latest_hint(self) -> int:
        raw = self.get(KEY_LATEST)
        return int(raw) if raw else 0

    def abort(self, e: int, reason: str, nxt: tuple[int, dict] | None = None) -> None:
        """Set epoch ``e``'s abort flag (first writer wins); ``nxt``: the epoch proposed to
        follow it and its record (NOTE [the next epoch in the abort flag])."""
        self.store.compare_set(key_abort(e), "", abort_value(reason, nxt))

    def abort_and_propose(self, e: int, reason: str, record: dict) -> None:
        """Abort epoch ``e`` and propose ``record`` as epoch ``e + 1``, the flag naming it
        (NOTE [the next epoch in the abort flag]): in one step of the store where it can,
        else the flag (its reason only) and then the proposal."""
        record = dict(record, epoch=e + 1)
        if self.incarnation is not None:
            record["incarnation"] = self.incarnation
        raw = encode_record(record)
        fn = getattr(self.store, "abort_and_propose", None)
        done = fn(key_abort(e), f"{reason}{_NEXT}{e + 1} {raw}", key_epoch(e + 1), raw) \
            if fn is not None else None
        if not done:  # not this store, or a flag or a proposal was there first
            self.abort(e, reason)
            self.propose(e + 1, record)
        elif e + 1 > self.latest_hint():
            self.store.set(KEY_LATEST, str(e + 1))

    def note_abort(self, e: int, raw) -> None:
        """Keep the value of epoch ``e``'s abort flag, read by a wait that ended on it."""
        if raw is not None:
            self._aborts[e] = raw.decode() if isinstance(raw, (bytes, bytearray)) else raw
            for old in [k for k in self._aborts if k < e - 2]:
                del self._aborts[old]

    def abort_reason(self, e: int) -> str | None:
        """Why epoch ``e`` was aborted (None: it was not): from the watch's answer or a
        value already read, else one request."""
        raw = self._aborts.get(e)
        if raw is None and self.watch is not None:
            raw = self.watch.abort_value(e)
        if raw is None:
            raw = self.get(key_abort(e))
        self.note_abort(e, raw)
        return None if raw is None else split_abort(raw)[0]

    def next_from_abort(self, e: int) -> tuple[int, dict] | None:
        """The epoch proposed to follow ``e`` and its record, when ``e``'s abort flag named
        them and this view has read the flag (no request)."""
        raw = self._aborts.get(e)
        if raw is None and self.watch is not None:
            raw = self.watch.abort_value(e)
        return None if raw is None else split_abort(raw)[1]

    def aborted(self, e: int) -> bool:
        if self.watch is not None:  # NOTE [the abort watch] in Heartbeat
            seen = self.watch.aborted(e)
            if seen is not None:
                return seen
        return self.store.check([key_abort(e)])

    # -- deaths ------------------------------------------------------------------------
    def declare_dead(self, member: int, reason: str) -> bool:
        """Post a death notice; True if this call posted it first."""
        got = self.store.compare_set(key_dead(member), "", reason).decode()
        if got != reason:
            return False
        n = int(self.store.add(KEY_DEAD_SEQ, 1))
        self.store.set(f"{ROOT}deadlist/{n - 1}", str(member))
        return True

    def dead(self) -> dict[int, str]:
        """All death notices so far, {id: reason} (incremental: new ones only are fetched)."""
        n = int(self.store.add(KEY_DEAD_SEQ, 0))
        while self._dead_seen < n:
            raw = self.get(f"{ROOT}deadlist/{self._dead_seen}")
            if raw is None:  # the poster is between add() and set()
                break
            member = int(raw)
            self._dead[member] = self.store.get(key_dead(member)).decode()
            self._dead_seen += 1
        return dict(self._dead)

    def news_keys(self, floor=None) -> list[str]:
        """The keys of the next death notice and the next clean departure this view has not
        read yet: a wait on them ends when there is news (NOTE [waits on news] in
        membership). ``floor``: an epoch record's ``news`` (NOTE [news after the record]):
        notices before it are no news to a member forming that epoch."""
        d, lft = (floor or (0, 0))[:2]
        return [f"{ROOT}deadlist/{max(self._dead_seen, int(d))}",
                f"{ROOT}leftlist/{max(self._left_seen, int(lft))}"]

    def news_counts(self) -> list[int]:
        """How many death and departure notices exist now (an epoch record's ``news``)."""
        return [int(self.store.add(KEY_DEAD_SEQ, 0)), int(self.store.add(KEY_LEFT_SEQ, 0))]

    def is_dead(self, member: int) -> bool:
        return self.store.check([key_dead(member)])

    # -- clean departures ----------------------------------------------------------------
    def mark_left(self, member: int) -> None:
        """Post that ``member`` leaves cleanly: its own key, then its place in the list."""
        self.store.set(key_left(member), "1")
        n = int(self.store.add(KEY_LEFT_SEQ, 1))
        self.store.set(f"{ROOT}leftlist/{n - 1}", str(member))

    def left(self) -> set[int]:
        """Every member that left cleanly so far (incremental, as ``dead``): one request
        when nobody new left, instead of one per member (NOTE [scale] in membership)."""
        n = int(self.store.add(KEY_LEFT_SEQ, 0))
        while self._left_seen < n:
            raw = self.get(f"{ROOT}leftlist/{self._left_seen}")
            if raw is None:  # the poster is between add() and set()
                break
            self._left.add(int(raw))
            self._left_seen += 1
        return set(self._left)

    # -- joins -------------------------------------------------------------------------
    def claim_join_slot(self, member: int) -> int:
        k = 0
        while True:
            if self.store.compare_set(key_join(k), "", str(member)).decode() == str(member):
                return k
            k += 1

    def joiners_from(self, k: int) -> list[int]:
        found = []
        while self.store.check([key_join(k)]):
            found.append(int(self.store.get(key_join(k))))
            k += 1
        return found


def sliced_wait(work, ctl: Control, epoch: int, member: int, timing: Timing,
                t0: float) -> None:
    """Wait for ``work`` in slices of ``timing.slice_s``, reading epoch ``epoch``'s abort flag
    between slices: returns when it completed, raises its error, or ``EpochAborted``."""
    sl = datetime.timedelta(seconds=timing.slice_s)
    poll = False  # reconfigure's FutureWrappingWork has no wait(timeout): poll it
    while True:
        if poll:
            if work.is_completed():
                work.wait()  # done: returns at once, or raises the op's error
                return
            time.sleep(timing.slice_s / 4)
        else:
            try:
                work.wait(sl)
                return
            except RuntimeError as e:
                if "finite timeout not implemented" in str(e):
                    poll = True
                    continue
                if "timed out" not in str(e).lower():
                    raise
        if ctl.aborted(epoch):
            why = ctl.abort_reason(epoch)  # the watch's answer carried it: no request
            raise EpochAborted(f"epoch {epoch} aborted: {why}")
        if time.monotonic() - t0 > timing.call_bound_s - 2 * timing.slice_s:
            # NOTE [bound]: no death notice yet a peer is silent: stop the epoch rather
            # than break the bound. A live slow peer is re-admitted by the next proposal.
            ctl.abort(epoch, f"member {member}: no progress within the "
                             f"call bound {timing.call_bound_s:.2f} s")


class Heartbeat:
    """A daemon thread bumping ``xv/hb/<id>`` on its own store client (a blocked main-thread
    store call must not stall it). A SIGSTOPped process stops it too: that is the point.

    NOTE [the abort watch]: on the coordinator's store the same thread also keeps one
    server-side wait (``AuthStore.watch``) on the abort flag of the epoch its member last
    asked about, and on that epoch's successor record; ``aborted`` answers from it without a
    request. A member in a collective read the flag every ``slice_s`` (20 ms): 50 requests
    a second per member, 500,000 at 10,000 members, for a flag that is set once. The wait
    lasts up to ``authstore.MAX_WAIT_S`` and the beats go out meanwhile (they have no reply,
    so the wait's answer is the only thing the connection reads)."""

    def __init__(self, store: "dist.Store", member: int, interval_s: float):
        self.member, self.interval_s = member, interval_s
        self._store = store
        self._store.set(key_pid(member), str(os.getpid()))
        self._store.add(key_hb(member), 1)
        # the coordinator's store takes a beat without a reply (NOTE [heartbeats off the
        # request queue] in authstore); the agent's TCPStore an ordinary add
        beat = getattr(store, "beat", None)
        self._beat = beat if beat is not None else (lambda key: store.add(key, 1))
        self._watching = hasattr(store, "watch")
        self._want = self._armed = None  # the epoch asked about; the one watched now
        self._aborted: set[int] = set()  # epochs the watch saw aborted
        self._values: dict[int, bytes] = {}  # their flags' values (the watch's answers)
        self._passed: set[int] = set()   # epochs whose successor exists: watched no more
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"xv-heartbeat-{member}",
                                        daemon=True)
        self._thread.start()

    def aborted(self, e: int) -> bool | None:
        """Epoch ``e``'s abort flag as the watch saw it, or None when ``e`` is not watched
        (ask the store; the watch moves to ``e`` within one beat interval)."""
        if e in self._aborted:
            return True
        if self._armed == e and not self._stop.is_set():
            return False
        self._want = e
        return None

    def abort_value(self, e: int) -> bytes | None:
        """The value of epoch ``e``'s abort flag, if this watch's answer carried it."""
        return self._values.get(e)

    def _run(self) -> None:
        key, pending = key_hb(self.member), None
        next_beat = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            try:
                e = self._want
                if pending is None and self._watching and e is not None \
                        and e not in self._aborted and e not in self._passed:
                    self._armed = pending = e  # before the request: an abort is never missed
                    self._store.watch([key_abort(e), key_epoch(e + 1)], 10.0)
                left = next_beat - time.monotonic()
                if pending is not None:
                    got = self._store.answer(left)
                    if got is not False:  # answered (its timeout: None): watch again
                        if got is not None:
                            if got == 0:  # the flag's value came with the answer
                                self._values[pending] = self._store.answered_value()
                                for old in [k for k in self._values if k < pending - 2]:
                                    del self._values[old]
                            (self._aborted if got == 0 else self._passed).add(pending)
                        self._armed = pending = None
                elif self._stop.wait(max(0.0, left)):
                    break
                if time.monotonic() >= next_beat:
                    self._beat(key)
                    next_beat = time.monotonic() + self.interval_s
            except ConnectionResetError:  # followed a new leader: the watch starts again
                self._armed = pending = None
            except Exception:  # the store is gone: the job is over
                break
        self._armed = None  # nothing watched any more: ``aborted`` asks the store

    def stop(self) -> None:
        self._stop.set()
