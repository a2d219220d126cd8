"""No automatic path waits for the device: every op's decided kernel (torch's op with
xvendor's semantics around it) runs under a dispatch mode that fails on any op that reads
a tensor's values on the host, and the whole public path runs on meta tensors, which have
no values at all (a `.item()`, `.tolist()` or `nonzero` there raises).

The CPU's own argument checks read ``offs`` on the host (a precise error message costs
nothing there); on an accelerator they are one device-side assert, checked here too."""

import pytest
import torch
from torch.nn.functional import ScalingType
from torch.utils._python_dispatch import TorchDispatchMode

import xvendor
from xvendor import numerics, registry
from xvendor.ops import _common

pytestmark = pytest.mark.l0

aten = torch.ops.aten
# Ops that copy device values to the host or give data-dependent shapes.
SYNCING = {aten._local_scalar_dense.default, aten.nonzero.default, aten.item.default,
           aten.masked_select.default, aten.unique_consecutive.default,
           aten._unique2.default, aten.repeat_interleave.Tensor}


class NoHostSync(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNCING:
            raise AssertionError(f"host synchronization: {func}")
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def _calls(device):
    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, device="cpu").to(dtype).to(device)
    offs = numerics.random_offs([5, 0, 17, 9], "cpu").to(device)
    e4 = torch.float8_e4m3fn
    a8 = torch.randn(16, 64).to(e4).to(device)
    b8 = torch.randn(24, 64).to(e4).to(device).t()
    sa, sb = torch.rand(16, 1, device=device), torch.rand(1, 24, device=device)
    return {
        "gemm +bias, fp32 out": ("gemm", (rand(9, 7, dtype=torch.bfloat16),
                                          rand(7, 5, dtype=torch.bfloat16),
                                          rand(5, dtype=torch.bfloat16), torch.float32)),
        "grouped_mm 2Dx3D, bias, odd N": ("grouped_mm", (rand(33, 40), rand(4, 40, 6), offs,
                                                         rand(4, 6), None)),
        "grouped_mm 3Dx2D": ("grouped_mm", (rand(4, 12, 40), rand(40, 33), offs, None, None)),
        "grouped_mm 2Dx2D bf16, fp32 out": ("grouped_mm", (
            rand(12, 33, dtype=torch.bfloat16), rand(33, 20, dtype=torch.bfloat16), offs,
            None, torch.float32)),
        "grouped_mm 3Dx3D": ("grouped_mm", (rand(3, 9, 20), rand(3, 20, 11), None, None, None)),
        "rms_norm": ("rms_norm", (rand(6, 64), rand(64), 1e-6)),
        "topk": ("topk", (rand(6, 64), 4, -1, True, True)),
        "scaled_mm RowWise": ("scaled_mm", (a8, b8, sa, ScalingType.RowWise.value, sb,
                                            ScalingType.RowWise.value, 0, 0, None,
                                            torch.bfloat16)),
    }


@pytest.mark.parametrize("case", sorted(_calls("cpu")))
def test_decided_kernel_never_reads_values_on_the_host(case, monkeypatch):
    """The accelerator code path, run on CPU tensors: the CPU's own shortcut (reading
    ``offs[-1]``, free there) is switched off so that the path a GPU takes is the one run."""
    from xvendor.torch_backend import kernels
    monkeypatch.setattr(kernels, "HOST_READS_FREE", set())
    op, args = _calls("cpu")[case]
    dtype = args[0].dtype if op != "scaled_mm" else torch.bfloat16
    dec = registry.decide(op, torch.device("cpu"), dtype)
    assert dec.backend == "torch", str(dec)
    assert dec.accepts is None or dec.accepts(*args) is None
    with NoHostSync() as mode:
        out = dec.kernel(*args)
    assert mode.seen and isinstance(out, (torch.Tensor, tuple))


