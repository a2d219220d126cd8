"""Translation without compiling: verdicts, lints, instantiations, the rewrites, the JSON
report and the launch geometry. The compiled behaviour is in test_kernels.py."""

import json

import pytest

from xvendor.port import build, launch, parse, translate

from .conftest import CUDA

pytestmark = pytest.mark.l0


def _t(stem, **kw):
    return build.translate_file(CUDA / f"{stem}.cu", **kw)


def test_unsupported_constructs_get_their_verdict_and_are_left_out():
    t = _t("unsupported")
    got = {k.name: (k.status, k.reason) for k in t.kernels}
    assert got["fine"] == ("ok", "")
    assert got["uses_constant"] == ("ok", "")  # a module-owned symbol (test_kernel_language.py)
    expect = {"uses_texture": "texture",
              "uses_ptx": "inline PTX", "uses_malloc": "malloc"}
    for name, words in expect.items():
        status, reason = got[name]
        assert status == "unsupported" and words in reason, (name, reason)
        assert f"kernel {name} not translated" in t.source  # said where it would have been
    assert "asm volatile" not in t.source and "tex1Dfetch" not in t.source


def test_lints_flag_the_latent_races():
    t = _t("racy")
    lints = {k.name: k.lints for k in t.kernels}
    assert any("shared[0]" in x and "no barrier" in x and x.startswith("line 17:")
               for x in lints["normalize_racy"]), lints["normalize_racy"]
    assert any("return before the barrier or warp collective at line 27" in x for x in lints["early_exit"])
    assert any("0x0000ffff" in x and "not provably full" in x for x in lints["half_warp_sum"])
    assert any(x.startswith("line 47:") and "writes __shared__ 's[warp]'" in x and "'s[0]' (line 46)" in x
               for x in lints["reuse_racy"]), lints["reuse_racy"]
    # the clean kernels stay clean: no false alarms on tiled matmul or the reductions
    for stem in ("linalg", "reductions"):
        assert all(not k.lints for k in _t(stem).kernels), stem


def test_function_pointer_call_is_linted():
    src = b"""
    __device__ float twice(float x) { return 2 * x; }
    __global__ void k(float* y) { float (*f)(float) = twice; y[0] = f(1.0f); }
    """
    t = translate.translate(parse.parse_source(src))
    assert any("function pointer 'f'" in x for x in t.report("k").lints)


def test_instantiations_from_launch_sites_deduction_and_requests():
    t = _t("linalg", instantiate=["scale_bias<int, 1>"])
    sb = t.report("scale_bias")
    assert [i.args for i in sb.instantiations] == [["float", "4"], ["double", "2"], ["int", "1"]]
    assert [i.sycl_name for i in sb.instantiations][0] == "scale_bias__float_4"
    assert [i.args for i in t.report("fill_iota").instantiations] == [["float"]]  # deduced
    with pytest.raises(ValueError, match="instantiate"):
        _t("linalg", instantiate=["scale_bias"])


def test_rewrites_keep_comments_and_drop_host_code():
    t = _t("linalg")
    src = t.source
    assert "// +1: no bank conflicts on the transposed read" in src  # comments kept
    assert "static syclex::work_group_static<float[TILE][TILE + 1]> Bs__xv_wgs;" in src
    assert "float (&Bs)[TILE][TILE + 1] = Bs__xv_wgs;" in src
    assert "launch_matmul" not in src and "<<<" not in src and "#include <cuda_runtime.h>" not in src
    assert "[[sycl::reqd_sub_group_size(32)]]" in src
    assert "[[sycl::reqd_sub_group_size" not in _t("linalg", warp="native").source
    # narrow/16-bit scalars are widened at the wrapper; the body keeps the CUDA types
    bf = _t("bf16")
    inst = bf.report("scale_bf16").instantiations[0]
    assert inst.params[2] == ("s", "f32", "__nv_bfloat16", False)
    assert "void scale_bf16(const __nv_bfloat16* x, float* out, float s, int32_t n)" in bf.source


