"""Compile one FlyDSL template x config to a real gfx950/gfx1250 code object, without a GPU.

FlyDSL 0.3.x compiles for ``FLYDSL_GPU_ARCH`` with ``COMPILE_ONLY=1`` (the jit call
returns None). The code object is linked by ``ld.lld`` (``xvendor.rocm.linker``). With
``FLYDSL_DUMP_IR`` the compiler also writes every stage, the final ISA text (with the
``.amdgpu_metadata`` the inspection reads) and the ``gpu.binary`` holding the ELF; this
module reads those two, checks the ELF is an AMDGPU code object for the target, and
returns the raw artifacts for ``xvendor.tuning.resources.inspect``.

The launch is built by the backend's own host code (``xvendor.rocm.launch``) on small
placeholder CPU tensors: shapes are runtime values in these kernels, so only dtypes and
operand majors select the specialization — exactly what the backend would launch.

Run in a worker process (``xvendor.tuning.workers``): LLVM errors abort the process.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import torch

from . import configs, launch, linker, rmsnorm

# Representative problems (bf16). Variants are compiled with each template's default config.
PROBLEMS = {
    "gemm": "bf16 addmm NT: a (M, K) row-major, b = w.t() (w (N, K) row-major), bias (N,)",
    "gemm:NN": "bf16 mm NN: a (M, K), b (K, N), both row-major",
    "grouped_mm": "bf16 MoE forward 2Dx3D: a (M, K), b (G, K, N) row-major, offs (G,)",
    "grouped_mm:2Dx2D": "bf16 weight gradient 2Dx2D: a = x.t() (x (T, M)), b (T, N), offs",
    "grouped_mm:3Dx3D": "bf16 batched 3Dx3D: a (G, M, K), b (G, K, N), bias (G, N)",
    "rms_norm": "bf16 rms_norm: x (6, 100), bf16 weight (100,): ragged rows (100 % vec)",
    "rms_norm:rows": "bf16 rms_norm, several rows per workgroup: x (6, 100), bf16 weight",
    "rms_norm:fp32w": "bf16 rms_norm with fp32 master weights: x (6, 100), weight (100,) fp32",
}
SCHEMA = 1  # bump when the problems or the artifact reading change: invalidates caches
EM_AMDGPU = 224


def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


def plan_for(template: str, cfg) -> launch.Launch:
    """The backend's launch of the representative problem of ``template``."""
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
    if configs.base_template(template) == "rms_norm":  # hidden is a runtime value
        w_dtype = torch.float32 if template == "rms_norm:fp32w" else torch.bfloat16
        return rmsnorm.plan(_t(6, 100), _t(100, dtype=w_dtype), 1e-6, cfg)
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
    """Hash of the sources that shape ``template``'s code: its kernel module, tiling,
    launch, this module."""
    here = Path(__file__).parent
    h = hashlib.sha256(str(SCHEMA).encode())
    kernels = ("rmsnorm.py",) if configs.base_template(template) == "rms_norm" else \
        ("gemm_gfx950.py", "gemm_gfx1250.py")  # an RMSNorm edit keeps the GEMM records
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


def compile_one(template: str, arch: str, config: dict) -> dict:
    """Compile and return the raw artifacts the inspection reads (no judgement here)."""
    linker.ensure_linker()
    cfg = configs.config_from(template, config)
    plan = plan_for(template, cfg)
    norm = configs.base_template(template) == "rms_norm"
    dump = Path(tempfile.mkdtemp(prefix="xvendor-flydsl-"))
    env = {"COMPILE_ONLY": "1", "FLYDSL_GPU_ARCH": arch, "FLYDSL_RUNTIME_ENABLE_CACHE": "0",
           "FLYDSL_DUMP_IR": "1", "FLYDSL_DUMP_DIR": str(dump)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        if norm:
            fn, smem, threads = rmsnorm.build(cfg, arch=arch, **plan.spec)
        else:
            fn, smem, threads = template_module(arch).build(plan.template, cfg, **plan.spec)
        t0 = time.perf_counter()
        fn(*plan.args)
        compile_s = time.perf_counter() - t0
        isa = next(dump.rglob("*_final_isa.s")).read_text()
        objs = code_objects(next(dump.rglob("*_gpu_module_to_binary.mlir")).read_text())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(dump, ignore_errors=True)
    if not objs:
        raise RuntimeError("the compile produced no code object")
    for elf in objs:
        check_code_object(elf, arch)
    return {
        "vendor": "amd", "asm": isa, "shared": smem, "num_warps": cfg.num_warps,
        "compile_s": compile_s, "code_object_bytes": len(objs[0]),
        "code_object_sha256": hashlib.sha256(objs[0]).hexdigest()[:16],
        "require": _required(template, arch, cfg, plan),
        # RMSNorm has no matrix instruction; ``resources.inspect`` does not read this key
        # yet, so its records carry the "no <mma> instruction" reason until it does.
        "expects_mma": not norm,
    }


def _required(template: str, arch: str, cfg, plan) -> list[str]:
    """Instructions the code must contain: gfx1250 GEMMs use the Tensor Data Mover; an
    RMSNorm moves x and y with vector loads/stores ``vec`` elements wide."""
    if configs.base_template(template) == "rms_norm":
        width = cfg.vec * rmsnorm._BITS[plan.spec["dtype"]] // 8
        return list(rmsnorm.vector_instrs(arch, width))
    return ["tensor_load_to_lds"] if arch == "gfx1250" else []
