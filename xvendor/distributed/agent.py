"""The agent (``xvendor run``, one machine): hosts the control-plane TCPStore outside the
training ranks, starts workers, and posts death notices — at once when a worker process
exits, after ``hb_timeout_s`` when its heartbeat stops (SIGSTOP, a hang) — aborting every
live epoch that lists the dead member. The verdicts themselves are ``Verdicts``'s, shared
with the ``Coordinator`` (which starts no process: workers connect to it).

Workers start either as Python functions in a forkserver whose server imported torch once
(fast: a newcomer is up in well under a second, the Python + torch import is paid once), or
as commands through ``torch.distributed.elastic``'s ``SubprocessHandler`` (a new session per
worker, closed with killpg) for ``xvendor run``. Every worker leads its own process group, so
``close()`` can killpg whatever it left behind.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from typing import Callable

import torch.distributed as dist

from . import control as cp
from .control import Timing
from .verdicts import Verdicts


def _child_main(target: Callable[[dict], None], spec: dict) -> None:
    os.setpgid(0, 0)  # lead a process group: the agent's close() kills it whole
    target(spec)


class Agent:
    def __init__(self, timing: Timing = Timing(), fr_dir: str | None = None,
                 host: str = "127.0.0.1", preload: tuple[str, ...] = ()):
        self.timing, self.fr_dir, self.host = timing, fr_dir, host
        # A TCPStore server binds every interface whatever host it is given; handed a
        # socket bound to ``host`` (loopback by default) it listens there only.
        self._listen = socket.create_server((host, 0))
        self.store = dist.TCPStore(host, self._listen.getsockname()[1], is_master=True,
                                   wait_for_workers=False, master_listen_fd=self._listen.fileno(),
                                   timeout=datetime.timedelta(seconds=60))
        self.port = self.store.port
        self._ctl = cp.Control(cp.connect(host, self.port))
        self._lock = threading.Lock()
        self._procs: dict[int, object] = {}       # pid -> Process or SubprocessHandler
        self._exited: dict[int, int] = {}         # pid -> exit code
        self._member_of_pid: dict[int, int] = {}  # pid -> its newest member id
        self._pid_of_member: dict[int, int] = {}
        self._scanned = 0
        self._unmapped: set[int] = set()
        self.verdicts = Verdicts(self._ctl, timing, fr_dir)
        self.deaths = self.verdicts.deaths            # {member: why}, shared
        self.death_times = self.verdicts.death_times  # {member: monotonic time of the verdict}
        self._ctx = None
        self._preload = ("torch", "torch.distributed", "xvendor.distributed.group") + tuple(preload)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._monitor, name="xv-agent", daemon=True)
        self._thread.start()

    # -- starting workers -----------------------------------------------------------------
    def _mp(self):
        if self._ctx is None:
            self._ctx = mp.get_context("forkserver")
            self._ctx.set_forkserver_preload(list(self._preload))
        return self._ctx

    def spec(self, member: int, role: str, **extra) -> dict:
        return {"host": self.host, "port": self.port, "member": member, "role": role,
                "timing": self.timing.as_dict(), "fr_dir": self.fr_dir, **extra}

    def found(self, n: int, target: Callable[[dict], None], **extra) -> list[int]:
        """Write epoch 0 with ``n`` founders and start them (``target(spec)`` each)."""
        ids = [self._ctl.new_id() for _ in range(n)]
        self._ctl.propose(0, {"members": ids, "joins": 0, "why": "founders"})
        for i in ids:
            self.start(target, self.spec(i, "founder", **extra), i)
        return ids

    def newcomer(self, target: Callable[[dict], None], **extra) -> int:
        i = self._ctl.new_id()
        self.start(target, self.spec(i, "newcomer", **extra), i)
        return i

    def start(self, target, spec: dict, member: int) -> int:
        p = self._mp().Process(target=_child_main, args=(target, spec), daemon=True)
        p.start()
        with self._lock:
            self._procs[p.pid] = p
            self._member_of_pid[p.pid] = member
            self._pid_of_member[member] = p.pid
        return p.pid

    def found_commands(self, n: int, argv: list[str], env: dict | None = None) -> list[int]:
        """``xvendor run``: start ``n`` copies of a command; they read XV_* from the env."""
        ids = [self._ctl.new_id() for _ in range(n)]
        self._ctl.propose(0, {"members": ids, "joins": 0, "why": "founders"})
        for i in ids:
            self.start_command(argv, i, "founder", env)
        return ids

    def start_command(self, argv: list[str], member: int, role: str, env: dict | None = None):
        from torch.distributed.elastic.multiprocessing.subprocess_handler import SubprocessHandler
        e = {"XV_STORE_HOST": self.host, "XV_STORE_PORT": str(self.port), "XV_MEMBER": str(member),
             "XV_ROLE": role, "XV_TIMING": json.dumps(self.timing.as_dict()),
             "XV_FR_DIR": self.fr_dir or "", **(env or {})}
        h = SubprocessHandler(argv[0], tuple(argv[1:]), e, None, None, member, None)
        with self._lock:
            self._procs[h.proc.pid] = h
            self._member_of_pid[h.proc.pid] = member
            self._pid_of_member[member] = h.proc.pid
        return h.proc.pid

    # -- observing and injuring (tests, demo, bench) --------------------------------------
    def pid(self, member: int) -> int:
        with self._lock:
            if member in self._pid_of_member:
                return self._pid_of_member[member]
        raise KeyError(f"no process for member {member}")

    def signal(self, member: int, sig: int) -> None:
        os.kill(self.pid(member), sig)

    def progress(self, member: int) -> int:
        v = self._ctl.get(cp.key_progress(member))
        return int(v) if v else 0

    def latest_epoch(self) -> int:
        return self._ctl.latest_epoch()

    def record(self, e: int) -> dict | None:
        return self._ctl.record(e)

    def exitcodes(self) -> dict[int, int | None]:
        with self._lock:
            return {pid: self._exited.get(pid) for pid in self._procs}

    def wait(self, timeout_s: float) -> bool:
        """Wait until every started process exited; False on timeout."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            codes = self.exitcodes()
            if all(c is not None for c in codes.values()):
                return True
            time.sleep(0.05)
        return False

    # -- the monitor ----------------------------------------------------------------------
    def _monitor(self) -> None:
        last_hb = 0.0
        while not self._stop.wait(self.timing.agent_tick_s):
            try:
                self._check_exits()
                now = time.monotonic()
                if now - last_hb >= max(self.timing.hb_interval_s / 2, 0.05):
                    last_hb = now
                    self._scan_ids()
                    self.verdicts.check_heartbeats(now, range(self._scanned))
                    self.verdicts.abort_epochs_with_dead()
                self.verdicts.propose_survivors()  # NOTE [the observer proposes the shrink]
            except Exception as e:  # the store is shutting down
                if self._stop.is_set():
                    return
                print(f"xv-agent: monitor error: {e!r}", file=sys.stderr)

    def _exitcode(self, h) -> int | None:
        if hasattr(h, "exitcode"):
            return h.exitcode
        return h.proc.poll()

    def _check_exits(self) -> None:
        with self._lock:
            items = [(pid, h) for pid, h in self._procs.items() if pid not in self._exited]
        for pid, h in items:
            code = self._exitcode(h)
            if code is None:
                continue
            with self._lock:
                self._exited[pid] = code
                member = self._member_of_pid.get(pid)
            if member is not None and not self._ctl.store.check([cp.key_left(member)]):
                how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                self._declare(member, f"process {pid} {how}")

    def _scan_ids(self) -> None:
        n = int(self._ctl.store.add(cp.KEY_NEXT_ID, 0))
        with self._lock:
            self._unmapped.update(m for m in range(self._scanned, n)
                                  if m not in self._pid_of_member)
        self._scanned = n
        for m in sorted(self._unmapped):
            raw = self._ctl.get(cp.key_pid(m))
            if raw is not None:  # a process that rejoined under a new id registered it
                with self._lock:
                    self._member_of_pid[int(raw)] = m
                    self._pid_of_member[m] = int(raw)
                    self._unmapped.discard(m)

    def _declare(self, member: int, reason: str) -> None:
        self.verdicts.declare(member, reason)

    # -- ending ---------------------------------------------------------------------------
    def close(self) -> None:
        """SIGKILL every process group the agent started (SIGCONT first is not needed:
        SIGKILL ends stopped processes too), reap them, stop the monitor."""
        self._stop.set()
        with self._lock:
            handles = dict(self._procs)
        for pid in handles:
            for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    continue
        for pid, h in handles.items():
            try:
                h.join(10) if hasattr(h, "join") else h.proc.wait(10)
            except Exception:
                pass
        self._thread.join(5)

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
