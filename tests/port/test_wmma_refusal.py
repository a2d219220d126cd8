"""tests/port/cuda/wmma.cu: ``nvcuda::wmma`` stays refused, and the reason says why
(NOTE [WMMA refused] in xvendor/port/constructs.py): SYCL's joint_matrix could express it,
but the OpenCL CPU device drops joint_matrix kernels from its builds, so no translation
could be checked here. The second test is that fact measured: it fails the day a
joint_matrix kernel is kept, which is the day the refusal should become a translation."""

import pytest

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_wmma_refused_with_the_reason():
    t = build.translate_file(CUDA / "wmma.cu")
    r = t.report("tile_mma")
    assert r.status == "unsupported", r.reason
    assert "WMMA" in r.reason and "joint_matrix" in r.reason and "CPU device" in r.reason
    assert t.report("scale").status == "ok", t.report("scale").reason


_JOINT_MATRIX = r'''
#include <sycl/sycl.hpp>
#include <sycl/ext/oneapi/matrix/matrix.hpp>
namespace syclex = sycl::ext::oneapi::experimental;
using namespace sycl::ext::oneapi::experimental::matrix;
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<3>))
[[sycl::reqd_sub_group_size(16)]]
void xv_jm_probe(sycl::half *a, sycl::half *b, float *c) {
  auto sg = sycl::ext::oneapi::this_work_item::get_nd_item<3>().get_sub_group();
  auto g = [](auto *p) {
    return sycl::address_space_cast<sycl::access::address_space::global_space,
                                    sycl::access::decorated::no>(p);
  };
  joint_matrix<sycl::sub_group, sycl::half, use::a, 8, 16, layout::row_major> ma;
  joint_matrix<sycl::sub_group, sycl::half, use::b, 16, 16, layout::row_major> mb;
  joint_matrix<sycl::sub_group, float, use::accumulator, 8, 16> mc;
  joint_matrix_fill(sg, mc, 0.0f);
  joint_matrix_load(sg, ma, g(a), 16);
  joint_matrix_load(sg, mb, g(b), 16);
  joint_matrix_mad(sg, mc, ma, mb, mc);
  joint_matrix_store(sg, mc, g(c), 16, layout::row_major);
}
'''


@pytest.mark.l1
def test_cpu_device_drops_joint_matrix_kernels(sycl_device):
    from xvendor.xpu import runtime
    prog = runtime.build(_JOINT_MATRIX, label="joint_matrix probe", queue=sycl_device)
    with pytest.raises(runtime.LaunchError, match="no kernel named 'xv_jm_probe'"):
        prog.kernel("xv_jm_probe")
