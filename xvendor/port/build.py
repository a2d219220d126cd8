"""Translate a file and compile the result with SYCL RTC, giving every kernel its verdict.

Compilation goes through ``xvendor.xpu.runtime.build`` (the shim, its caches and the
OpenCL CPU device): the whole translation is built once; when it fails, the compiler's
error lines are mapped back to the kernels whose code (or device functions) they fall in,
those kernels get ``compile_error: <log>`` and are left out, and the rest is built again
(at most ``MAX_ROUNDS`` times, after which every remaining kernel carries the log). An
error that names no line of the source (a link failure of the JIT) is isolated by building
halves of the kernels alone (NOTE [link failures isolated]).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from . import parse, translate as tr

__all__ = ["translate_file", "compile_translation", "includes", "BuildResult", "MAX_ROUNDS"]

MAX_ROUNDS = 4
INCLUDE_DIR = Path(__file__).with_name("include")


def includes() -> dict:
    """The virtual include files of a port build: the compat header and the xpu kernels'
    common header it builds on (16-bit storage types, the kernel macro)."""
    from xvendor.xpu import runtime
    files = {p.name: p.read_text() for p in INCLUDE_DIR.glob("*.h")}
    files["xv_kernel_common.h"] = (runtime.kernels_dir() / "xv_kernel_common.h").read_text()
    return files


def translate_file(path, *, warp: str = "32", instantiate=None, kernels=None, exclude=None,
                   progress=None, include_dirs=(), defines=()):
    """Parse and translate ``path``; returns a ``translate.Translation``. ``include_dirs``:
    where else ``#include "x.h"`` files are looked for; ``defines``: ["NAME[=VALUE]"]."""
    unit = parse.parse_file(path, include_dirs=include_dirs)
    return tr.translate(unit, warp=warp, instantiate=instantiate, kernels=kernels, exclude=exclude,
                        progress=progress, defines=defines)


@dataclass
class BuildResult:
    translation: object  # the final Translation (failing kernels left out)
    program: object  # xvendor.xpu.runtime.Program, or None when nothing compiled
    seconds: float
    rounds: int


# errors in the translated source itself (RTC names it rtc_<n>.cpp), and the notes that lead
# an error inside a header back to the line of the source that caused it
_ERR = re.compile(r"^(?:\./)?rtc_\d+\.cpp:(\d+):\d+: (?:(?:fatal )?error:|note: in instantiation|"
                  r"note: .*requested here)", re.M)
_MARK = re.compile(r"/\*@xv:kernel:(\w+)\*/|/\*@xv:end\*/")


def _kernel_lines(source: str) -> list:
    """[(first line, last line, kernel name)] of each kernel's text in the SYCL source."""
    spans, cur = [], None
    for m in _MARK.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        if m.group(1):
            cur = (line, m.group(1))
        elif cur:
            spans.append((cur[0], line, cur[1]))
            cur = None
    return spans


def _blame(translation, log: str) -> dict:
    """Kernel name -> log for the kernels the errors fall in (all ok ones if none do)."""
    lines = [int(x) for x in _ERR.findall(log)]
    spans = _kernel_lines(translation.source)
    ok = [k.name for k in translation.kernels if k.status == "ok" and k.instantiations]
    hit = {name for ln in lines for a, b, name in spans if a <= ln <= b}
    if not hit:
        # an error outside every kernel (a device function or a type): the kernels that
        # reach the failing function, by name; else every kernel
        src_lines = translation.source.splitlines()
        names = set()
        for ln in lines:
            names |= _enclosing_function(src_lines, ln)
        unit = translation.unit
        for k in ok:
            fn = unit.function(k, "kernel")
            if fn is not None and names & {f.name for f in tr._reachable(unit, fn)}:
                hit.add(k)
        devices = {f.name for f in unit.functions if f.kind == "device"}
        if hit:  # the failing device functions go too (they break every kernel otherwise)
            return {**{k: log for k in hit}, **{f"device:{d}": log for d in names & devices}}
    return {k: log for k in (hit or ok)}


