"""The store's key-value map and its operations (``KV``), shared by the server thread and
the coordinator's own view (``authstore.LocalStore``); heartbeats in arrival order (NOTE
[beats in arrival order], below)."""

from __future__ import annotations

import threading
import time

from .storewire import ADD, CAS, CHECK, DEL, GET, MGET, MISSING, MSET, NUM, OK, SET


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

    def abort_and_propose(self, abort_key: bytes, abort_value: bytes, epoch_key: bytes,
                          record: bytes) -> bool:
        """Set an epoch's abort flag and propose the next epoch in one step, if neither key
        exists; True if both were written. Waiters learn of the abort first (it is written,
        and announced, first). NOTE [the next epoch in the abort flag] in control: written
        apart, the store's thread could answer waits on the new epoch's key before the flag
        existed; written flag first, the flag would name a record that might lose the
        proposal (a member's grow)."""
        with self._lock:
            d = self._d
            if abort_key in d or epoch_key in d:
                return False
            d[abort_key], d[epoch_key] = abort_value, record
            self._wrote([abort_key, epoch_key])
            return True

    def __len__(self) -> int:
        return len(self._d)