@pytest.mark.parametrize("case", sorted(_calls("cpu")))
def test_public_path_runs_on_meta_tensors(case):
    """The whole automatic path (checks, decision, kernel) on tensors without values."""
    op, args = _calls("meta")[case]
    fn = getattr(xvendor, op)
    if op == "scaled_mm":
        a, b, sa, ra, sb, rb, *_ = args
        out = fn(a, b, sa, ScalingType(ra), sb, ScalingType(rb))
    else:
        out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(t.is_meta for t in outs)
    dtype = args[0].dtype if op != "scaled_mm" else torch.bfloat16
    assert registry.decide(op, torch.device("meta"), dtype).backend == "torch"


def test_the_cpu_shortcut_and_the_device_mask_agree():
    from xvendor.torch_backend import kernels
    op, args = _calls("cpu")["grouped_mm 2Dx3D, bias, odd N"]
    fast = kernels.grouped_mm(*args)
    saved = kernels.HOST_READS_FREE
    try:
        kernels.HOST_READS_FREE = set()
        masked = kernels.grouped_mm(*args)
    finally:
        kernels.HOST_READS_FREE = saved
    assert torch.equal(fast, masked) and torch.equal(fast[31:], torch.zeros(2, 6))


def test_accelerator_offs_check_is_a_device_assert():
    offs = torch.tensor([3, 3, 9], dtype=torch.int32)
    with NoHostSync() as mode:
        _common.check_group_ends_on_device("grouped_mm", offs, 9, "rows of a")
    assert aten._assert_async.msg in mode.seen
    with pytest.raises(RuntimeError, match="offs must be non-negative, non-decreasing"):
        _common.check_group_ends_on_device("grouped_mm", offs.flip(0), 9, "rows of a")


# Ops that are views (no kernel launch on a device).
VIEWS = {aten.slice.Tensor, aten.select.int, aten.unsqueeze.default, aten.view.default}


@pytest.mark.parametrize("offs, ok", [
    ([3, 3, 9], True), ([0, 0, 0], True), ([9], True), ([3, 3, 8], True),
    ([-1, 3, 9], False),  # negative
    ([3, 2, 9], False),  # decreasing
    ([3, 3, 10], False),  # past the extent
    ([4, 3, 2], False), ([10], False), ([-2], False),
])
def test_accelerator_offs_check_is_four_launches_and_every_rule(offs, ok):
    offs = torch.tensor(offs, dtype=torch.int32)
    check = lambda: _common.check_group_ends_on_device("grouped_mm", offs, 9, "rows of a")
    if not ok:
        with pytest.raises(RuntimeError, match="offs must be non-negative, non-decreasing"):
            check()
        return
    check()  # the constant [0, extent] is made on the first call of a size
    with NoHostSync() as mode:
        check()
    launches = [f for f in mode.seen if f not in VIEWS]
    assert launches == [aten.cat.default, aten.ge.Tensor, aten.all.default,
                        aten._assert_async.msg], launches


def test_accelerator_offs_of_an_moe_layer_are_asserted_once():
    # NOTE [offs checked once]: meta tensors take the accelerator's branch (not is_cpu)
    offs = torch.tensor([3, 3, 9], dtype=torch.int32, device="meta")

    def launches(extent=9, start_multiple=0):
        with NoHostSync() as mode:
            _common.check_group_ends("grouped_mm", offs, extent, "rows of a", start_multiple)
        return [f for f in mode.seen if f not in VIEWS and f is not aten.new_full.default
                and f is not aten.zero_.default]

    assert aten._assert_async.msg in launches()
    assert launches() == []  # the same offs, unchanged, the same rules: gate, up, down
    assert aten._assert_async.msg in launches(extent=12)  # other rules
    assert aten._assert_async.msg in launches(extent=12, start_multiple=16)
    offs.add_(0)  # written in place: its version moves
    assert aten._assert_async.msg in launches(extent=12, start_multiple=16)
    offs = offs.clone()  # another tensor with the same values
    assert aten._assert_async.msg in launches(extent=12, start_multiple=16)
    assert launches(extent=12, start_multiple=16) == []
