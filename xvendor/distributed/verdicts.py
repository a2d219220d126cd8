"""Verdicts on members, shared by the ``Agent`` (``xvendor run``) and the ``Coordinator``:
judging heartbeats stale, posting death notices, and aborting every live epoch that lists a
dead member. It never starts or signals a process: whoever sees a failure calls ``declare``.
"""

from __future__ import annotations

import time

from . import control as cp
from .control import Timing
from .recorder import write_agent_dump


class Verdicts:
    """One control-plane namespace's view of who failed, and why."""

    def __init__(self, ctl: cp.Control, timing: Timing, fr_dir: str | None = None,
                 lane: int = 0, incarnation: int | None = None, clock=None, beats=None):
        self.ctl, self.timing, self.fr_dir, self.lane = ctl, timing, fr_dir, lane
        # the store's own record of beats (``authstore.KV.silent_since``), with ``clock``:
        # a scan reads only the silent members (NOTE [beats in arrival order] in storekv)
        self.beats = beats if clock is not None else None
        # the clock silence is measured on: the observer's by default; the coordinator's
        # store's (``StoreServer.caught_up``: NOTE [heartbeats off the request queue])
        self.clock = clock
        self.incarnation = incarnation  # the coordinator's (None: xvendor run's agent)
        self.deaths: dict[int, str] = {}
        self.death_times: dict[int, float] = {}
        self._hb: dict[int, tuple[int, float]] = {}  # member -> (counter, silent s)
        self._members: dict[int, list[int]] = {}  # epoch -> members (records: written once)
        self._last_scan = 0.0
        self._shrink_due = False  # a death was declared since the last proposal

    def known_ids(self) -> int:
        return int(self.ctl.store.add(cp.KEY_NEXT_ID, 0))

    def check_heartbeats(self, now: float, members: range | list[int] | None = None) -> None:
        """Declare dead every member whose heartbeat counter stood still for ``hb_timeout_s``
        of *observed* time. A member that never beat is still importing torch: its exit (or
        its closed connection) covers it until then.

        NOTE [observer stalls]: the time between two scans is credited to a silent member
        only up to ``hb_timeout_s / 4`` per scan. Were the observer's clock simply compared
        with the time of the last change, a stall of the observer or of the store it reads
        (measured: a 4.5 s store round trip while 16 ranks built their gloo group) would
        make every member look stale at once: the first read after the stall is served
        before the members' queued beats, each of which waits for its reply. Every founder
        was then declared dead, and death is final, so epoch 0 never formed. With the
        credit cap a silent member needs several scans to be judged, and a scan only
        starts once the previous one finished, so a stall costs at most one capped credit.
        Detection of a real hang is unchanged while scans run at their usual cadence.
        With ``clock`` (the coordinator's store's) silence is also credited only for time the
        store kept up with its input (NOTE [heartbeats off the request queue] in authstore):
        a beat queued behind a burst of control requests is not a silent member."""
        if self.beats is not None and members is None:
            return self._check_silent()
        began = time.monotonic()
        if self.clock is not None:  # silence counts only while the store kept up
            now = self.clock()
        cap = self.timing.hb_timeout_s / 4
        step = min(max(0.0, now - self._last_scan), cap) if self._last_scan else 0.0
        left = self.ctl.left()  # NOTE [scale]: one request, not one per member
        for m in (range(self.known_ids()) if members is None else members):
            if m in self.deaths or m in left:
                continue
            v = int(self.ctl.store.add(cp.key_hb(m), 0))
            if v == 0:
                continue
            seen = self._hb.get(m)
            if seen is None or seen[0] != v:
                self._hb[m] = (v, 0.0)
                continue
            silent = seen[1] + step
            self._hb[m] = (v, silent)
            if silent > self.timing.hb_timeout_s and not self.ctl.store.check([cp.key_left(m)]):
                self.declare(m, f"heartbeat stale for {silent:.2f} s (hung or stopped)")
        # when this scan ended
        self._last_scan = self.clock() if self.clock is not None else \
            now + (time.monotonic() - began)

    def _check_silent(self) -> None:
        """``check_heartbeats`` from the store's record of beats: the members whose last
        beat was applied more than ``hb_timeout_s`` before the store's clock
        (``StoreServer.caught_up``: every beat that arrived before it was applied, so a
        backlog is no silence) -- O(silent members) per scan, not O(members) reads
        (NOTE [beats in arrival order] in storekv). Members that never beat are not
        judged, as in the scan."""
        now = self.clock()
        pre = self.ctl.store._k(f"{cp.ROOT}hb/")
        silent = [(k, t) for k, t in self.beats.silent_since(now - self.timing.hb_timeout_s)
                  if k.startswith(pre)]
        if not silent:
            return
        left = self.ctl.left()
        for key, t in silent:
            try:
                m = int(key[len(pre):])
            except ValueError:
                continue
            self.beats.forget_beat(key)
            if m in self.deaths or m in left or self.ctl.store.check([cp.key_left(m)]):
                continue
            self.declare(m, f"heartbeat stale for {now - t:.2f} s (hung or stopped)")

    def declare(self, member: int, reason: str) -> None:
        if member in self.deaths:
            return
        self.deaths[member] = reason
        self.death_times[member] = time.monotonic()
        self.ctl.declare_dead(member, reason)
        # the epochs listing it are aborted by ``propose_survivors``, in this pass of the
        # observer's loop, with the shrink (NOTE [the next epoch in the abort flag] in control)
        self._shrink_due = True  # proposed by ``propose_survivors``, once per batch
        if self.fr_dir:
            e = self.ctl.latest_epoch()
            write_agent_dump(self.fr_dir, self.deaths,
                             {k: self.ctl.record(k) for k in range(max(0, e - 3), e + 1)},
                             lane=self.lane, incarnation=self.incarnation)

    def propose_survivors(self) -> None:
        """After deaths were declared: propose the epoch after the latest one, of its
        members less every death and departure known here (first proposal wins,
        ``Control.propose``), if it lists one of the dead. Called by the observer's loop
        once per pass, so deaths seen together (two processes killed at once) make one
        new epoch, not one each.

        NOTE [the observer proposes the shrink]: the observer knows of a death first; each
        survivor used to learn it from the death list, wait for its own verdict and propose
        the same record, some 25 sequential store requests per survivor (25,000 at 1,000
        members: 2.7-3.8 s on one store thread, bench/sim_members.py). Proposed here, the
        survivors find the next epoch on their first look (``membership.converge``) and go
        straight to forming it. A member's own proposal stays for what only members see
        (a collective error, a silent peer within the call bound)."""
        if not self._shrink_due:
            return
        self._shrink_due = False
        latest = self.ctl.latest_epoch()
        rec = self.ctl.record(latest)
        if rec is not None and any(m in self.deaths for m in rec.get("members", [])):
            # NOTE [news after the record] in membership: the notices counted before the
            # lists are read are all reflected below (a later one wakes the members)
            news = self.ctl.news_counts()
            left = self.ctl.left()
            gone = sorted(m for m in rec["members"] if m in self.deaths or m in left)
            survivors = [m for m in rec["members"] if m not in self.deaths and m not in left]
            if survivors:  # NOTE [the next epoch in the abort flag] in control
                self.ctl.abort_and_propose(latest, self._why(rec["members"]), {
                    "members": survivors, "joins": rec.get("joins", 0), "news": news,
                    "why": f"shrink after epoch {latest}: {gone} (proposed by the observer)"})
        self.abort_epochs_with_dead()  # the others that list a dead member (or all of them,
        # where no survivor is left)

    def _why(self, members: list[int]) -> str:
        gone = [m for m in members if m in self.deaths]
        return f"member(s) {gone} dead: {'; '.join(self.deaths[m] for m in gone)}"

    def abort_epochs_with_dead(self) -> None:
        if not self.deaths or self._shrink_due:  # due: ``propose_survivors``, this pass
            return
        latest = self.ctl.latest_epoch()
        for e in range(max(0, latest - 1), latest + 1):
            if e not in self._members:  # NOTE [scale]: each record parsed once, not per scan
                rec = self.ctl.record(e)
                if rec is None:
                    continue
                self._members[e] = rec.get("members", [])
                for old in [k for k in self._members if k < latest - 1]:
                    del self._members[old]
            if any(m in self.deaths for m in self._members[e]) and not self.ctl.aborted(e):
                self.ctl.abort(e, self._why(self._members[e]))
