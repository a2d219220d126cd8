"""The one path every collective of a membership epoch takes: stage, record, launch, sliced
wait, abort. ``ResilientGroup`` (its own methods: a failure raises ``EpochAborted``) and
``ResilientProcessGroup`` (DDP's face: a failure is latched, NOTE [latched errors] in
``torch_pg``) are two faces over it; neither waits, records or aborts on its own.

- stage: a private copy of every input (a retired group whose op is stuck on a hung peer
  may write into its buffers later, so none is ever shared with the caller);
- record: one flight-recorder entry per collective, finished "completed", "aborted" (the
  epoch's abort flag was set) or "failed" (the backend raised);
- launch: ``launch()`` returns the backend's work(s); a ``RuntimeError`` there is a failed
  collective;
- sliced wait: ``control.sliced_wait`` on each work (the abort flag read between slices,
  the call bound kept);
- abort: any failure aborts the epoch for every member (its abort flag) and surfaces as
  ``EpochAborted``. A wait that raises anything but ``EpochAborted`` counts as failed (a
  gloo connection reset is a ``RuntimeError``; whatever else a backend raises is a failed
  collective too, never a reason to leave the epoch running).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .control import EpochAborted, sliced_wait


@dataclass
class Flight:
    """A launched collective: its works, its record entry and its start time."""
    op: str
    works: list
    entry: dict
    t0: float = field(default_factory=time.monotonic)


class Engine:
    def __init__(self, ctl, epoch: int, member: int, rank: int, timing, recorder):
        self.ctl, self.epoch, self.member, self.rank = ctl, epoch, member, rank
        self.timing, self.recorder = timing, recorder

    @staticmethod
    def stage(t: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
        """A private copy of ``t`` (on ``device`` when given)."""
        return t.detach().to(device if device is not None else t.device, copy=True)

    def launch(self, op: str, tensors, launch) -> Flight:
        """Record and launch; ``EpochAborted`` if the backend refused to start it."""
        entry = self.recorder.start(op, tensors, self.epoch, self.rank)
        t0 = time.monotonic()
        try:
            works = launch()
        except RuntimeError as e:
            self._failed(entry, op, "failed to launch", e)
        return Flight(op, works if isinstance(works, list) else [works], entry, t0)

    def wait(self, f: Flight, done=None) -> None:
        """Wait for every work of ``f`` in slices; ``done()`` (results copied back) runs
        only on success. Raises ``EpochAborted`` on an abort or a failure."""
        try:
            for w in f.works:
                sliced_wait(w, self.ctl, self.epoch, self.member, self.timing, f.t0)
            if done is not None:
                done()
        except EpochAborted:
            self.recorder.finish(f.entry, "aborted")
            raise
        except Exception as e:
            self._failed(f.entry, f.op, "failed", e)
        self.recorder.finish(f.entry, "completed")

    def run(self, op: str, tensors, launch, done=None) -> None:
        self.wait(self.launch(op, tensors, launch), done)

    def _failed(self, entry: dict, op: str, how: str, e: BaseException):
        self.recorder.finish(entry, "failed")
        why = f"{op} {how}: {type(e).__name__}: {str(e)[:200]}"
        self.ctl.abort(self.epoch, f"member {self.member}: {why}")  # everyone stops
        raise EpochAborted(f"epoch {self.epoch}: {why}") from e
