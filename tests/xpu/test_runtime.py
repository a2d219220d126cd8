"""The SYCL runtime: compiler logs in errors, the persistent kernel cache, launch checks,
the environment the package sets up, and the shim's cache key."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from xvendor.xpu import environment, runtime, shim

pytestmark = pytest.mark.l1

# A small free-function kernel: fast to compile, so cache tests can afford cold builds.
SCALE = textwrap.dedent("""
    #include <sycl/ext/oneapi/free_function_queries.hpp>
    #include <sycl/ext/oneapi/kernel_properties/properties.hpp>
    namespace syclex = sycl::ext::oneapi::experimental;
    extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<1>))
    void scale(float *x, float s, int64_t n) {  // TAG
      const int64_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
      if (i < n) x[i] *= s;
    }
""")


def _unique(tag: str) -> str:
    return SCALE.replace("TAG", f"{tag} {time.time_ns()}")  # a source no cache has seen


def test_syntax_error_raises_with_the_compiler_log(sycl_device):
    bad = SCALE.replace("x[i] *= s;", "x[i] *= s  // missing semicolon\n")
    with pytest.raises(runtime.CompileError) as err:
        runtime.build(bad, label="bad.cpp", queue=sycl_device)
    assert "error" in err.value.log and "expected ';'" in err.value.log
    assert "compiler log" in str(err.value) and err.value.log.strip() in str(err.value)


def test_kernels_run_and_in_process_repeat_is_a_memory_hit(sycl_device):
    src = _unique("memory-hit")
    prog = runtime.build(src, label="scale.cpp", queue=sycl_device)
    before = runtime.stats()
    assert runtime.build(src, label="scale.cpp", queue=sycl_device) is prog
    after = runtime.stats()
    assert after["memory_hits"] == before["memory_hits"] + 1 and after["builds"] == before["builds"]
    x = torch.arange(100, dtype=torch.float32)
    buf = runtime.DeviceBuffer(sycl_device, x.nbytes)
    buf.write(x.data_ptr(), x.nbytes)
    runtime.launch(sycl_device, prog.kernel("scale"), (128,), (32,),
                   [(runtime.PTR, buf.ptr), (runtime.F32, 2.5), (runtime.I64, 100)])
    y = torch.empty_like(x)
    buf.read(y.data_ptr(), y.nbytes)
    assert torch.equal(y, x * 2.5)


_CHILD = """
import json, sys, time
from xvendor.xpu import runtime
q = runtime.cpu_queue()
t = time.perf_counter()
runtime.build(sys.stdin.read(), label="scale.cpp", queue=q)
print(json.dumps(dict(runtime.stats(), seconds=time.perf_counter() - t)))
"""


def test_second_process_hits_the_persistent_cache(sycl_device, tmp_path):
    """Two fresh processes build one new source into an empty kernel cache: the first
    compiles (and primes), the second writes nothing new — it was served from disk."""
    env = dict(os.environ, SYCL_CACHE_DIR=str(tmp_path / "kernels"))
    src = _unique("persistent-hit")
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], input=src, env=env,
                                      capture_output=True, text=True, check=True,
                                      timeout=300).stdout.splitlines()[-1]) for _ in range(2)]
    cold, warm = runs
    assert cold["persistent_hits"] == 0 and cold["primes"] == 1
    assert warm["persistent_hits"] == 1 and warm["primes"] == 0
    assert warm["seconds"] < cold["seconds"]


def test_program_reads_and_hashes_its_files_once(sycl_device, monkeypatch):
    """A launch asks program() for its source: after the first call that is a stat per file,
    no read of the source or the headers and no content hash (NOTE [source snapshots])."""
    first = runtime.program("topk", sycl_device)
    calls = {"read": 0, "key": 0}
    read, key = runtime.Path.read_text, runtime.cache_key

    def counted_read(self, *a, **kw):
        calls["read"] += 1
        return read(self, *a, **kw)

    def counted_key(*a, **kw):
        calls["key"] += 1
        return key(*a, **kw)
    monkeypatch.setattr(runtime.Path, "read_text", counted_read)
    monkeypatch.setattr(runtime, "cache_key", counted_key)
    hits = runtime.stats()["memory_hits"]
    assert all(runtime.program("topk", sycl_device) is first for _ in range(5))
    assert calls == {"read": 0, "key": 0}
    assert runtime.stats()["memory_hits"] == hits + 5


_FACTOR_SRC = ('#include "factor.h"\n' + SCALE).replace("x[i] *= s;", "x[i] *= s * FACTOR;")


def _kernel_folder(path, factor: float, tag: str):
    """A kernels folder (``gemm.cpp`` marks one) whose scale.cpp includes factor.h."""
    path.mkdir(exist_ok=True)
    (path / "gemm.cpp").write_text("// marks the folder for kernels_dir()\n")
    (path / "scale.cpp").write_text(_FACTOR_SRC.replace("TAG", tag))
    _set_factor(path, factor)


def _set_factor(path, factor: float):
    header = path / "factor.h"
    old = header.stat().st_mtime_ns if header.exists() else 0
    header.write_text(f"#pragma once\nconstexpr float FACTOR = {factor}f;\n")
    st = header.stat()
    os.utime(header, ns=(st.st_atime_ns, max(st.st_mtime_ns, old + 1_000_000)))  # coarse clocks


def _scaled(queue, prog) -> list:
    x = torch.ones(4)
    buf = runtime.DeviceBuffer(queue, x.nbytes)
    buf.write(x.data_ptr(), x.nbytes)
    runtime.launch(queue, prog.kernel("scale"), (4,), (4,),
                   [(runtime.PTR, buf.ptr), (runtime.F32, 1.0), (runtime.I64, 4)])
    buf.read(x.data_ptr(), x.nbytes)
    return x.tolist()


def test_a_changed_header_rebuilds_in_the_same_process(sycl_device, tmp_path, monkeypatch):
    folder = tmp_path / "kernels"
    _kernel_folder(folder, 2.0, f"in-process {time.time_ns()}")
    monkeypatch.setenv("XVENDOR_SYCL_KERNELS_DIR", str(folder))
    first = runtime.program("scale", sycl_device)
    assert _scaled(sycl_device, first) == [2.0] * 4
    assert runtime.program("scale", sycl_device) is first
    _set_factor(folder, 3.0)
    second = runtime.program("scale", sycl_device)
    assert second is not first and _scaled(sycl_device, second) == [3.0] * 4


_CHILD_FACTOR = """
import json
from xvendor.xpu import runtime
import torch
q = runtime.cpu_queue()
prog = runtime.program("scale", q)
x = torch.ones(4)
buf = runtime.DeviceBuffer(q, x.nbytes)
buf.write(x.data_ptr(), x.nbytes)
runtime.launch(q, prog.kernel("scale"), (4,), (4,),
               [(runtime.PTR, buf.ptr), (runtime.F32, 1.0), (runtime.I64, 4)])