# NOTE [static_assert instantiations]: instantiations are found from every launch site and
# every `if constexpr` branch of the host code, including branches the real program never
# takes for those arguments. When the only errors of a kernel are static_assert failures
# inside some of its instantiations, nvcc would reject any program that instantiated them,
# so the real program never does: those instantiations are left out (a lint on the kernel
# names each), and the kernel compiles with the others. A kernel whose every instantiation
# fails, or that fails in any other way, stays compile_error.
_REQUESTED = re.compile(r"^(?:\./)?rtc_\d+\.cpp:(\d+):\d+: note: in instantiation of .* requested here", re.M)
_ASSERT = re.compile(r"error: static assertion failed|error: static_assert failed")


def _static_assert_instantiations(translation, name, log) -> dict:
    """{wrapper name: reason} of kernel ``name``'s instantiations whose compile fails on a
    static_assert, when those are all its errors and some instantiation is left."""
    rep = next((k for k in translation.kernels if k.name == name), None)
    if rep is None or len(rep.instantiations) < 2 or not _ASSERT.search(log):
        return {}
    lines = translation.source.splitlines()
    spans = [(a, b) for a, b, n in _kernel_lines(translation.source) if n == name]
    wrappers = {i.sycl_name for i in rep.instantiations}
    # one diagnostic = an error line and the notes after it, up to the next error
    blocks, cur = [], None
    for ln in log.splitlines():
        if re.search(r"rtc_\d+\.cpp:\d+:\d+: (?:fatal )?error:", ln):
            cur = [ln]
            blocks.append(cur)
        elif cur is not None:
            cur.append(ln)
    found, mine = set(), 0
    for block in blocks:
        at = [int(x) for x in re.findall(r"rtc_\d+\.cpp:(\d+):\d+:", "\n".join(block))]
        if not any(a <= ln <= b for ln in at for a, b in spans):
            continue  # another kernel's diagnostic
        mine += 1
        if not _ASSERT.search(block[0]):
            return {}
        hit = None
        for m in _REQUESTED.finditer("\n".join(block)):
            ln = int(m.group(1))
            for back in range(0, 4):
                w = re.match(r"^void (\w+)\(", lines[ln - 1 - back]) if ln - 1 - back >= 0 else None
                if w and w.group(1) in wrappers:
                    hit = w.group(1)
                    break
        if hit is None:
            return {}
        found.add(hit)
    if not mine or not found or found == wrappers:
        return {}
    msg = next(b[0] for b in blocks if _ASSERT.search(b[0])).split("error:", 1)[1].strip()[:160]
    return {w: f"its compile fails on a static_assert ({msg}): the program cannot instantiate it"
            for w in found}


def _enclosing_function(src_lines, line) -> set:
    for i in range(min(line, len(src_lines)) - 1, -1, -1):
        m = re.match(r"^\s*(?:template\s*<.*>\s*)?(?:[\w:<>,*&\s]+?)\b(\w+)\s*\(", src_lines[i])
        if m and not src_lines[i].startswith((" ", "\t")):
            return {m.group(1)}
    return set()


