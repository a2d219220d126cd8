#!/usr/bin/env bash
# Ahead-of-time build of xvendor's free-function SYCL kernels (sycl_kernels/*.cpp) with icpx.
#
# UNTESTED HERE: no machine this project runs on has oneAPI's icpx (it is not pip-installable;
# CI compiles the same sources at run time with SYCL RTC instead, see docs/porting-cuda-to-sycl.md).
# The script is written against the documented oneAPI 2026 compiler interface; run it where
# `icpx` is on PATH (source /opt/intel/oneapi/setvars.sh first) and report what breaks.
#
# What it builds: build/sycl_aot/libxvendor_sycl_kernels.so holding every kernel of every
# source, compiled for the requested targets, plus one C entry point
#     void *xv_aot_kernel(void *queue /* sycl::queue* */, const char *name);
# returning a heap-allocated sycl::kernel* (the same object xvendor/xpu/shim.cpp's xv_launch
# takes), or NULL when the library has no kernel of that name. Kernel names are the plain
# extern "C" names (gemm_f32_bf16, gmm_rows_f16_f16, rms_norm_bf16, topk_f32, ...).
#
# Usage:
#   scripts/build_sycl_aot.sh                       # JIT SPIR-V only (any SYCL device)
#   SYCL_TARGETS=spir64_gen DEVICE=pvc scripts/build_sycl_aot.sh        # Intel Data Center GPU Max
#   SYCL_TARGETS=spir64_gen DEVICE=bmg scripts/build_sycl_aot.sh        # Arc B-series
#   SYCL_TARGETS=spir64_x86_64 scripts/build_sycl_aot.sh                # the OpenCL CPU device
# Environment: CXX (default icpx), OUT (default build/sycl_aot), SYCL_TARGETS (default spir64),
# DEVICE (for spir64_gen: an ocloc device name), EXTRA_FLAGS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CXX="${CXX:-icpx}"
OUT="${OUT:-$ROOT/build/sycl_aot}"
TARGETS="${SYCL_TARGETS:-spir64}"
DEVICE="${DEVICE:-}"

command -v "$CXX" >/dev/null || { echo "error: $CXX not found (source oneAPI's setvars.sh)" >&2; exit 2; }
mkdir -p "$OUT"

backend_flags=()
if [[ "$TARGETS" == *spir64_gen* ]]; then
  [[ -n "$DEVICE" ]] || { echo "error: spir64_gen needs DEVICE=<ocloc device, e.g. pvc>" >&2; exit 2; }
  backend_flags=(-Xsycl-target-backend=spir64_gen "-device $DEVICE")
fi

# The lookup entry point: free-function kernels have kernel ids like any other kernel;
# find the one whose name ends in the requested extern "C" name.
cat > "$OUT/aot_lookup.cpp" <<'EOF'
#include <sycl/sycl.hpp>
#include <cstring>
#include <string>

extern "C" void *xv_aot_kernel(void *queue_ref, const char *name) {
  try {
    auto &q = *static_cast<sycl::queue *>(queue_ref);
    const std::string want(name);
    for (const sycl::kernel_id &id : sycl::get_kernel_ids()) {
      const std::string have(id.get_name());
      if (have.size() >= want.size() &&
          have.compare(have.size() - want.size(), want.size(), want) == 0) {
        auto kb = sycl::get_kernel_bundle<sycl::bundle_state::executable>(q.get_context(), {id});
        return new sycl::kernel(kb.get_kernel(id));
      }
    }
  } catch (const std::exception &) {
  }
  return nullptr;
}
EOF

objs=()
for src in "$ROOT"/sycl_kernels/*.cpp "$OUT/aot_lookup.cpp"; do
  obj="$OUT/$(basename "${src%.cpp}").o"
  echo "+ $CXX -fsycl -fsycl-targets=$TARGETS -c $(basename "$src")"
  "$CXX" -fsycl -fsycl-targets="$TARGETS" "${backend_flags[@]}" -O3 -fPIC -std=c++17 \
    -I"$ROOT/sycl_kernels" ${EXTRA_FLAGS:-} -c "$src" -o "$obj"
  objs+=("$obj")
done
"$CXX" -fsycl -fsycl-targets="$TARGETS" "${backend_flags[@]}" -shared "${objs[@]}" \
  -o "$OUT/libxvendor_sycl_kernels.so"
echo "built $OUT/libxvendor_sycl_kernels.so"
echo "kernels: $(nm -D --defined-only "$OUT/libxvendor_sycl_kernels.so" | grep -c ' T ' || true) exported symbols"
