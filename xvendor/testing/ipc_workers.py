"""Worker processes for the Event and WeightChannel tests (spawned: they must be importable)."""

from __future__ import annotations

import os
import time


def consume_and_verify(channel, slot: int, progress, stop, results, name: str,
                       die_after: int = 0, ready=None):
    """Read new versions until the producer's ``stop`` version; check every element.

    The producer fills every tensor of version v with the value v, so a torn read (parts of
    two versions) shows as a mix of values. ``progress[slot]`` counts reads (so the test's
    producer can run until every consumer has read enough; the protocol itself never waits
    for consumers). Reports (name, reads, versions seen, torn, retries, error) on
    ``results``. With ``die_after``, exits abruptly after that many reads, like a crash.
    """
    if ready is not None:
        ready.put(name)
    reads = torn = 0
    seen = set()
    error = ""
    try:
        version, out = 0, None
        while not (int(stop[0]) and version >= int(stop[0])):
            try:
                version, out = channel.read(out, min_version=version + 1, timeout=0.5)
            except TimeoutError:
                continue
            reads += 1
            progress[slot] = reads
            seen.add(version)
            for t in out.values():
                if not bool((t == float(version)).all()):
                    torn += 1
                    break
            if die_after and reads >= die_after:
                os._exit(17)
    except Exception as e:  # reported to the test, which fails on it
        error = f"{type(e).__name__}: {e}"
    results.put((name, reads, len(seen), torn, channel.retries, error))
    time.sleep(0.1)  # let the queue's feeder thread flush before exiting


def consume_on_device(channel, expect_version: int, results):
    """l2: wait for ``expect_version`` on the GPU channel and report the values read."""
    version, out = channel.read(min_version=expect_version, timeout=60)
    results.put((version, {k: float(v.float().mean()) for k, v in out.items()}))


def wait_then_sum(event, buf, results):
    """l2: wait on a shared event, then report the sum of a shared GPU buffer."""
    event.wait()
    results.put(float(buf.sum()))