def compile_translation(path, *, warp="32", instantiate=None, kernels=None, queue=None,
                        progress=None, include_dirs=(), defines=()) -> BuildResult:
    """Translate ``path`` and build it, leaving out kernels that fail (``compile_error``);
    ``progress(kernel name)`` is called as each kernel is translated."""
    from xvendor.xpu import runtime
    queue = queue or runtime.cpu_queue()
    unit = parse.parse_file(path, include_dirs=include_dirs)
    exclude, drop, dropped, t0, rounds = {}, {}, {}, time.perf_counter(), 0
    while True:
        rounds += 1
        t = tr.translate(unit, warp=warp, instantiate=instantiate, kernels=kernels, exclude=exclude,
                         drop_devices=drop, progress=progress if rounds == 1 else None,
                         defines=defines, drop_instantiations=dropped)
        if not any(k.status == "ok" and k.instantiations for k in t.kernels):
            return BuildResult(t, None, time.perf_counter() - t0, rounds)
        try:
            prog = runtime.build(t.source, label=f"{unit.path} (translated)", queue=queue,
                                 includes=includes())
            return BuildResult(t, prog, time.perf_counter() - t0, rounds)
        except runtime.CompileError as e:
            ok = [k.name for k in t.kernels if k.status == "ok" and k.instantiations]
            if not _ERR.search(e.log) and len(ok) > 1:
                # NOTE [link failures isolated]: an error no source line is named in (the
                # JIT's link step: "Symbols not found: [...]") says nothing of whose code
                # needs the missing symbol; the kernels are bisected, each half built alone,
                # so that the failure costs the kernels that fail alone, not the unit
                def attempt(subset):
                    keep = set(subset)
                    ex = {**exclude, **{n: ("compile_error", "isolation") for n in ok if n not in keep}}
                    tt = tr.translate(unit, warp=warp, instantiate=instantiate, kernels=kernels,
                                      exclude=ex, drop_devices=drop, defines=defines,
                                      drop_instantiations=dropped)
                    try:
                        runtime.build(tt.source, label=f"{unit.path} (translated, isolating)",
                                      queue=queue, includes=includes())
                        return None
                    except runtime.CompileError as e2:
                        return e2.log
                blamed = _isolate(ok, e.log, attempt)
            else:
                blamed = _blame(t, e.log) if rounds < MAX_ROUNDS else {n: e.log for n in ok}
            spans = _kernel_lines(t.source)
            for name, log in blamed.items():
                failing = _static_assert_instantiations(t, name, log) if rounds < MAX_ROUNDS else {}
                if failing:  # NOTE [static_assert instantiations]
                    dropped.setdefault(name, {}).update(failing)
                elif name.startswith("device:"):
                    drop[name[len("device:"):]] = _excerpt(log, [])
                else:
                    exclude[name] = ("compile_error", _excerpt(log, [(a, b) for a, b, n in spans if n == name]))
            if rounds >= MAX_ROUNDS:
                t = tr.translate(unit, warp=warp, instantiate=instantiate, kernels=kernels,
                                 exclude=exclude, drop_devices=drop, defines=defines,
                                 drop_instantiations=dropped)
                return BuildResult(t, None, time.perf_counter() - t0, rounds)


def _isolate(names: list, log: str, attempt) -> dict:
    """Kernel name -> log for the kernels of ``names`` (which fail together with ``log``)
    that fail in a build of their own, found by bisection: ``attempt(subset)`` builds only
    ``subset`` and returns None or the failure's log. Halves that build are cleared; a half
    that fails is bisected in turn; one kernel that fails is blamed with its own log. When
    no half fails alone (kernels that fail only together), the whole group is blamed."""
    if len(names) == 1:
        return {names[0]: log}
    mid = len(names) // 2
    out = {}
    for half in (names[:mid], names[mid:]):
        hlog = attempt(half)
        if hlog is not None:
            out.update(_isolate(half, hlog, attempt))
    return out or {n: log for n in names}


def _excerpt(log: str, spans: list, limit: int = 4000) -> str:
    """The compiler's errors that fall in ``spans`` (the kernel's lines; all errors when
    none does), each with the lines that follow it, at most ``limit`` characters."""
    out, keep = [], False
    for ln in log.splitlines():
        m = _ERR.match(ln)
        if m:
            line = int(m.group(1))
            keep = not spans or any(a <= line <= b for a, b in spans)
        if keep:
            out.append(ln)
    text = "\n".join(out) or "\n".join(ln for ln in log.splitlines() if "error" in ln) or log
    return text[:limit]
