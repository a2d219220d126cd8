"""Compile one FlyDSL template x config to a real gfx950/gfx1250 code object, without a GPU.

FlyDSL 0.3.x compiles for ``FLYDSL_GPU_ARCH`` with ``COMPILE_ONLY=1`` (the jit call
returns None). The code object is linked by ``ld.lld`` (``xvendor.rocm.linker``). With
``FLYDSL_DUMP_IR`` the compiler also writes every stage, the final ISA text (with the
``.amdgpu_metadata`` the inspection reads) and the ``gpu.binary`` holding the ELF; this
module reads those two, checks the ELF is an AMDGPU code object for the target, and
returns the raw artifacts for ``xvendor.tuning.resources.inspect``.

The launch is built by the backend's own host code (``xvendor.rocm.launch``,
``rmsnorm.plan``/``plan_backward``, ``topk.plan``) on small placeholder CPU tensors: shapes
are runtime values in these kernels, so only dtypes, operand majors and flags select the
specialization — exactly what the backend would launch. Every FlyDSL template (GEMM
family, RMSNorm forward / fused residual / backward, topk router / radix) compiles here,
through the same steps (``compile_one``).

Run in a worker process (``xvendor.tuning.workers``): LLVM errors abort the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import torch

from . import configs, launch, linker, rmsnorm, topk

# Representative problems (bf16 unless named). Variants compile with their default config.
PROBLEMS = {
    "gemm": "bf16 addmm NT: a (M, K) row-major, b = w.t() (w (N, K) row-major), bias (N,)",
    "gemm:NN": "bf16 mm NN: a (M, K), b (K, N), both row-major",
    "grouped_mm": "bf16 MoE forward 2Dx3D: a (M, K), b (G, K, N) row-major, offs (G,)",
    "grouped_mm:2Dx2D": "bf16 weight gradient 2Dx2D: a = x.t() (x (T, M)), b (T, N), offs",
    "grouped_mm:3Dx3D": "bf16 batched 3Dx3D: a (G, M, K), b (G, K, N), bias (G, N)",
    "rms_norm": "bf16 rms_norm: x (6, 100), bf16 weight (100,): ragged rows (100 % vec)",
    "rms_norm:rows": "bf16 rms_norm, several rows per workgroup: x (6, 100), bf16 weight",
    "rms_norm:fp32w": "bf16 rms_norm with fp32 master weights: x (6, 100), weight (100,) fp32",
    "rms_norm:residual": "bf16 fused rms_norm(x + residual): x, residual (6, 100), bf16 weight",
    "rms_norm_bwd": "bf16 rms_norm backward: grad, x (6, 100), bf16 weight (100,): ragged",
    "rms_norm_bwd:fp32": "fp32 rms_norm backward: grad, x (6, 100), fp32 weight (100,)",
    "rms_norm_bwd:nw": "bf16 rms_norm backward without a weight: grad, x (6, 100)",
    "topk:router": "bf16 router: x (6, 100) (100 experts: ragged), k 8, largest",
    "topk:router:fp32": "fp32 router: x (6, 60), k 8, largest",
    "topk:radix": "bf16 sampling row: x (2, 5003) (ragged), k 50, largest",
    "topk:radix:smallest": "fp16 sampling row: x (2, 5003), k 50, smallest",
}
SCHEMA = 2  # bump when the problems or the artifact reading change: invalidates caches
EM_AMDGPU = 224


def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


def plan_for(template: str, cfg, arch: str = "gfx950") -> launch.Launch:
    """The backend's launch of the representative problem of ``template`` (topk's plan
    depends on ``arch``'s wave size)."""
    offs = torch.tensor([100, 100, 300, 512], dtype=torch.int32)  # ragged, one empty group
    if template == "gemm":
        return launch.plan_gemm(_t(256, 512), _t(384, 512).t(), _t(384), None, cfg)
    if template == "gemm:NN":
        return launch.plan_gemm(_t(256, 512), _t(512, 384), None, None, cfg)
    if template == "grouped_mm":
        return launch.plan_grouped(_t(512, 256), _t(4, 256, 384), offs, None, None, cfg)
    if template == "grouped_mm:2Dx2D":
        return launch.plan_grouped(_t(512, 256).t(), _t(512, 384), offs, None, None, cfg)
    if template == "grouped_mm:3Dx3D":
        return launch.plan_grouped(_t(4, 256, 512), _t(4, 512, 384), None, _t(4, 384), None,
                                   cfg)
    base = configs.base_template(template)
    if base == "rms_norm":  # hidden is a runtime value: one code object for every width
        w_dtype = torch.float32 if template == "rms_norm:fp32w" else torch.bfloat16
        x = _t(6, 100)
        return rmsnorm.plan(x, _t(100, dtype=w_dtype), 1e-6, cfg,
                            residual=_t(6, 100) if template == "rms_norm:residual" else None)
    if base == "rms_norm_bwd":
        dt = torch.float32 if template.endswith(":fp32") else torch.bfloat16
        x = _t(6, 100, dtype=dt)
        w = None if template.endswith(":nw") else _t(100, dtype=dt)
        return rmsnorm.plan_backward(_t(6, 100, dtype=dt), x, w, 1e-6, cfg)
    if base in configs.TOPK_TEMPLATES and template in PROBLEMS:
        dt = {"fp32": torch.float32, "smallest": torch.float16}.get(
            template.rpartition(":")[2], torch.bfloat16)
        shape, k = {"topk:router": ((6, 100), 8), "topk:router:fp32": ((6, 60), 8)}.get(
            template, ((2, 5003), 50))
        return topk.plan(_t(*shape, dtype=dt), k, -1, not template.endswith("smallest"), cfg,
                         arch)
    raise KeyError(f"unknown FlyDSL template {template!r}; templates: {sorted(PROBLEMS)}")


