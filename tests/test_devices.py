import uuid
import warnings

import pytest
import torch

from xvendor import devices

pytestmark = pytest.mark.l0


def test_arch_table_has_the_targets_with_their_limits():
    t = devices.ARCHS
    assert t["gfx950"].lds_bytes == 160 * 1024 and t["gfx950"].wave_size == 64
    assert t["gfx1250"].lds_bytes == 320 * 1024 and t["gfx1250"].wave_size == 32
    assert t["gfx942"].lds_bytes == 64 * 1024 and t["gfx942"].cus == 304
    assert t["sm_90"].lds_bytes == 227 * 1024 and t["sm_90"].mma_instr == "wgmma"
    assert t["gfx950"].peak(torch.bfloat16) == 2500
    assert t["gfx1250"].mma_instr == "v_wmma"  # MFMA does not exist on gfx1250
    assert {"pvc", "bmg", "cpu"} <= set(t)


@pytest.mark.parametrize("raw,arch", [("gfx950:sramecc+:xnack-", "gfx950"), ("gfx1250", "gfx1250"),
                                      ("gfx942:xnack+", "gfx942")])
def test_gcn_arch_feature_suffixes_are_stripped(raw, arch):
    assert devices._strip_gcn_features(raw) == arch


def test_unknown_arch_gets_generic_entry_and_warns_once():
    arch = f"gfx9{uuid.uuid4().hex[:6]}"  # never seen before in this process
    with pytest.warns(UserWarning, match=f"{arch}.*not in the arch table"):
        spec = devices.arch_spec(arch)
    assert not spec.known and spec.lds_bytes == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        devices.arch_spec(arch)  # second time: silent


def test_detect_cpu():
    info = devices.detect("cpu")
    assert (info.vendor, info.arch) == ("cpu", "cpu") and info.cu_count >= 1


def test_arch_override_does_not_relabel_the_cpu(monkeypatch):
    monkeypatch.setenv("XVENDOR_ARCH", "gfx950")
    assert devices.detect("cpu").arch == "cpu"


@pytest.mark.parametrize("arch,kind,vendor", [("gfx950", "cuda", "amd"), ("sm_90", "cuda", "nvidia"),
                                              ("pvc", "xpu", "intel")])
def test_hypothetical_devices_map_vendor_to_torch_device_type(arch, kind, vendor):
    info = devices.hypothetical(arch)
    assert (info.device.type, info.vendor, info.arch) == (kind, vendor, arch)


@pytest.mark.parametrize("name,arch", [("Intel(R) Data Center GPU Max 1550", "pvc"),
                                       ("Intel(R) Arc(TM) B580 Graphics", "bmg")])
def test_intel_product_names_map_to_arch(name, arch):
    assert next(a for rx, a in devices._INTEL_NAME_TO_ARCH if rx.search(name)) == arch
