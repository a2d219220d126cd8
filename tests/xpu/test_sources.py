"""The kernel sources themselves: each opens with its CUDA-to-SYCL note, kernels are plain
free functions, and every source parses as host C++ with g++ against the runtime wheel's
headers — the host half of the icpx ahead-of-time build (scripts/build_sycl_aot.sh), whose
device half cannot be checked without oneAPI here."""

import re
import shutil
import subprocess

import pytest

from xvendor.xpu import environment, runtime

pytestmark = pytest.mark.l1
SOURCES = sorted(p.name for p in runtime.kernels_dir().glob("*.cpp"))


@pytest.mark.parametrize("name", SOURCES)
def test_opens_with_the_cuda_mapping_note(name):
    head = (runtime.kernels_dir() / name).read_text().split("#include", 1)[0]
    assert "CUDA -> SYCL" in head
    assert "blockIdx" in head and "threadIdx" in head  # the index mapping, at least
    assert head.count("->") >= 4


@pytest.mark.parametrize("name", SOURCES)
def test_kernels_are_free_functions_with_nd_range_property(name):
    text = (runtime.kernels_dir() / name).read_text()
    assert re.search(r"XV_KERNEL\([123]\) \w+", text)
    assert "nd_range_kernel<N>" in (runtime.kernels_dir() / "xv_kernel_common.h").read_text()


@pytest.mark.parametrize("name", SOURCES)
def test_parses_as_host_cpp_for_the_aot_build(name):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.fail("no C++ compiler: the sycl backend needs one to build its shim")
    prefix = environment.runtime_prefix()
    proc = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
                           f"-I{prefix}/include", f"-I{runtime.kernels_dir()}",
                           str(runtime.kernels_dir() / name)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
