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
                 lane: int = 0):
        self.ctl, self.timing, self.fr_dir, self.lane = ctl, timing, fr_dir, lane
        self.deaths: dict[int, str] = {}
        self.death_times: dict[int, float] = {}
        self._hb: dict[int, tuple[int, float]] = {}

    def known_ids(self) -> int:
        return int(self.ctl.store.add(cp.KEY_NEXT_ID, 0))

    def check_heartbeats(self, now: float, members: range | list[int] | None = None) -> None:
        """Declare dead every member whose heartbeat counter stood still for ``hb_timeout_s``
        (by this process's clock). A member that never beat is still importing torch: its
        exit (or its closed connection) covers it until then."""
        for m in (range(self.known_ids()) if members is None else members):
            if m in self.deaths or self.ctl.store.check([cp.key_left(m)]):
                continue
            v = int(self.ctl.store.add(cp.key_hb(m), 0))
            if v == 0:
                continue
            seen = self._hb.get(m)
            if seen is None or seen[0] != v:
                self._hb[m] = (v, now)
            elif now - seen[1] > self.timing.hb_timeout_s:
                self.declare(m, f"heartbeat stale for {now - seen[1]:.2f} s (hung or stopped)")

    def declare(self, member: int, reason: str) -> None:
        if member in self.deaths:
            return
        self.deaths[member] = reason
        self.death_times[member] = time.monotonic()
        self.ctl.declare_dead(member, reason)
        self.abort_epochs_with_dead()
        if self.fr_dir:
            e = self.ctl.latest_epoch()
            write_agent_dump(self.fr_dir, self.deaths,
                             {k: self.ctl.record(k) for k in range(max(0, e - 3), e + 1)},
                             lane=self.lane)

    def abort_epochs_with_dead(self) -> None:
        if not self.deaths:
            return
        latest = self.ctl.latest_epoch()
        for e in range(max(0, latest - 1), latest + 1):
            rec = self.ctl.record(e)
            gone = [m for m in (rec or {}).get("members", ()) if m in self.deaths]
            if gone and not self.ctl.aborted(e):
                self.ctl.abort(e, f"member(s) {gone} dead: "
                                  f"{'; '.join(self.deaths[m] for m in gone)}")
