"""The whole tuning loop for real on the CPU SYCL device: prune, rank, gate, time (SYCL
gemm tiles built with -D options), store, and the dispatch layer serving the winner."""

import pytest
import torch

import xvendor
from xvendor import devices, registry
from xvendor.tuning import serve, tuner
from xvendor.tuning.problem import key_for
from xvendor.tuning.store import TuningStore
from xvendor.xpu import backend, tunable

pytestmark = pytest.mark.l1


def test_tune_store_serve_on_the_cpu_sycl_device(sycl_device, poisoned, tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    info = devices.detect("cpu")
    gen = torch.Generator().manual_seed(7)
    argsets = [(torch.randn(192, 256, generator=gen), torch.randn(256, 160, generator=gen),
                None, None) for _ in range(3)]
    key = key_for("gemm", "*", info.arch, info.cu_count, info.product, argsets[0])
    res = tuner.tune("gemm", "sycl", tunable.TUNABLE, info, key, argsets, serve.store_for(info),
                     top_k=3, default_name=tunable.TUNABLE.default_name)
    timed = [r for r in res.rows if r.status == "timed"]
    assert len(timed) >= 2, [(r.name, r.status) for r in res.rows]  # gated, then timed
    assert res.winner.measured_us == min(r.measured_us for r in timed)
    served = TuningStore(info.arch, info.cu_count).get(
        key.__class__(**{**key.__dict__, "backend": "sycl"}))
    assert served.config_name == res.winner.name and served.measured
    # The dispatch layer serves it: the sycl gemm now launches the winner's tile.
    registry.reset()
    a, b = torch.randn(180, 256), torch.randn(256, 160)  # same shape class (M bucket 256)
    out = xvendor.gemm(a, b, backend="sycl")
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    want = {k: res.winner.config[k] for k in ("WM", "WN", "RM", "RN", "BK")}
    assert backend.last_gemm_tile == want
    print(f"winner {res.winner.name} {res.winner.measured_us:.0f} us, aten {res.aten_us:.0f} us, "
          f"rank corr {res.rank_correlation:.2f}, {res.seconds:.1f} s")


class _TwoTiles:
    """The SYCL tunable restricted to two tiles (each grouped_mm.cpp build costs 20-60 s)."""

    def __init__(self, names):
        self.names = names
        self.default_name = tunable.TUNABLE.default_name

    def candidates(self, op, info, key):
        return [c for c in tunable.TUNABLE.candidates(op, info, key) if c.name in self.names]

    def run(self, op, config, args):
        return tunable.TUNABLE.run(op, config, args)


def test_grouped_mm_tuning_is_served_too(sycl_device, poisoned, tmp_path, monkeypatch):
    monkeypatch.setenv("XVENDOR_TUNING_DIR", str(tmp_path))
    info = devices.detect("cpu")
    gen = torch.Generator().manual_seed(3)
    offs = torch.tensor([60, 60, 150, 200], dtype=torch.int32)  # an empty group
    argsets = [(torch.randn(200, 128, generator=gen), torch.randn(4, 128, 96, generator=gen),
                offs, None, None) for _ in range(2)]
    key = key_for("grouped_mm", "*", info.arch, info.cu_count, info.product, argsets[0])
    tunable = _TwoTiles({"wg16x16_r4x4_k64", "wg8x16_r4x4_k64"})
    res = tuner.tune("grouped_mm", "sycl", tunable, info, key, argsets, serve.store_for(info))
    assert sum(r.status == "timed" for r in res.rows) == 2, [(r.name, r.status) for r in res.rows]
    registry.reset()
    a, w = torch.randn(190, 128), torch.randn(4, 128, 96)
    out = xvendor.grouped_mm(a, w, torch.tensor([50, 50, 140, 190], dtype=torch.int32),
                             backend="sycl")
    assert backend.last_gemm_tile == {k: res.winner.config[k] for k in ("WM", "WN", "RM", "RN", "BK")}
    from xvendor import numerics as oracle
    assert oracle.rel_error(out, oracle.grouped_mm(a, w, torch.tensor([50, 50, 140, 190], dtype=torch.int32))) < 2e-5
