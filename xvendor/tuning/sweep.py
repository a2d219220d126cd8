"""The cross-compile sweep: every template x config x target, in workers, cached.

``sweep(toolchain, targets, which)`` returns one record per (template, target, config):
``ok, reason, vgpr, agpr, sgpr, spills, scratch, lds_bytes, occupancy, mma_instr,
compile_s`` and a few more (``resources.inspect``), plus ``template, target, config,
config_name, default, cached``.

NOTE [compile cache]: a record is cached under the hash of (toolchain, template source
hash, toolchain version, target, config, inspection code hash), one JSON file each in
``<cache_dir>/compile/`` (FlyDSL records too: same format, same cache; FlyDSL's own
runtime cache is off in the workers, so a miss is a real compile); the workers' own
Triton cache lives beside it
(``<cache_dir>/triton``), so an empty ``cache_dir`` is a truly cold sweep. The default
``cache_dir`` is ``$XVENDOR_CACHE_DIR`` or ``~/.cache/xvendor``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .workers import Worker, worker_env


@dataclass(frozen=True)
class Toolchain:
    """What the sweep needs to know about one kernel toolchain."""

    name: str
    version: str
    templates: tuple
    targets: tuple
    candidates: Callable  # (arch, template, which) -> configs with .name and .to_dict()
    default: Callable  # (arch, template) -> config
    source_hash: Callable  # template -> str
    variants: dict = None  # template -> specializations checked with its default config


TOOLCHAIN_NAMES = ("triton", "flydsl")


def toolchain(name: str) -> Toolchain:
    if name == "flydsl":
        from importlib.metadata import version

        from ..rocm import configs as fly_configs, crosscompile as fly_cc
        return Toolchain("flydsl", version("flydsl"), fly_configs.ALL_TEMPLATES,
                         fly_configs.TARGETS, fly_configs.candidates, fly_configs.default,
                         fly_cc.source_hash, fly_configs.VARIANTS)
    if name != "triton":
        raise KeyError(f"no cross-compile toolchain {name!r}; toolchains: {list(TOOLCHAIN_NAMES)}")
    import triton

    from ..triton import configs, crosscompile
    return Toolchain("triton", triton.__version__, configs.TEMPLATES, tuple(configs.TARGETS),
                     _triton_candidates, _triton_default, crosscompile.source_hash,
                     configs.VARIANTS)


# The scaled FP8/MX templates ("scaled_mm:mxfp8" ...) have their own config spaces and
# targets (sm_100 too); they are compiled by explicit jobs (``xvendor.triton.tunable``),
# not by the default plan, whose templates and targets stay the bf16 ones.
def _triton_space(template: str):
    from ..triton import configs, scaled_configs
    scaled = configs.base_template(template) in scaled_configs.TEMPLATES
    return scaled_configs if scaled else configs


def _triton_candidates(arch, template, which="all"):
    return _triton_space(template).candidates(arch, template, which)


def _triton_default(arch, template):
    return _triton_space(template).default(arch, template)


@functools.lru_cache(maxsize=1)
def _inspection_hash() -> str:
    """A change in how records are read or judged (resources.py) must not hit old records."""
    from . import resources
    return hashlib.sha256(Path(resources.__file__).read_bytes()).hexdigest()[:16]


def default_cache_dir() -> Path:
    return Path(os.environ.get("XVENDOR_CACHE_DIR") or Path.home() / ".cache" / "xvendor")


class ResultCache:
    """One JSON file per compiled (toolchain, template source, version, target, config)."""

    def __init__(self, root: Path):
        self.dir = Path(root) / "compile"

    @staticmethod
    def key(tc: Toolchain, template: str, src_hash: str, target: str, cfg) -> str:
        ident = json.dumps([tc.name, template, src_hash, tc.version, target, cfg.to_dict(),
                            _inspection_hash()], sort_keys=True)
        return hashlib.sha256(ident.encode()).hexdigest()[:32]

    def get(self, key: str) -> dict | None:
        try:
            return json.loads((self.dir / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, record: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f"{key}.json.tmp"
        tmp.write_text(json.dumps(record))
        tmp.replace(self.dir / f"{key}.json")  # atomic: a reader never sees half a record


def plan(tc: Toolchain, targets, which: str = "all", templates=None) -> list[tuple]:
    """(template, target, config) triples of a sweep, the default config first per pair.

    ``which="default"`` also checks each template's variants (e.g. the other grouped_mm
    layouts) with the default config: the config the backend launches for all of them.
    """
    unknown = set(targets) - set(tc.targets)
    if unknown:
        raise KeyError(f"unknown targets {sorted(unknown)} for {tc.name}; "
                       f"targets: {list(tc.targets)}")
    names = list(templates or tc.templates)
    if which == "default" and templates is None:
        names += [v for t in tc.templates for v in (tc.variants or {}).get(t, ())]
    return [(t, arch, cfg) for arch in targets for t in names
            for cfg in tc.candidates(arch, t, which)]


def sweep(toolchain_name: str = "triton", targets=None, which: str = "all", *, jobs=None,
          cache_dir=None, workers: int | None = None, timeout_s: float = 600.0,
          progress: Callable | None = None) -> list[dict]:
    """Compile and inspect ``jobs`` (default: ``plan(...)``); cached records come back free.

    ``progress(record)`` is called once per finished job (cached ones included).
    """
    tc = toolchain(toolchain_name)
    jobs = jobs if jobs is not None else plan(tc, targets or tc.targets, which)
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    cache = ResultCache(root)
    hashes = {t: tc.source_hash(t) for t in {j[0] for j in jobs}}
    records: list[dict | None] = [None] * len(jobs)
    todo = []
    for i, (template, arch, cfg) in enumerate(jobs):
        key = ResultCache.key(tc, template, hashes[template], arch, cfg)
        hit = cache.get(key)
        if hit is not None:
            records[i] = _finish(hit, tc, template, arch, cfg, cached=True)
            if progress:
                progress(records[i])
        else:
            todo.append((i, key))
    n = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    pool = [Worker(worker_env(str(root / "triton"))) for _ in range(n)]
    free = list(pool)

    def one(item):
        i, key = item
        template, arch, cfg = jobs[i]
        w = free.pop()
        try:
            rec = w.run({"toolchain": tc.name, "template": template, "arch": arch,
                         "config": cfg.to_dict()}, timeout_s)
        finally:
            free.append(w)
        if not rec["reason"].startswith(("compiler process died", "timed out")):
            cache.put(key, rec)  # a crash may be transient (memory): retry next sweep
        records[i] = _finish(rec, tc, template, arch, cfg, cached=False)
        if progress:
            progress(records[i])

    try:
        with ThreadPoolExecutor(n) as ex:
            list(ex.map(one, todo))
    finally:
        for w in pool:
            w.close()
    return records


def _finish(rec: dict, tc: Toolchain, template, arch, cfg, cached: bool) -> dict:
    return {"toolchain": tc.name, "template": template, "target": arch,
            "config_name": cfg.name, "config": cfg.to_dict(),
            "default": cfg == tc.default(arch, template), "cached": cached, **rec}
