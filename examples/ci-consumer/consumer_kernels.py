"""The project's Triton kernel for ``scale_add`` and its cross-compile entry point, which
``xvendor ci compile`` calls for the cell's ``cross_compile`` targets (``compile_entry =
"consumer_kernels:compile_for"`` in ci/matrix.toml). No GPU needed: Triton compiles for a
``GPUTarget`` on any machine."""

import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + y, mask=mask)


# target -> (Triton backend, arch, warp size); the loads each target's code must contain.
TARGETS = {"gfx950": ("hip", "gfx950", 64), "gfx942": ("hip", "gfx942", 64),
           "gfx1250": ("hip", "gfx1250", 32), "sm_90": ("cuda", 90, 32),
           "sm_100": ("cuda", 100, 32)}
_LOADS = {"hip": ("global_load", "buffer_load"), "cuda": ("ld.global",)}
SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "alpha": "fp32",
             "n": "i32", "BLOCK": "constexpr"}


def compile_for(targets, out_dir):
    """Compile ``scale_add_kernel`` for each target; write its assembly to ``out_dir`` and
    return, per target, the file and whether the code loads from global memory."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    report = {}
    for t in targets:
        if t not in TARGETS:
            raise ValueError(f"compile_for: no Triton target for {t!r}; known: {sorted(TARGETS)}")
        kind, arch, warp = TARGETS[t]
        src = ASTSource(scale_add_kernel, SIGNATURE, constexprs={"BLOCK": 256})
        compiled = triton.compile(src, target=GPUTarget(kind, arch, warp))
        asm = compiled.asm["amdgcn" if kind == "hip" else "ptx"]
        path = out_dir / f"scale_add.{t}.{'s' if kind == 'hip' else 'ptx'}"
        path.write_text(asm)
        loads = any(op in asm for op in _LOADS[kind])
        if not loads:
            raise RuntimeError(f"compile_for: {t} code has no global load: {path}")
        report[t] = {"file": path.name, "lines": asm.count("\n"), "global_loads": loads}
    return report
