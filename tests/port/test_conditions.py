"""#if evaluation for typedef resolution (the launch path's dtype checks), and lines of
inlined local headers reported as the user's file and line."""

import pytest

from xvendor.port import build, parse, translate

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("src, want", [
    (b"#if defined(FOO)\ntypedef double real;\n#else\ntypedef float real;\n#endif\n", "float"),
    (b"#define FOO\n#ifdef FOO\ntypedef double real;\n#else\ntypedef float real;\n#endif\n", "double"),
    (b"#ifndef FOO\ntypedef double real;\n#else\ntypedef float real;\n#endif\n", "double"),
    (b"#define V 2\n#if V >= 2 && !defined(BAR)\ntypedef double real;\n#elif V == 1\n"
     b"typedef float real;\n#else\ntypedef int real;\n#endif\n", "double"),
    (b"#define V 1\n#if V >= 2\ntypedef double real;\n#elif V == 1\ntypedef float real;\n"
     b"#else\ntypedef int real;\n#endif\n", "float"),
    (b"#if SOME_MACRO(3)\ntypedef double real;\n#else\ntypedef float real;\n#endif\n", None),  # unknown
])
def test_typedef_follows_the_files_own_defines(src, want):
    assert translate._typedefs(parse.parse_source(src)).get("real") == want


def test_a_kernel_behind_an_undecidable_typedef_accepts_any_dtype_but_a_decided_one_checks():
    src = b"#define USE_BF16\n#ifdef USE_BF16\ntypedef __nv_bfloat16 floatX;\n#else\n" \
          b"typedef float floatX;\n#endif\n__global__ void k(floatX* y) { y[0] = 1.0f; }\n"
    inst = translate.translate(parse.parse_source(src)).report("k").instantiations[0]
    assert inst.params[0][2] == "__nv_bfloat16"  # a float32 tensor would be refused


def test_lines_in_inlined_headers_name_the_header(tmp_path):
    (tmp_path / "helpers.cuh").write_text(
        "__device__ float first(const float* s) { return s[0]; }\n"
        "__device__ void racy(float* out) {\n  __shared__ float s[64];\n"
        "  if (threadIdx.x == 0) s[0] = 1.0f;\n  out[threadIdx.x] = s[0];\n}\n")
    (tmp_path / "k.cu").write_text('#include "helpers.cuh"\n\n__global__ void k(float* out) {\n'
                                   "  racy(out);\n}\n")
    t = build.translate_file(tmp_path / "k.cu")
    rep = t.report("k")
    assert rep.line == 3
    assert any(x.startswith("helpers.cuh:5:") for x in rep.lints), rep.lints