buf.read(x.data_ptr(), x.nbytes)
print(json.dumps(dict(runtime.stats(), out=x.tolist())))
"""


def test_a_changed_header_rebuilds_in_a_new_process(sycl_device, tmp_path):
    """The persistent SYCL cache must not serve a program built with the old header: only
    the header changes between the two processes, the source stays the same."""
    folder = tmp_path / "kernels"
    _kernel_folder(folder, 4.0, f"new-process {time.time_ns()}")
    env = dict(os.environ, SYCL_CACHE_DIR=str(tmp_path / "cache"),
               XVENDOR_SYCL_KERNELS_DIR=str(folder))

    def child():
        proc = subprocess.run([sys.executable, "-c", _CHILD_FACTOR], env=env, capture_output=True,
                              text=True, check=True, timeout=300)
        return json.loads(proc.stdout.splitlines()[-1])
    assert child()["out"] == [4.0] * 4
    _set_factor(folder, 5.0)
    second = child()
    assert second["out"] == [5.0] * 4 and second["persistent_hits"] == 0


def test_launch_geometry_is_checked_before_launch(sycl_device):
    k = runtime.build(_unique("geometry"), label="scale.cpp", queue=sycl_device).kernel("scale")
    args = [(runtime.PTR, 0), (runtime.F32, 1.0), (runtime.I64, 0)]
    with pytest.raises(runtime.LaunchError, match="positive multiple of the local size"):
        runtime.launch(sycl_device, k, (100,), (32,), args)
    with pytest.raises(runtime.LaunchError, match="exceeds the kernel's limit"):
        runtime.launch(sycl_device, k, (1 << 20,), (k.max_work_group * 2,), args)
    with pytest.raises(runtime.LaunchError, match="1-3 dimensions"):
        runtime.launch(sycl_device, k, (1, 1, 1, 1), (1, 1, 1, 1), args)


def test_argument_extent_is_checked_before_launch(sycl_device):
    from xvendor.xpu.tensors import Launch
    run = Launch(torch.device("cpu"))
    t = torch.empty(8, 4)  # 128 bytes
    with pytest.raises(ValueError, match="reaches 128 bytes, but only 64"):
        run._check("out", t, 64)
    run._check("out", t, 64 + 64)


def test_the_package_sets_up_the_opencl_cpu_device(sycl_device):
    lib = str(environment.runtime_prefix() / "lib" / "libintelocl.so")
    assert lib in os.environ["OCL_ICD_FILENAMES"].split(":")
    assert os.environ["SYCL_CACHE_PERSISTENT"] == "1"
    assert "opencl" in sycl_device.device_key and "cpu" in sycl_device.device_key


def test_a_user_icd_setting_is_kept_and_extended():
    code = ("import os; from xvendor.xpu import backend; assert backend.probe() is None; "
            "print(os.environ['OCL_ICD_FILENAMES'])")
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_FILENAMES"}
    env["OCL_ICD_FILENAMES"] = "/nonexistent/libother.so"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout.strip()
    assert out.split(":")[0] == "/nonexistent/libother.so" and out.endswith("libintelocl.so")


def test_shim_is_cached_and_keyed_by_runtime_version(sycl_device, monkeypatch):
    path = shim.library_path()
    assert path.exists() and path.parent == environment.cache_dir() / "shim"
    monkeypatch.setattr(environment, "runtime_versions", lambda: {"intel-sycl-rt": "2026.9.9"})
    assert shim.library_path() != path  # a new runtime builds a new shim


def test_check_section_runs_every_selfcheck_case_on_sycl(sycl_device):
    from xvendor.xpu import check
    rows = check.summary_for_check()
    cases = [r for r in rows if r["op"] != "(compile)"]
    assert {r["op"] for r in cases} == {"gemm", "grouped_mm", "rms_norm", "topk"}
    assert all(r["backend"] == "sycl" for r in cases)
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


def test_runtime_initialised_too_early_is_reported_with_the_fix():
    """If something lists SYCL platforms before xvendor sets OCL_ICD_FILENAMES, the CPU
    device never appears in that process: the probe says so and names the fix."""
    code = ("import dpctl; dpctl.get_devices(); import torch, xvendor; "
            "from xvendor.xpu import backend; print(backend.probe())")
    env = {k: v for k, v in os.environ.items() if k != "OCL_ICD_FILENAMES"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=300).stdout
    assert "OCL_ICD_FILENAMES" in out and "import xvendor.xpu first" in out
    explicit = code.replace("print(backend.probe())",
                            "xvendor.gemm(torch.ones(2, 2), torch.ones(2, 2), backend='sycl')")
    proc = subprocess.run([sys.executable, "-c", explicit], env=env, capture_output=True,
                          text=True, timeout=300)  # an explicit request raises, with the reason
    assert proc.returncode != 0
    assert "BackendUnavailable" in proc.stderr and "OCL_ICD_FILENAMES" in proc.stderr
