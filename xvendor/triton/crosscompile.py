"""Compile one template x config for a GPU target, without a GPU (``triton.compile``).

NOTE [runtime specialization]: the numbers of a cross-compile are only worth reading if
the kernel is specialized exactly as a real launch would specialize it: on AMD, tensors
under 2 GB get ``tt.pointer_range=32`` (buffer loads; spills changed 6 -> 132 in one
config without it), 16-divisible ints and pointers get ``tt.divisibility=16``, and ints
equal to 1 become constants. So this module builds the launch with the backend's own
builders (``xvendor.triton.launch``) on ``meta`` tensors (shapes and strides, no data;
their ``data_ptr()`` is 0, i.e. aligned like a real allocation) and feeds those arguments
to the same binder ``JITFunction.run`` uses, with the target's backend.

``PROBLEMS`` are the representative shapes the sweep compiles: a bf16 nn.Linear-style
addmm for ``gemm`` and the MoE forward (2Dx3D) for ``grouped_mm``; the other grouped
layouts are variants (``grouped_mm:3Dx2D`` ...) compiled with the default configs.

Run in a worker process (``xvendor.tuning.workers``): LLVM errors abort the process.
"""

from __future__ import annotations

import hashlib
import time

import torch

from . import configs, launch, scaled_configs, scaled_launch

PROBLEMS = {
    "gemm": "bf16 addmm: a (8192, 4096) @ b (4096, 8192) + bias (8192,), row-major",
    "grouped_mm": "bf16 MoE forward 2Dx3D: a (16384, 4096), b (8, 4096, 2048), offs int32 (8,)",
    # The other layouts, as MoE training produces them: the ragged dimension is the strided
    # one (see NOTE [ragged contiguous dim] in kernels.py).
    "grouped_mm:3Dx2D": "bf16 3Dx2D: a (8, 4096, 2048), b = w.t() with w (16384, 2048), "
                        "bias (16384,)",
    "grouped_mm:2Dx2D": "bf16 2Dx2D weight gradient: a = x.t() with x (16384, 4096), "
                        "b (16384, 2048)",
    "grouped_mm:3Dx3D": "bf16 3Dx3D batched: a (8, 1024, 4096), b (8, 4096, 2048), bias (8, 2048)",
}
SCHEMA = 2  # bump when the specialization or the problems change: invalidates caches


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _grouped_operands(layout: str):
    """(a, b, offs, bias) meta tensors of one grouped_mm problem (see ``PROBLEMS``)."""
    offs = _meta(8, dtype=torch.int32)
    if layout == "2Dx3D":
        return _meta(16384, 4096), _meta(8, 4096, 2048), offs, None
    if layout == "3Dx2D":
        return _meta(8, 4096, 2048), _meta(16384, 2048).t(), offs, _meta(16384)
    if layout == "2Dx2D":
        return _meta(16384, 4096).t(), _meta(16384, 2048), offs, None
    if layout == "3Dx3D":
        return _meta(8, 1024, 4096), _meta(8, 4096, 2048), None, _meta(8, 2048)
    raise KeyError(f"unknown grouped_mm layout {layout!r}; layouts: 2Dx3D, 3Dx2D, 2Dx2D, 3Dx3D")


def launch_for(template: str, cfg: configs.Config, triton_backend: str):
    """(kernel, args, kwargs) of the representative launch of ``template`` (a ``PROBLEMS`` key)."""
    base, _, layout = template.partition(":")
    if base in scaled_configs.TEMPLATES:  # "scaled_mm:mxfp8" ...: scaled_configs.VARIANTS
        return scaled_launch.launch_for(template, cfg, triton_backend)
    if base == "gemm" and not layout:
        a, b, bias, out = _meta(8192, 4096), _meta(4096, 8192), _meta(8192), _meta(8192, 8192)
        kernel, _, args, kwargs = launch.gemm_launch(a, b, bias, out, cfg, triton_backend)
    elif base == "grouped_mm":
        a, b, offs, bias = _grouped_operands(layout or "2Dx3D")
        out = _meta(*launch.grouped_out_shape(a, b, offs))
        kernel, _, args, kwargs = launch.grouped_mm_launch(a, b, offs, bias, out, cfg,
                                                           triton_backend, programs=256)
    else:
        raise KeyError(f"unknown Triton template {template!r}; templates: {sorted(PROBLEMS)}")
    return kernel, args, kwargs


def source_hash(template: str) -> str:
    """Hash of the template's source (its jit dependencies included), this module's and the
    launch builders' (they decide the specialization: NOTE [runtime specialization])."""
    from . import kernels, scaled_kernels
    base = configs.base_template(template)
    fn = {"gemm": kernels.gemm_kernel, "grouped_mm": kernels.grouped_mm_kernel,
          "scaled_mm": scaled_kernels.scaled_mm_kernel,
          "scaled_grouped_mm": scaled_kernels.scaled_grouped_mm_kernel,
          }[base]
    h = hashlib.sha256(fn.cache_key.encode())
    scaled = (scaled_launch.__file__,) if base in scaled_configs.TEMPLATES else ()
    for path in (__file__, launch.__file__) + scaled:
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(str(SCHEMA).encode())
    return h.hexdigest()[:16]


def _ast_source(kernel, target_backend, args, kwargs):
    """Signature, constexprs and attrs exactly as ``JITFunction.run`` derives them."""
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature
    from triton._utils import find_paths_if, get_iterable_path

    binder = create_function_from_signature(kernel.signature, kernel.params, target_backend)
    bound, spec, options = binder(*args, **kwargs)
    names = [p.name for p in kernel.params]
    kinds = [s[0] for s in spec]
    signature = dict(zip(names, kinds))
    values = list(bound.values())
    constexprs = {path: get_iterable_path(values, path)
                  for path in find_paths_if(kinds, lambda _, v: v == "constexpr")}
    attr_descs = ["" if s[0] == "constexpr" else s[1] for s in spec]
    attrs = {path: target_backend.parse_attr(get_iterable_path(attr_descs, path))
             for path in find_paths_if(attr_descs, lambda _, v: isinstance(v, str))}
    return ASTSource(kernel, signature, constexprs, attrs), options


def compile_one(template: str, arch: str, config: dict) -> dict:
    """Compile and return the raw artifacts the inspection reads (no judgement here)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import compile as triton_compile, make_backend

    kind, arch_id, warp = configs.TARGETS.get(arch) or scaled_configs.TARGETS[arch]  # + sm_100
    target = GPUTarget(kind, arch_id, warp)
    target_backend = make_backend(target)
    cfg = configs.Config(**config)  # template may be a variant: "grouped_mm:3Dx2D"
    kernel, args, kwargs = launch_for(template, cfg, kind)
    src, options = _ast_source(kernel, target_backend, args, kwargs)
    t0 = time.perf_counter()
    compiled = triton_compile(src, target=target,
                              options=target_backend.parse_options(options).__dict__)
    compile_s = time.perf_counter() - t0
    asm = compiled.asm
    return {
        "vendor": "amd" if kind == "hip" else "nvidia",
        "num_warps": cfg.num_warps,
        "shared": int(compiled.metadata.shared),
        "asm": asm["amdgcn"] if kind == "hip" else asm["ptx"],
        "cubin": asm.get("cubin"),
        "compile_s": compile_s,
    }
