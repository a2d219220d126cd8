"""``xvendor.Event``: one event API over torch.cuda (NVIDIA, ROCm) and torch.xpu events.

An interprocess event travels through ``torch.multiprocessing`` queues and pipes like a
tensor does: a reduction registered with ``ForkingPickler`` sends its IPC handle, and the
receiver rebuilds it with ``Event.from_ipc_handle`` on the same device. Plain ``pickle``
refuses it: a handle is only meaningful while the exporting process lives.

Rules (each violation raises ``ValueError``/``RuntimeError`` naming the rule):
- events live on accelerators: the CPU device has none (``WeightChannel`` has a host-side
  equivalent for CPU tensors);
- timing events cannot be interprocess (CUDA and SYCL both forbid it);
- interprocess XPU events need torch with ``torch.xpu.Event.ipc_handle`` (2.15+) built
  against oneAPI 2026.2 or newer (``xvendor.xpu.ipc``, the XPU specifics).

Verified here: the error paths and the pickling protocol (l0). The IPC round trip itself
needs a GPU: l2 tests in ``tests/test_events.py`` run it on CUDA/ROCm/XPU and skip elsewhere.
"""

from __future__ import annotations

import torch
from multiprocessing.reduction import ForkingPickler

from . import devices

__all__ = ["Event", "ipc_problem"]

def _accelerator(device) -> torch.device:
    dev = torch.device(device) if device is not None else devices._default_device()
    if dev.type == "cpu":
        raise ValueError("xvendor.Event: device must be an accelerator (cuda/xpu); the CPU has "
                         "no device events (use xvendor.WeightChannel's host-side versioning "
                         "for CPU tensors)")
    if dev.type not in ("cuda", "xpu"):
        raise ValueError(f"xvendor.Event: device type {dev.type!r} is not supported "
                         "(cuda covers NVIDIA and ROCm; xpu covers Intel)")
    if dev.index is None:
        dev = torch.device(dev.type, getattr(torch, dev.type).current_device())
    return dev


def ipc_problem(device_type: str, *, xpu_version: str | None = None,
                has_xpu_ipc: bool | None = None, platform: str | None = None) -> str | None:
    """Why interprocess events cannot work for ``device_type`` here, or ``None``.

    The keyword arguments default to this process's torch build; tests pass other values.
    """
    import sys
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return f"interprocess events need Linux (this is {platform})"
    if device_type == "cuda":
        return None  # cudaIpcGetEventHandle / hipIpcGetEventHandle
    if device_type == "xpu":
        from .xpu.ipc import event_ipc_problem
        return event_ipc_problem(xpu_version, has_xpu_ipc)
    return f"no interprocess events for device type {device_type!r}"


class Event:
    """A device event; ``interprocess=True`` makes it shareable with other processes."""

    def __init__(self, device=None, interprocess: bool = False, enable_timing: bool = False,
                 blocking: bool = False, *, _wrap=None):
        if interprocess and enable_timing:
            raise ValueError("xvendor.Event: enable_timing and interprocess cannot both be set: "
                             "timing events cannot be shared between processes")
        self.device = _accelerator(device)
        self.interprocess, self.enable_timing, self.blocking = interprocess, enable_timing, blocking
        if interprocess:
            why = ipc_problem(self.device.type)
            if why:
                raise RuntimeError(f"xvendor.Event: interprocess=True is not possible: {why}")
        if _wrap is not None:
            self._event = _wrap
            return
        mod = getattr(torch, self.device.type)
        with mod.device(self.device):
            self._event = mod.Event(enable_timing=enable_timing, blocking=blocking,
                                    interprocess=interprocess)

    # The torch event's methods, with the stream defaulting to the event's device.
    def record(self, stream=None) -> None:
        self._event.record(stream if stream is not None else self._stream())

    def wait(self, stream=None) -> None:
        self._event.wait(stream if stream is not None else self._stream())

    def query(self) -> bool:
        return self._event.query()

    def synchronize(self) -> None:
        self._event.synchronize()

    def elapsed_time(self, end: "Event") -> float:
        return self._event.elapsed_time(end._event)

    def ipc_handle(self) -> bytes:
        if not self.interprocess:
            raise ValueError("xvendor.Event.ipc_handle: the event was not created with "
                             "interprocess=True")
        mod = getattr(torch, self.device.type)
        with mod.device(self.device):
            return self._event.ipc_handle()

    @classmethod
    def from_ipc_handle(cls, device, handle: bytes) -> "Event":
        dev = _accelerator(device)
        mod = getattr(torch, dev.type)
        return cls(dev, interprocess=True, _wrap=mod.Event.from_ipc_handle(dev, handle))

    def _stream(self):
        return getattr(torch, self.device.type).current_stream(self.device)

    def __reduce__(self):
        raise TypeError("xvendor.Event cannot be pickled with plain pickle: an interprocess "
                        "event travels through torch.multiprocessing queues and pipes as an "
                        "IPC handle, valid only while this process lives")

    def __repr__(self) -> str:
        kind = "interprocess" if self.interprocess else "local"
        return f"xvendor.Event({self.device}, {kind}, timing={self.enable_timing})"


def _rebuild_event(device_type: str, index: int, handle: bytes) -> Event:
    return Event.from_ipc_handle(torch.device(device_type, index), handle)


def _reduce_event(ev: Event):
    if not ev.interprocess:
        raise TypeError("xvendor.Event: only events created with interprocess=True can be "
                        "sent to another process")
    return _rebuild_event, (ev.device.type, ev.device.index, ev.ipc_handle())


ForkingPickler.register(Event, _reduce_event)
