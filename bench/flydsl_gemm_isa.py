"""ISA evidence for the FlyDSL GEMM templates: memory instructions per compiled code object.

For each (arch, template or variant, config) the script compiles the backend's own
launch of the representative problem (``xvendor.rocm.crosscompile.compile_one``: real
gfx950 / gfx1250 code objects, no GPU), counts the memory and matrix instructions by
name in the final ISA (``ds_*``, ``buffer_*``, ``global_*``, ``tensor_*``, ``v_mfma*``,
``v_wmma*``; each static instruction once, not per loop trip) and prints them with the
resources the sweep judges (VGPR, SGPR, spills, scratch, LDS). Sizes are runtime values in
these kernels, so one code object per specialization serves every M, N and K: the tail
masks are in every one of them.

What to read off it:
- MN-major fragment reads: gfx950 ``ds_read_b64_tr_b16`` (4 elements per instruction),
  gfx1250 ``ds_load_tr16_b128`` (8), where the element-wise path used ``ds_read_u16`` /
  ``ds_load_u16``.
- K-major fragment reads stay ``ds_read_b128`` / ``ds_load_b128``; G2S loads
  ``buffer_load_dwordx4`` (gfx950) or ``tensor_load_to_lds`` (gfx1250).
- C stores: as wide as the accumulator's runs and N allow (``gemm_gfx950.store_width``):
  bf16 ``buffer_store_dwordx2`` (4 elements, gfx950) / ``buffer_store_b128`` (8, gfx1250)
  where every element took a ``buffer_store_short`` / ``buffer_store_b16``. The template
  ``gemm@N=<n>`` compiles gemm with C rows of ``n`` elements: N = 383 (odd) keeps one
  element per store, N = 386 two, N = 388 four. ``grouped_mm@3Dx2D`` writes the caller's
  output through a column-major C: one element per store (strided), no output copy.

Each compile runs in its own process (LLVM errors abort a process), one at a time.

    python bench/flydsl_gemm_isa.py [--targets gfx950,gfx1250] [--configs default|all]
        [--templates gemm,gemm:NN,gemm@N=383,...] [--json out.json]
"""

from __future__ import annotations

import re
import sys
from collections import Counter

import isolated  # bench/isolated.py: one compile per process

INSTR = re.compile(r"^\s+((?:ds|buffer|global|tensor|scratch)_\w+|v_mfma\w*|v_wmma\w*)\b", re.M)


def instruction_counts(asm: str) -> dict[str, int]:
    """Memory and matrix instructions of an ISA text, by name (static count)."""
    return dict(sorted(Counter(m.group(1) for m in INSTR.finditer(asm)).items()))


def _extra_plan(template: str, cfg):
    """Problems beyond the sweep's representatives (bf16, default shapes of ``crosscompile``):
    ``gemm@N=<n>``: gemm (NT) with C rows of ``n`` elements (its ``n_align`` picks the C
    store width); ``grouped_mm@3Dx2D``: a (G, M, K) x b (K, T) with ragged T, which writes
    the caller's output through a column-major C."""
    import torch

    from xvendor.rocm import launch
    bf = torch.bfloat16
    if template.startswith("gemm@N="):
        n = int(template.partition("@N=")[2])
        return launch.plan_gemm(torch.zeros(256, 512, dtype=bf),
                                torch.zeros(n, 512, dtype=bf).t(), torch.zeros(n, dtype=bf),
                                None, cfg)
    if template == "grouped_mm@3Dx2D":
        offs = torch.tensor([100, 100, 300, 512], dtype=torch.int32)
        return launch.plan_grouped(torch.zeros(4, 384, 256, dtype=bf),
                                   torch.zeros(256, 512, dtype=bf), offs, None, None, cfg)
    raise KeyError(f"unknown problem {template!r}: gemm@N=<n> or grouped_mm@3Dx2D")


def _extra_compile(template: str, arch: str, config: dict) -> dict:
    """Compile an ``_extra_plan`` problem through the sweep's own steps."""
    from xvendor.rocm import configs, crosscompile
    base = template.partition("@")[0]
    cfg = configs.config_from(base, config)
    plan = _extra_plan(template, cfg)
    required = ["tensor_load_to_lds"] if arch == "gfx1250" else []
    return crosscompile.compile_plan(
        arch, lambda: crosscompile.build_for(base, arch, cfg, plan), plan, cfg.num_warps,
        required, True)


def compile_and_count(template: str, arch: str, config: dict) -> dict:
    """One compile in this process: the instruction counts and the judged resources."""
    from xvendor.rocm import crosscompile
    from xvendor.tuning import resources
    raw = _extra_compile(template, arch, config) if "@" in template else \
        crosscompile.compile_one(template, arch, config)
    rec = resources.inspect(arch, raw)
    keep = ("ok", "reason", "vgpr", "agpr", "sgpr", "spills", "scratch", "lds_bytes", "occupancy")
    return {"template": template, "arch": arch, "config": config,
            "instructions": instruction_counts(raw["asm"]), **{k: rec.get(k) for k in keep}}


def jobs(targets, templates, which):
    from xvendor.rocm import configs
    for arch in targets:
        for t in templates:
            base = configs.base_template(t.partition("@")[0])
            cfgs = configs.SPACES[arch][base] if which == "all" else (configs.default(arch, base),)
            for cfg in cfgs:
                yield t, arch, cfg.to_dict()


def _name(cfg: dict) -> str:
    from xvendor.rocm import configs
    return configs.Config(**cfg).name


def main(argv=None) -> int:
    from xvendor.rocm import configs
    p = isolated.parser(__doc__.splitlines()[0], configs.TARGETS)
    p.add_argument("--templates", default=",".join(
        v for t in configs.TEMPLATES for v in (t, *configs.VARIANTS.get(t, ()))))
    args = p.parse_args(argv)
    if isolated.answer_one(args, compile_and_count):
        return 0
    records = []
    todo = jobs(args.targets.split(","), args.templates.split(","), args.configs)
    for template, arch, cfg in todo:
        rec = isolated.run(__file__, [template, arch, cfg],
                           {"template": template, "arch": arch, "config": cfg})
        records.append(rec)
        head = f"{arch:8s} {template:18s} {_name(cfg):24s}"
        if not rec["ok"]:
            print(f"{head} FAILED: {rec['reason']}", flush=True)
            continue
        print(f"{head} vgpr {rec['vgpr']:3d} sgpr {rec['sgpr']:3d} spills {rec['spills']} "
              f"scratch {rec['scratch']} lds {rec['lds_bytes']}", flush=True)
        print("    " + "  ".join(f"{k} {v}" for k, v in rec["instructions"].items()), flush=True)
    return isolated.summarize(records, args.json)

if __name__ == "__main__":
    sys.exit(main())
