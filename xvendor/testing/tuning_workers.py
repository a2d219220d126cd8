"""Worker processes for the tuning-store tests (spawned: they must be importable)."""

from __future__ import annotations


def put_many(directory: str, arch: str, cus: int, worker: int, count: int) -> None:
    """Write ``count`` distinct winners into the shared store, one put at a time."""
    from xvendor.tuning.problem import ProblemKey
    from xvendor.tuning.store import TuningStore, Winner
    store = TuningStore(arch, cus, directory)
    for i in range(count):
        key = ProblemKey("gemm", "triton", arch, cus, "p", "bfloat16", "bfloat16", "NN",
                         256, 1000 + worker, 64 + i)
        store.put(key, Winner("triton", {"block_m": 64}, f"w{worker}-{i}", 1.0 + i,
                              provenance={"kind": "measured", "device": f"worker{worker}"}))