def test_dynamic_shared_memory_becomes_a_work_group_memory_parameter():
    t = _t("reductions")
    assert t.report("softmax_dyn_smem").dynamic_shared
    assert not t.report("row_sum_shfl").dynamic_shared
    assert "float *row = reinterpret_cast<float *>(::xvc::dyn_smem());" in t.source
    assert ("void softmax_dyn_smem(const float* x, float* y, int32_t cols, "
            "syclex::work_group_memory<char[]> __xv_smem)") in t.source
    assert "::xvc::set_dyn_smem(__xv_smem); softmax_dyn_smem__xv_body(" in t.source
    assert "__xv_smem" not in t.source.split("void row_sum_shfl(")[1].split("}")[0]


def test_json_report_shape():
    data = json.loads(json.dumps(_t("unsupported").as_json()))
    assert set(data) >= {"kernels"}
    for k in data["kernels"]:
        assert set(k) >= {"name", "status", "reason", "lints", "instantiations", "sycl_name"}
    assert {k["status"] for k in data["kernels"]} == {"ok", "unsupported"}


def test_compile_errors_are_blamed_on_the_failing_kernel():
    src = b"__global__ void good(float* y) { y[0] = 1; }\n" \
          b"__global__ void bad(float* y) { y[0] = undefined_name; }\n"
    unit = parse.parse_source(src)
    t = translate.translate(unit)
    log = "rtc_0.cpp:%d:5: error: use of undeclared identifier 'undefined_name'" % (
        next(i for i, ln in enumerate(t.source.splitlines(), 1) if "undefined_name" in ln))
    assert set(build._blame(t, log)) == {"bad"}


@pytest.mark.parametrize("grid, block, glob, local", [
    ((4, 1, 1), (256, 1, 1), (1, 1, 1024), (1, 1, 256)),  # 1-D: x is SYCL's last dimension
    ((3, 2, 1), (16, 8, 1), (1, 16, 48), (1, 8, 16)),  # 2-D tiles: y -> dim 1
    ((2, 3, 5), (4, 2, 1), (5, 6, 8), (1, 2, 4)),  # 3-D
])
def test_launch_geometry_reverses_dimensions(grid, block, glob, local):
    assert launch.nd_range(grid, block) == (glob, local)


def test_parse_error_on_garbage():
    with pytest.raises(parse.ParseError):
        parse.parse_file(CUDA / "does_not_exist.cu")


def test_device_function_passed_by_name_becomes_a_lambda():
    t = _t("reductions")
    assert ("cg::reduce(warp, p, [](auto &&...xv_a) { return combine_sum_max(xv_a...); })"
            in t.source)


def test_host_api_types_are_dropped_and_wrappers_follow_every_definition():
    src = b"""
    typedef struct { int rank; ncclComm_t comm; } MultiGpuConfig;
    template <void (*F)(float*)> __global__ void apply(float* y) { F(y); }
    __device__ void twice(float* y) { y[0] *= 2; }
    template <void (*F)(float*)> void launcher(float* y) { apply<F><<<1, 1>>>(y); }
    void host(float* y) { launcher<twice>(y); }
    """
    t = translate.translate(parse.parse_source(src))
    assert "ncclComm_t" not in t.source
    assert [i.args for i in t.report("apply").instantiations] == [["twice"]]  # via launcher<twice>
    assert t.source.index("void twice(") < t.source.index("apply__xv_body<twice>(")


def test_tag_arguments_instantiate_and_are_built_in_the_wrapper():
    src = b"""
    double* scratch;
    template <typename T, bool Atomic>
    __global__ void acc(T* out, const T* x, int n, std::bool_constant<Atomic>) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { if (Atomic) atomicAdd(out, x[i]); else out[i] = x[i]; }
    }
    void run(double* out, const double* x, int n) {
        acc<<<1, 32>>>(out, x, n, std::bool_constant<false>{});
        acc<<<1, 32>>>(scratch, x, n, std::bool_constant<true>{});  // a file-scope pointer
    }
    """
    t = translate.translate(parse.parse_source(src))
    rep = t.report("acc")
    assert [i.args for i in rep.instantiations] == [["double", "false"], ["double", "true"]]
    assert [p[0] for p in rep.instantiations[0].params] == ["out", "x", "n"]  # no tag argument
    assert "acc__xv_body<double, false>(out, x, n, std::bool_constant<false>{});" in t.source