def template_module(arch: str):
    if arch == "gfx950":
        from . import gemm_gfx950 as mod
    elif arch == "gfx1250":
        from . import gemm_gfx1250 as mod
    else:
        raise KeyError(f"FlyDSL templates target gfx950 and gfx1250, not {arch!r}")
    return mod


def source_hash(template: str) -> str:
    """Hash of the sources that shape ``template``'s code: its kernel modules, tiling,
    launch, this module (an RMSNorm or topk edit keeps the GEMM records, and back)."""
    here = Path(__file__).parent
    h = hashlib.sha256(str(SCHEMA).encode())
    base = configs.base_template(template)
    if base in configs.TOPK_TEMPLATES:
        kernels = ("topk.py", "rmsnorm.py")  # topk reuses rmsnorm's row indexing
    elif base in configs.NORM_TEMPLATES:
        kernels = ("rmsnorm.py",)
    else:
        kernels = ("gemm_gfx950.py", "gemm_gfx1250.py")
    for name in kernels + ("tiling.py", "launch.py", "crosscompile.py"):
        p = here / name
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:16]


def _unescape_mlir(s: str) -> bytes:
    """An MLIR string literal's body (\\XX hex escapes, \\\\, \\") as bytes."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            nxt = s[i + 1]
            if nxt in '\\"':
                out.append(ord(nxt))
                i += 2
                continue
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
            continue
        out += c.encode("latin-1")
        i += 1
    return bytes(out)


def code_objects(binary_mlir: str) -> list[bytes]:
    """The ELF code objects embedded in a ``gpu.binary`` op (``bin = "..."``)."""
    return [_unescape_mlir(m.group(1))
            for m in re.finditer(r'bin\s*=\s*"((?:[^"\\]|\\.)*)"', binary_mlir)]


def check_code_object(elf: bytes, arch: str) -> None:
    """Raise unless ``elf`` is a relocatable-or-shared AMDGPU ELF for ``arch``."""
    if elf[:4] != b"\x7fELF":
        raise RuntimeError(f"not an ELF code object (starts {elf[:8]!r})")
    machine = int.from_bytes(elf[18:20], "little")
    if machine != EM_AMDGPU:
        raise RuntimeError(f"ELF e_machine {machine}, expected AMDGPU ({EM_AMDGPU})")
    if arch.encode() not in elf:
        raise RuntimeError(f"code object does not name its target {arch}")


def build_for(template: str, arch: str, cfg, plan: launch.Launch):
    """The backend's launcher of ``plan``: (jit function, LDS bytes, threads)."""
    base = configs.base_template(template)
    if base == "rms_norm":
        return rmsnorm.build(cfg, arch=arch, **plan.spec)
    if base == "rms_norm_bwd":
        return rmsnorm.build_backward(cfg, arch=arch, **plan.spec)
    if base in configs.TOPK_TEMPLATES:
        return topk.build(cfg, arch=arch, **plan.spec)
    return template_module(arch).build(plan.template, cfg, **plan.spec)


