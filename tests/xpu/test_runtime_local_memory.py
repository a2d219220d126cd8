"""The runtime's LOCAL argument kind: a ``work_group_memory<char[]>`` kernel parameter whose
byte count is given at launch (what CUDA's dynamic shared memory becomes).

Verified here on the OpenCL CPU device: each work-group gets its own buffer of the given
size (written by some work-items, read back by others), at several sizes and work-group
sizes, 16-byte aligned; a count below 1 is refused before launch; a count over the
device's local memory fails the launch with the runtime's reason. Not verified: a GPU."""

import textwrap

import pytest
import torch

from xvendor.xpu import runtime

pytestmark = pytest.mark.l1

# Each group writes a code into every int of its `bytes`, then every work-item reads the
# slots other work-items wrote (reversed); the last `groups` ints get the base address % 16.
FILL_BACK = textwrap.dedent("""
    #include <sycl/ext/oneapi/experimental/work_group_memory.hpp>
    #include <sycl/ext/oneapi/free_function_queries.hpp>
    #include <sycl/ext/oneapi/kernel_properties/properties.hpp>
    #include <sycl/group_barrier.hpp>
    #include <cstdint>
    namespace syclex = sycl::ext::oneapi::experimental;
    extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<1>))
    void fill_back(int32_t *out, int64_t bytes, syclex::work_group_memory<char[]> mem) {
      auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
      char(&raw)[] = mem;
      int32_t *m = reinterpret_cast<int32_t *>(raw);
      const int64_t n = bytes / 4, g = it.get_group(0), L = it.get_local_range(0);
      for (int64_t i = it.get_local_id(0); i < n; i += L) m[i] = int32_t(g * 1000003 + i);
      sycl::group_barrier(it.get_group());
      for (int64_t i = it.get_local_id(0); i < n; i += L) out[g * n + i] = m[n - 1 - i];
      if (it.get_local_id(0) == 0)
        out[it.get_group_range(0) * n + g] = int32_t(reinterpret_cast<uintptr_t>(raw) % 16);
    }
""")


@pytest.fixture(scope="module")
def fill_back(sycl_device):
    return runtime.build(FILL_BACK, label="fill_back.cpp", queue=sycl_device).kernel("fill_back")


def _run(queue, kernel, nbytes, local, groups, local_bytes=None):
    n = nbytes // 4
    out = torch.full((groups * n + groups + 3,), -1, dtype=torch.int32)  # 3 slots past the end
    buf = runtime.DeviceBuffer(queue, out.nbytes)
    buf.write(out.data_ptr(), out.nbytes)
    runtime.launch(queue, kernel, (groups * local,), (local,),
                   [(runtime.PTR, buf.ptr), (runtime.I64, nbytes),
                    (runtime.LOCAL, nbytes if local_bytes is None else local_bytes)])
    buf.read(out.data_ptr(), out.nbytes)
    return out, n


@pytest.mark.parametrize("nbytes, local, groups", [
    (4, 8, 3),            # one int
    (4004, 64, 5),        # not a multiple of the work-group
    (65536 + 12, 96, 2),  # past 64 KiB, a work-group that is not a power of 2
    (200_000, 256, 2),
])
def test_each_work_group_gets_the_bytes_it_was_given(sycl_device, fill_back, nbytes, local, groups):
    out, n = _run(sycl_device, fill_back, nbytes, local, groups)
    i = torch.arange(n, dtype=torch.int64)
    want = torch.cat([(g * 1000003 + n - 1 - i).int() for g in range(groups)])
    assert torch.equal(out[:groups * n], want)
    assert torch.equal(out[groups * n:groups * n + groups], torch.zeros(groups, dtype=torch.int32))
    assert torch.equal(out[groups * n + groups:], torch.full((3,), -1, dtype=torch.int32))


@pytest.mark.parametrize("bad", [0, -4, 2.5])
def test_a_count_below_one_byte_is_refused_before_launch(sycl_device, fill_back, bad):
    before = runtime.stats()["launches"].get("fill_back", 0)
    with pytest.raises(runtime.LaunchError, match=r"argument 2 \(work-group memory\) must be a "
                                                 r"positive byte count"):
        _run(sycl_device, fill_back, 4, 8, 1, local_bytes=bad)
    assert runtime.stats()["launches"].get("fill_back", 0) == before


def test_more_than_the_device_has_fails_with_the_reason(sycl_device, fill_back):
    too_many = int(sycl_device.owner.sycl_device.local_mem_size) + 4
    with pytest.raises(runtime.LaunchError, match="OUT_OF_RESOURCES"):
        _run(sycl_device, fill_back, 4, 8, 1, local_bytes=too_many)
