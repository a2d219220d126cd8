"""``xvendor.WeightChannel``: one producer streams weight updates to consumer processes on
the same node; every read is one consistent version, never a half-written one.

NOTE [channel protocol]: a seqlock. The producer shares its tensors once (storage IPC
through ``torch.multiprocessing``: shared memory on the CPU, CUDA/XPU IPC handles on a
GPU) together with a shared int64 sequence number ``seq`` and, on an accelerator, an
interprocess ``xvendor.Event``:

    producer update:  seq <- odd   ; write the tensors in place ; record event ; seq <- seq + 1
    consumer read:    s1 <- seq (wait while odd or too old) ; wait on event ;
                      copy the tensors out ; synchronize ; s2 <- seq ; accept iff s1 == s2

The version is ``seq // 2``. The producer never waits for a consumer, so a consumer that
dies, hangs or falls behind cannot block it; a consumer that overlaps an update sees
``s1 != s2`` and copies again. On the CPU the "event" is the host-side ``seq`` itself
(writes are synchronous); on a GPU the event orders the consumer's copy after the
producer's writes on the device.

Verified here: the CPU channel with real processes (l1: a producer, consumers checking
every element of every version they read, a consumer killed mid-run). Memory ordering on
the CPU relies on x86-64's ordered stores plus the thread-pool barriers around ``copy_``;
weakly ordered CPUs (aarch64) are not verified. The GPU path needs a device (l2 tests).
"""

from __future__ import annotations

import contextlib
import time
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing  # noqa: F401  (registers the tensor reductions with ForkingPickler)

from .events import Event

__all__ = ["WeightChannel"]


class WeightChannel:
    """Shared, versioned tensors: ``publish``/``update`` in the producer, ``read`` in consumers."""

    def __init__(self, tensors: dict[str, torch.Tensor]):
        if not isinstance(tensors, dict) or not tensors:
            raise ValueError("xvendor.WeightChannel: tensors must be a non-empty dict of "
                             "name -> tensor")
        devs = set()
        for name, t in tensors.items():
            if not isinstance(name, str) or not isinstance(t, torch.Tensor):
                raise TypeError(f"xvendor.WeightChannel: tensors must map str -> Tensor, got "
                                f"{type(name).__name__} -> {type(t).__name__}")
            devs.add(t.device)
        if len(devs) != 1:
            raise ValueError(f"xvendor.WeightChannel: all tensors must be on one device, got "
                             f"{sorted(map(str, devs))}")
        self.device = devs.pop()
        if self.device.type == "cpu":  # the channel owns shared copies of the producer's values
            self._tensors = {k: t.detach().clone().share_memory_() for k, t in tensors.items()}
            self._event = None
        else:  # GPU storages are shared by IPC handle as they are
            self._tensors = {k: t.detach() for k, t in tensors.items()}
            self._event = Event(self.device, interprocess=True)
        self._seq = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._producer = True
        self.retries = 0  # reads repeated because an update overlapped them

    @property
    def version(self) -> int:
        """The last completely published version (0 before the first update)."""
        return int(self._seq[0]) // 2

    @contextlib.contextmanager
    def update(self):
        """Producer: write the yielded tensors in place; the new version is published on exit.

        If the block raises, the sequence number stays odd: consumers keep refusing the
        half-written tensors until the next successful update.
        """
        if not self._producer:
            raise RuntimeError("xvendor.WeightChannel.update: only the producer that created "
                               "the channel may update it")
        seq = int(self._seq[0])
        self._seq[0] = seq | 1  # odd: writing (already odd after a failed update)
        yield self._tensors
        if self._event is not None:
            self._event.record()
        self._seq[0] = (seq | 1) + 1

    def publish(self, values: dict[str, torch.Tensor]) -> int:
        """Producer: copy ``values`` into the shared tensors as one new version; returns it."""
        missing = set(self._tensors) - set(values)
        extra = set(values) - set(self._tensors)
        if missing or extra:
            raise ValueError(f"xvendor.WeightChannel.publish: values must have exactly the names "
                             f"{sorted(self._tensors)}; missing {sorted(missing)}, unknown "
                             f"{sorted(extra)}")
        with self.update() as shared:
            for name, value in values.items():
                shared[name].copy_(value)
        return self.version

    def read(self, out: dict[str, torch.Tensor] | None = None, min_version: int = 0,
             timeout: float | None = None) -> tuple[int, dict[str, torch.Tensor]]:
        """Consumer: wait for a version >= ``min_version`` and return (version, a consistent copy).

        ``out`` (same names, shapes and dtypes) receives the copy without allocating.
        Raises ``TimeoutError`` when no such version appears within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        out = out if out is not None else {k: torch.empty_like(t) for k, t in self._tensors.items()}
        pause = 1e-5
        while True:
            s1 = int(self._seq[0])
            if s1 % 2 == 0 and s1 // 2 >= min_version:
                if self._event is not None:
                    self._event.wait()
                for name, t in self._tensors.items():
                    out[name].copy_(t, non_blocking=True)
                if self._event is not None:
                    getattr(torch, self.device.type).current_stream(self.device).synchronize()
                if int(self._seq[0]) == s1:
                    return s1 // 2, out
                self.retries += 1
                continue
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"xvendor.WeightChannel.read: no version >= {min_version} "
                                   f"within {timeout} s (latest complete: {s1 // 2}, producer "
                                   f"{'writing' if s1 % 2 else 'idle'})")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def __reduce__(self):
        raise TypeError("xvendor.WeightChannel travels through torch.multiprocessing (queues, "
                        "Process arguments), not plain pickle: its tensors and event are shared "
                        "by IPC handles")


def _attach(tensors, seq, event, device):
    ch = WeightChannel.__new__(WeightChannel)
    ch._tensors, ch._seq, ch._event, ch.device = tensors, seq, event, device
    ch._producer, ch.retries = False, 0
    return ch


def _reduce_channel(ch: WeightChannel):
    return _attach, (ch._tensors, ch._seq, ch._event, ch.device)


ForkingPickler.register(WeightChannel, _reduce_channel)