def compile_one(template: str, arch: str, config: dict) -> dict:
    """Compile ``template`` (or one of its variants) with ``config`` for ``arch`` and return
    the raw artifacts the inspection reads (no judgement here): the sweep's worker entry
    (``xvendor.tuning.workers``, toolchain "flydsl")."""
    cfg = configs.config_from(template, config)
    plan = plan_for(template, cfg, arch)
    # norm and select kernels have no matrix instruction to expect
    return compile_plan(arch, lambda: build_for(template, arch, cfg, plan), plan,
                        cfg.num_warps, _required(template, arch, cfg, plan),
                        configs.base_template(template) in configs.TEMPLATES)


def compile_plan(arch: str, build, plan, num_warps: int, require: list[str],
                 expects_mma: bool) -> dict:
    """Trace ``build()`` -> (launcher, smem bytes, ...) and compile it for ``arch`` by calling
    the launcher on ``plan``'s placeholder arguments; the raw artifacts the inspection reads
    (ISA, shared bytes, the checked code object, the instructions it must contain)."""
    linker.ensure_linker()
    with _compile_env(arch) as dump:  # set before tracing: the MMA choice is made there
        fn, smem, _ = build()
        t0 = time.perf_counter()
        fn(*plan.args)
        compile_s = time.perf_counter() - t0
        isa = next(dump.rglob("*_final_isa.s")).read_text()
        objs = code_objects(next(dump.rglob("*_gpu_module_to_binary.mlir")).read_text())
    if not objs:
        raise RuntimeError("the compile produced no code object")
    for elf in objs:
        check_code_object(elf, arch)
    return {
        "vendor": "amd", "asm": isa, "shared": smem, "num_warps": num_warps,
        "compile_s": compile_s, "code_object_bytes": len(objs[0]),
        "code_object_sha256": hashlib.sha256(objs[0]).hexdigest()[:16],
        "require": require, "expects_mma": expects_mma,
    }


@contextlib.contextmanager
def _compile_env(arch: str):
    """Compile-only mode for ``arch``, FlyDSL's runtime cache off (a miss is a real
    compile), every stage dumped into a temporary folder (yielded), removed afterwards."""
    dump = Path(tempfile.mkdtemp(prefix="xvendor-flydsl-"))
    env = {"COMPILE_ONLY": "1", "FLYDSL_GPU_ARCH": arch, "FLYDSL_RUNTIME_ENABLE_CACHE": "0",
           "FLYDSL_DUMP_IR": "1", "FLYDSL_DUMP_DIR": str(dump)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield dump
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(dump, ignore_errors=True)


def _required(template: str, arch: str, cfg, plan) -> list[str]:
    """Instructions the code must contain: gfx1250 GEMMs use the Tensor Data Mover; an
    RMSNorm (forward, residual, backward) moves its rows with vector loads and stores
    ``vec`` elements wide; topk loads its rows that wide (its stores are k entries)."""
    base = configs.base_template(template)
    if base in configs.NORM_TEMPLATES or base in configs.TOPK_TEMPLATES:
        bits = rmsnorm._BITS[plan.spec["dtype"]]
        width = rmsnorm.piece(cfg.vec, bits) * bits // 8
        instrs = rmsnorm.vector_instrs(arch, width)
        return list(instrs if base in configs.NORM_TEMPLATES else instrs[:1])
    return ["tensor_load_to_lds"] if arch == "gfx1250" else []
