"""``xvendor.MemPool`` and ``xvendor.use_mem_pool``: named allocator-pool policies over
``torch.cuda.MemPool`` (NVIDIA, ROCm) and ``torch.xpu.MemPool``, which share one signature
``MemPool(allocator=None, use_on_oom=False, no_split=False)`` in torch 2.15.

Presets (``MemPool.preset(name)``), as data in ``PRESETS``:
- ``default``     — a private pool with the caching allocator's usual behaviour;
- ``symmetric``   — ``no_split``: blocks are never split, so a buffer keeps the exact
                    segment it was given (what symmetric-memory registration needs);
- ``oom_reserve`` — ``use_on_oom``: the allocator may draw from this pool when a regular
                    allocation would fail: a last-resort reserve.

Verified here: the presets, argument and device errors (l0). Pools need a GPU; the l2 tests
in ``tests/test_mempool.py`` check that a pool's allocations show in its stats there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from . import devices

__all__ = ["MemPool", "PRESETS", "PoolPolicy", "use_mem_pool"]


@dataclass(frozen=True)
class PoolPolicy:
    use_on_oom: bool = False
    no_split: bool = False
    purpose: str = ""


PRESETS = {
    "default": PoolPolicy(purpose="private pool, usual caching-allocator behaviour"),
    "symmetric": PoolPolicy(no_split=True, purpose="symmetric-memory buffers: never split"),
    "oom_reserve": PoolPolicy(use_on_oom=True, purpose="last-resort reserve used on OOM"),
}


def _pool_device(device) -> torch.device:
    dev = torch.device(device) if device is not None else devices._default_device()
    if dev.type not in ("cuda", "xpu"):
        raise ValueError(f"xvendor.MemPool: device must be cuda or xpu, got {dev.type!r}: torch "
                         "has allocator pools only for accelerators")
    mod = getattr(torch, dev.type)
    if not hasattr(mod, "MemPool"):
        raise RuntimeError(f"xvendor.MemPool: torch {torch.__version__} has no "
                           f"torch.{dev.type}.MemPool (needs torch 2.15+)")
    if not mod.is_available():
        raise RuntimeError(f"xvendor.MemPool: no {dev.type} device is available in this process")
    return dev if dev.index is not None else torch.device(dev.type, mod.current_device())


class MemPool:
    """A private allocator pool on one device, with a named or explicit policy."""

    def __init__(self, device=None, use_on_oom: bool = False, no_split: bool = False, *,
                 name: str = "custom"):
        for arg, value in (("use_on_oom", use_on_oom), ("no_split", no_split)):
            if not isinstance(value, bool):
                raise TypeError(f"xvendor.MemPool: {arg} must be a bool, got {value!r}")
        self.device = _pool_device(device)
        self.policy = PoolPolicy(use_on_oom, no_split, PRESETS.get(name, PoolPolicy()).purpose)
        self.name = name
        mod = getattr(torch, self.device.type)
        with mod.device(self.device):
            self._pool = mod.MemPool(use_on_oom=use_on_oom, no_split=no_split)

    @classmethod
    def preset(cls, name: str, device=None) -> "MemPool":
        if name not in PRESETS:
            raise ValueError(f"xvendor.MemPool.preset: unknown preset {name!r}; presets are "
                             f"{sorted(PRESETS)}")
        p = PRESETS[name]
        return cls(device, use_on_oom=p.use_on_oom, no_split=p.no_split, name=name)

    def stats(self) -> dict:
        """Bytes reserved and in use by this pool, and its segment count (from its snapshot)."""
        segments = self._pool.snapshot()
        return {
            "segments": len(segments),
            "reserved_bytes": sum(s.get("total_size", 0) for s in segments),
            "allocated_bytes": sum(s.get("allocated_size", 0) for s in segments),
            "use_count": self._pool.use_count(),
            "policy": self.name,
        }

    def __repr__(self) -> str:
        return (f"xvendor.MemPool({self.device}, {self.name}, use_on_oom={self.policy.use_on_oom}, "
                f"no_split={self.policy.no_split})")


@contextlib.contextmanager
def use_mem_pool(pool: MemPool):
    """Route this thread's allocations on ``pool.device`` to ``pool`` within the block."""
    if not isinstance(pool, MemPool):
        raise TypeError(f"xvendor.use_mem_pool: pool must be an xvendor.MemPool, got "
                        f"{type(pool).__name__}")
    mod = getattr(torch, pool.device.type)
    with mod.use_mem_pool(pool._pool, device=pool.device):
        yield pool
