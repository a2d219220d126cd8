"""Data-plane selection (l0): which mechanism each detected feature set gets, and RCCL
version arithmetic. The NCCL/RCCL paths themselves need GPUs: see test_nccl_l2.py."""

import dataclasses

import pytest

from xvendor.distributed import dataplane
from xvendor.rocm import rccl

pytestmark = pytest.mark.l0


def _nccl(version, *, rccl_=False, nccl2=True, shrink_api=True, reconf=True):
    v = tuple(version)
    grow = rccl.supports_comm_grow(v) if rccl_ else v >= (2, 29)
    return dataplane.Features("nccl", "2.15.0", reconf, shrink_api, v, rccl_, nccl2,
                              v >= (2, 27), grow, False)


def test_gloo_here_takes_a_fresh_group_unless_reconfigure_is_requested():
    f = dataplane.detect("gloo")
    assert f.backend == "gloo" and f.nccl_version is None
    assert f.reconfigure_api and f.shrink_group_api  # torch 2.15 has both APIs
    assert dataplane.choose(f)[0] == "fresh_group"  # NOTE [gloo: fresh groups]


@pytest.mark.parametrize("version, rccl_, want", [
    ((2, 29, 2), False, "reconfigure"),    # NCCL with CommShrink + CommGrow
    ((2, 28, 3), False, "shrink_group"),   # shrink only
    ((2, 27, 0), False, "shrink_group"),
    ((2, 26, 5), False, "fresh_group"),    # neither
    ((2, 30, 7), True, "reconfigure"),     # RCCL 2.30.7: first with CommGrow
    ((2, 30, 6), True, "shrink_group"),
])
def test_nccl_and_rccl_choice_by_version(version, rccl_, want):
    assert dataplane.choose(_nccl(version, rccl_=rccl_))[0] == want


def test_legacy_nccl_backend_does_not_reconfigure():
    f = _nccl((2, 29, 2), nccl2=False)
    assert dataplane.choose(f)[0] == "shrink_group"
    assert dataplane.choose(dataclasses.replace(f, shrink_group_api=False))[0] == "fresh_group"


def test_rccl_version_parsing(monkeypatch):
    assert rccl.parse("2.30.7") == (2, 30, 7) and rccl.parse("2.27") == (2, 27, 0)
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        rccl.parse("2")
    monkeypatch.setenv("XV_RCCL_VERSION", "2.30.7")
    assert rccl.version() == (2, 30, 7) and rccl.supports_comm_grow(rccl.version())
    assert not rccl.supports_comm_grow((2, 30, 6)) and not rccl.supports_comm_shrink(None)
