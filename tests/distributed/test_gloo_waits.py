"""Every collective xvendor launches on gloo must honour ``work.wait(timeout)``: the sliced
waits (and with them the call bound) rest on it. Real processes: rank 0 launches, rank 1 is
alive but never calls, so only the timeout can end rank 0's wait."""

import datetime
import multiprocessing as mp
import time

import pytest
import torch
import torch.distributed as dist

from xvendor.distributed import dataplane

pytestmark = [pytest.mark.l1, pytest.mark.timeout(120)]

SLICE_S, PEER_ALIVE_S = 0.2, 6.0


def _group(port: int, rank: int) -> dist.ProcessGroupGloo:
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=30))
    return dataplane.gloo_group(store, 0, rank, 2, timeout_s=20)


def _silent_peer(port: int) -> None:
    pg = _group(port, 1)  # held: dropping it would close the connections at once
    time.sleep(PEER_ALIVE_S)
    del pg


def _both(port: int, rank: int, q) -> None:
    pg = _group(port, rank)
    ins = [torch.full((3,), float(rank + 1) * (j + 1)) for j in range(2)]
    work, result = dataplane.reduce_scatter(pg, "gloo", rank, ins, dist.ReduceOp.SUM)
    work.wait()
    q.put((rank, result().tolist()))


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reduce_scatter_wait_honours_its_timeout_on_gloo():
    port = _free_port()
    peer = mp.get_context("spawn").Process(target=_silent_peer, args=(port,), daemon=True)
    peer.start()
    try:
        pg = _group(port, 0)
        ins = [torch.randn(5) for _ in range(2)]
        work, _ = dataplane.reduce_scatter(pg, "gloo", 0, ins, dist.ReduceOp.SUM)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="(?i)timed out"):
            work.wait(datetime.timedelta(seconds=SLICE_S))
        took = time.monotonic() - t0
        # gloo's own reduce_scatter waited until the peer exited (PEER_ALIVE_S) instead
        assert took < SLICE_S + 1.5, took
    finally:
        peer.kill()
        peer.join()


def test_reduce_scatter_result_on_gloo():
    port, ctx = _free_port(), mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_both, args=(port, r, q), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(10)
    # rank r contributes (r + 1) * (j + 1) to slot j; slot j sums to 3 * (j + 1)
    assert got == {0: [3.0] * 3, 1: [6.0] * 3}


def test_reduce_scatter_refuses_unequal_shapes():
    with pytest.raises(RuntimeError):
        dataplane.reduce_scatter(None, "gloo", 0, [torch.ones(2), torch.ones(3)],
                                 dist.ReduceOp.SUM)
