"""What the translator refuses, and the scalar types a kernel may take: data, not code.

Each entry of ``UNSUPPORTED`` is (regex over a device function's text, reason). A kernel
that uses one (itself or through a device function it calls) gets ``unsupported: <reason>``
and is left out of the SYCL source, never half-translated.
"""

from __future__ import annotations

import re

UNSUPPORTED = [
    (r"\b(tex[123]D\w*|tex1Dfetch|texture\s*<|surf[123]D\w*|cudaTextureObject_t|cudaSurfaceObject_t)\b",
     "texture/surface access (no SYCL equivalent through a plain pointer; use a buffer or image by hand)"),
    # NOTE [WMMA refused]: SYCL's joint_matrix could express nvcuda::wmma, but on the OpenCL
    # CPU device (intel-sycl-rt 2026.2) a kernel that uses joint_matrix builds with RTC and is
    # then absent from the bundle ("no kernel named ..."), so a translation could be neither
    # run nor checked here; tests/port/test_wmma_refusal.py fails when that changes.
    (r"\b(wmma|nvcuda)::|\b(mma_sync|load_matrix_sync|store_matrix_sync)\b",
     "WMMA / tensor-core intrinsics (SYCL joint_matrix could express them, but the OpenCL "
     "CPU device drops joint_matrix kernels from its builds, so no translation could be "
     "checked: port by hand to joint_matrix for a GPU target)"),
    (r"\b(this_grid|grid_group|cudaLaunchCooperativeKernel|this_multi_grid)\b",
     "grid-wide cooperative groups (needs a cooperative launch)"),
    (r"\b(cublas\w*|cublasLt\w*|cudnn\w*|curand\w*)\b|\b(cub|hipcub|rocprim|cutlass|cute)::|"
     r"\bthrust::(?!(tuple|get|make_tuple|tie|pair|make_pair)\b)",  # thrust's value types are not calls
     "library call (cuBLAS/cuDNN/cuRAND/CUB/thrust/CUTLASS) in device code"),
    (r"(?<![\w.>])(malloc|free|cudaMalloc|cudaFree)\s*\(|\bnew\s+\w|\bdelete\b",
     "device-side malloc/free/new"),
    (r"<<<", "kernel launch from device code (dynamic parallelism)"),
    (r"\b(cudaGraphSetConditional|cudaGraphConditionalHandle|cudaGraphLaunch)\b",
     "CUDA-graph device API (conditional nodes or graph launches driven from device code: "
     "SYCL graphs have no device-side control)"),
    (r"\bglobaltimer\b", "global-timer register (%globaltimer)"),
    (r"\b(__shfl|__shfl_down|__shfl_up|__shfl_xor|__any|__all|__ballot)\s*\(",
     "pre-CUDA-9 warp intrinsics without a mask (use the *_sync forms)"),
    # memcpy_async with a barrier or cg::wait is translated (NOTE [synchronous async copies]
    # in the compat header); pipelines and clusters are not
    (r"\b(__cluster_dims__|cluster_group|this_cluster|__pipeline_\w+|cuda::pipeline|make_pipeline|"
     r"cp\.async|__cp_async\w*)\b",
     "asynchronous-copy pipelines / thread-block clusters (Hopper TMA, cuda::pipeline)"),
]
UNSUPPORTED = [(re.compile(p), r) for p, r in UNSUPPORTED]
LIBRARY, LIBRARY_REASON = next((rx, r) for rx, r in UNSUPPORTED if r.startswith("library call"))
# namespaces whose aliases count as the library (NOTE [library through an alias or a macro])
LIBRARY_NAMESPACE = re.compile(r"(cub|hipcub|rocprim|thrust|cutlass|cute)\s*(::|$)")

# Scalar kernel parameters -> (type of the extern "C" wrapper's parameter, launch kind).
# Narrow integers and 16-bit floats are widened at the wrapper (the launch path passes
# 32/64-bit values only) and converted back to the kernel's own type in the call.
SCALARS = {}
for _t in ("int", "signed", "signed int", "int32_t", "short", "short int", "int16_t", "char",
           "signed char", "int8_t"):
    SCALARS[_t] = ("int32_t", "i32")
for _t in ("unsigned", "unsigned int", "uint32_t", "uint", "unsigned short", "uint16_t",
           "unsigned char", "uint8_t"):
    SCALARS[_t] = ("uint32_t", "u32")
for _t in ("long", "long int", "long long", "long long int", "int64_t", "ptrdiff_t",
           "ssize_t", "intptr_t", "long long signed"):
    SCALARS[_t] = ("int64_t", "i64")
for _t in ("unsigned long", "unsigned long long", "unsigned long int", "unsigned long long int",
           "size_t", "uint64_t", "uintptr_t"):
    SCALARS[_t] = ("uint64_t", "u64")
SCALARS["bool"] = ("int32_t", "bool")
for _t in ("float", "half", "__half", "__nv_bfloat16", "nv_bfloat16", "at::Half", "c10::Half",
           "at::BFloat16", "c10::BFloat16"):
    SCALARS[_t] = ("float", "f32")
SCALARS["double"] = ("double", "f64")

# Element types of pointer parameters -> torch dtypes (names), for argument checks.
POINTEES = {"float": "float32", "double": "float64", "half": "float16", "__half": "float16",
            "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "int": "int32",
            "int32_t": "int32", "unsigned": "int32", "unsigned int": "int32", "uint32_t": "int32",
            "long": "int64", "long long": "int64", "int64_t": "int64", "size_t": "int64",
            "unsigned long long": "int64", "uint64_t": "int64", "char": "int8", "int8_t": "int8",
            "unsigned char": "uint8", "uint8_t": "uint8", "short": "int16", "int16_t": "int16",
            "bool": "bool", "float4": "float32", "float2": "float32", "int4": "int32",
            "int2": "int32", "uint4": "int32", "__half2": "float16", "__nv_bfloat162": "bfloat16",
            # ATen's names (PyTorch extensions)
            "at::Half": "float16", "c10::Half": "float16", "at::BFloat16": "bfloat16",
            "c10::BFloat16": "bfloat16"}

FULL_MASKS = {"0xffffffff", "0xffffffffu", "0xFFFFFFFF", "0xFFFFFFFFu", "0xFFFFFFFFU",
              "0xffffffffU", "~0", "~0u", "~0U", "(~0)", "(~0u)", "-1", "0xffffffffUL",
              "__activemask()", "4294967295u", "4294967295"}

BARRIERS = re.compile(r"\b(__syncthreads|__syncthreads_count|__syncthreads_or|__syncthreads_and)\s*\(|"
                      r"\b\w+\s*\.\s*sync\s*\(\s*\)|\bcg::sync\s*\(|\bgroup_barrier\s*\(")
WARP_SYNC_CALLS = ("__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync",
                   "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp", "__match_any_sync",
                   "__reduce_add_sync")
