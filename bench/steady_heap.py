"""glibc's heap trimming, which can swamp short CPU calls in a timing, held still for both
peers of a benchmark.

Why this exists: with glibc's default malloc, whether a freed multi-megabyte tensor's pages
go back to the kernel (the top of the heap trimmed, or an ``mmap``ed chunk unmapped) depends
on the history of the process: its thresholds move with the sizes freed before. In one
process a call then reuses warm pages; in the next, the same call faults its output and
temporaries in again on every call. Measured on the project's 2-core VM (torch 2.15, 1
thread): ``torch.rms_norm`` of a 256x2048 fp32 tensor took 0.3-0.7 ms with ~50 page faults
per call in some processes and 4-9 ms with 992 faults per call in others, torch's own op and
xvendor's alike, with the same fault counts in the same process. A ratio of two such calls
then measures the kernel's page-fault handling on a shared machine, not the op.

``ensure(mode)``: ``"steady"`` re-executes the benchmark once with ``MALLOC_TRIM_THRESHOLD_``
(1 GiB: never trim) and ``MALLOC_MMAP_THRESHOLD_`` (32 MiB, glibc's largest: heap-allocate
what the tables use), so after warm-up neither peer faults; ``"default"`` leaves the process
as the user runs it. Both peers always run in the same process, so either way they share
the allocator; the benchmarks print faults per call for each side, so an op of ours that
makes the allocator fault where torch's does not still shows. Environment variables rather
than ``mallopt`` through ctypes: glibc documents them, and they act before the first
allocation. (PyTorch's CPU tuning guides suggest jemalloc or tcmalloc for the same reason;
they are not installed here, and glibc's own knobs need nothing.)
"""

from __future__ import annotations

import os
import resource
import sys

STEADY = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
MODES = ("steady", "default")


def ensure(mode: str, script: str) -> str:
    """Run under ``mode``: when the environment lacks it and ``script`` is the program being
    run, re-execute it once with the settings (glibc reads them at the first allocation
    only); returns a line saying what holds, for the table's title."""
    if mode not in MODES:
        raise ValueError(f"--heap must be one of {MODES}, got {mode!r}")
    steady = all(os.environ.get(k) == v for k, v in STEADY.items())
    if mode == "steady" and not steady and sys.platform.startswith("linux") \
            and os.path.abspath(sys.argv[0]) == os.path.abspath(script):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **STEADY})
    if steady:
        return "heap steady (glibc trim off, mmap threshold 32 MiB)"
    return "heap as the process started (glibc defaults)"


def faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
