"""`xvendor port --compile` on real CUDA corpora nobody here wrote: per corpus, kernels
found / translated / compiled, refusals and compile errors by reason, translation and RTC
times.

    python bench/port_corpora.py NAME=DIR[:SUB,SUB...] [NAME=DIR ...] [--json out.json]
        [--jobs N] [--timeout S] [--max-files N] [--exclude FOLDER]

DIR is a checkout of a public project (e.g. extracted with ``git --git-dir=<mirror>
archive HEAD | tar -x``); it is read in place and never copied into this repository. SUBs
restrict the corpus to those sub-folders. Every ``.cu`` file is one translation unit; a
``.cuh`` that no ``.cu`` of the corpus includes is one too. Kernels defined in ``.h``/``.hpp``
headers that the corpus's ``.cu``/``.cuh`` files include (directly or through other headers)
are counted, never as units of their own (NOTE [kernels in C++ headers]). Each unit is translated and
built in a fresh process (a crash or hang costs that unit only), with ``-I`` set to the
unit's folder and its parents up to the corpus root, and every folder of the corpus named
``include``/``inc``/``common``.

"Found" is counted from the text, independently of the tool: every ``__global__``
*definition* (the declaration is followed by a body). A kernel the tool never reports is
"missed", so a file the parser gives up on counts against the tool, never for it. A kernel
defined in a header and reached from several units takes its best verdict.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_GLOBAL = re.compile(rb"__global__")
_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)
_BOUNDS = re.compile(rb"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_INCLUDE = re.compile(rb'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def kernels_in_text(text: bytes) -> list:
    """Names of the ``__global__`` functions defined (with a body) in ``text``."""
    text = _COMMENT.sub(lambda m: b" " * (m.end() - m.start()), text)
    text = _BOUNDS.sub(lambda m: b" " * (m.end() - m.start()), text)
    out = []
    for m in _GLOBAL.finditer(text):
        rest = text[m.end():m.end() + 4000]
        if rest.lstrip().startswith(b"void") is False and b"(" not in rest[:400]:
            continue
        depth, i, paren = 0, 0, -1
        while i < len(rest):  # the first '(' at template depth 0 opens the parameters
            c = rest[i:i + 1]
            if c == b"<":
                depth += 1
            elif c == b">":
                depth -= 1
            elif c == b"(" and depth <= 0:
                paren = i
                break
            elif c in b";{":
                break
            i += 1
        if paren < 0:
            continue
        name = re.search(rb"(\w+)\s*$", rest[:paren])
        depth, j = 0, paren
        while j < len(rest):
            if rest[j:j + 1] == b"(":
                depth += 1
            elif rest[j:j + 1] == b")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        tail = rest[j + 1:j + 400].lstrip()
        if name and not tail.startswith(b";") and b"{" in tail[:300].split(b";")[0] + b";":
            out.append(name.group(1).decode())
    return out


def units(root: Path, subs: list, exclude=()) -> tuple[list, dict]:
    """(translation units, {file: [kernel names]}) of a corpus; files under a folder named
    in ``exclude`` are left out."""
    tops = [root / s for s in subs] if subs else [root]

    def under(exts):
        return sorted({p for t in tops for ext in exts for p in t.rglob(ext)
                       if not set(p.relative_to(root).parts[:-1]) & set(exclude)})
    files = under(("*.cu", "*.cuh"))
    found = {str(p): kernels_in_text(p.read_bytes()) for p in files}
    included = set()
    for p in files:
        for inc in _INCLUDE.findall(p.read_bytes()):
            included.add(Path(inc.decode()).name)
    tus = [p for p in files if p.suffix == ".cu" or p.name not in included]
    # NOTE [kernels in C++ headers]: a kernel defined in a .h/.hpp that a .cu/.cuh of the
    # corpus includes is counted too (never a unit of its own: it is reached through the
    # units that include it, and takes its best verdict like a .cuh kernel); one included
    # only by host .cpp files, or by nothing, is not CUDA the corpus compiles with nvcc.
    # Matched by file name as the tool reports it; a header name included by several .cu
    # files counts once (keyed by its path).
    reached = set(included)
    for _ in range(3):  # headers included by included headers
        for p in under(("*.h", "*.hpp")):
            if p.name in reached:
                reached.update(Path(i.decode()).name for i in _INCLUDE.findall(p.read_bytes()))
    for p in under(("*.h", "*.hpp")):
        if p.name in reached:
            found[str(p)] = kernels_in_text(p.read_bytes())
    return tus, {f: k for f, k in found.items() if k}


def include_dirs(root: Path, tu: Path) -> list:
    dirs = [tu.parent] + [d for d in tu.parents if root in (d, *d.parents)]
    dirs += sorted(p for p in root.rglob("*") if p.is_dir() and p.name in ("include", "inc", "common", "Common"))
    return [str(d) for d in dict.fromkeys(dirs)]


def one(path: str, root: str) -> dict:
    """Translate and build one unit (in this process); per kernel: origin file, verdict."""
    import inspect
    from xvendor.port import build
    kw = {}
    if "include_dirs" in inspect.signature(build.compile_translation).parameters:
        kw["include_dirs"] = include_dirs(Path(root), Path(path))
    t0 = time.perf_counter()
    t = build.translate_file(path, **kw)
    translate_s = time.perf_counter() - t0
    res = build.compile_translation(path, **kw)
    rows = []
    for k in res.translation.kernels:
        if getattr(k, "file", ""):
            origin = k.file
        else:  # the tool before reports carried their file: its line is the parsed text's
            where = res.translation.unit.where(k.line)
            origin = Path(path).name if where.startswith("line") else where.split(":")[0]
        compiled = k.status == "ok" and bool(k.instantiations) and res.program is not None
        rows.append({"name": k.name, "file": origin, "status": "compiled" if compiled else k.status,
                     "reason": (k.reason.splitlines() or [""])[0][:200],
                     # compiled through the branch taken over a dead refused construct (may be a stub)
                     "dead_ptx": any("does not take" in x for x in getattr(k, "lints", []))})
    return {"unit": path, "translate_s": round(translate_s, 3), "build_s": round(res.seconds, 2),
            "translated": sum(k.status == "ok" for k in t.kernels), "kernels": rows}


def _run_unit(tu, root, timeout, env):
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, __file__, "--one", str(tu), "--root", str(root)],
                           env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode == 0:
            return json.loads(r.stdout.strip().splitlines()[-1])
        err = (r.stderr.strip().splitlines() or ["?"])[-1]
    except subprocess.TimeoutExpired:
        err = f"timeout after {timeout}s"
    return {"unit": str(tu), "error": err[:300], "build_s": round(time.perf_counter() - t0, 2),
            "translate_s": None, "kernels": []}


def _reason_class(status: str, reason: str) -> str:
    r = re.sub(r"'[^']*'", "'…'", reason)
    r = re.sub(r"\d+", "N", r)
    return f"{status}: {r[:110]}"


def measure(name, root: Path, subs, jobs, timeout, max_files, env, exclude=()) -> dict:
    tus, found = units(root, subs, exclude)
    tus = tus[:max_files] if max_files else tus
    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as ex:
        results = list(ex.map(lambda tu: _run_unit(tu, root, timeout, env), tus))
    out = summarize(name, results, found)
    out["units"], out["wall_s"] = len(tus), round(time.perf_counter() - t0, 1)
    return out


# refusals of constructs SYCL cannot express (the goal's list); any other refusal counts
# against the tool like a failure
_TRUE_REFUSAL = re.compile(r"texture/surface|inline PTX|grid-wide cooperative|library call|"
                           r"device-side malloc|dynamic parallelism")

_RANK = {"compiled": 4, "ok": 3, "not_compiled": 2, "compile_error": 1, "unsupported": 0}


def summarize(name, results, found) -> dict:
    """Per-corpus figures from the units' verdicts; a kernel's best verdict counts. A verdict
    whose file is not one defining that name is matched by name when exactly one file of
    the corpus defines it."""
    by_name = collections.defaultdict(list)
    files_of = collections.defaultdict(set)
    for f, ks in found.items():
        for k in ks:
            by_name[(Path(f).name, k)].append(f)
            files_of[k].add(Path(f).name)
    best = {}
    for res in results:
        for k in res["kernels"]:
            key = (k["file"], k["name"])
            if key not in by_name and len(files_of.get(k["name"], ())) == 1:
                key = (next(iter(files_of[k["name"]])), k["name"])
            if key in by_name and (key not in best or _RANK[k["status"]] > _RANK[best[key]["status"]]):
                best[key] = k
    kernels_total = sum(len(ks) for ks in found.values())
    reasons = collections.Counter()
    for key in by_name:
        k = best.get(key)
        if k is None:
            reasons["missed: not reported by the tool"] += len(by_name[key])
        elif k["status"] != "compiled":
            reasons[_reason_class(k["status"], k["reason"])] += len(by_name[key])
    compiled = sum(len(by_name[k]) for k, v in best.items() if v["status"] == "compiled")
    translated = sum(len(by_name[k]) for k, v in best.items() if v["status"] in ("compiled", "ok"))
    true_ref = sum(n for r, n in reasons.items() if r.startswith("unsupported") and _TRUE_REFUSAL.search(r))
    return {"corpus": name, "found": kernels_total, "translated": translated, "compiled": compiled,
            "compiled_pct": round(100 * compiled / max(kernels_total, 1), 1),
            "true_refusals": true_ref,
            "compiled_pct_expressible": round(100 * compiled / max(kernels_total - true_ref, 1), 1),
            "unit_errors": sum(1 for r in results if "error" in r),
            "translate_s": round(sum(r["translate_s"] or 0 for r in results), 2),
            "build_s": round(sum(r["build_s"] or 0 for r in results), 1),
            "reasons": reasons.most_common(), "units_detail": results, "found_by_file": found}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", nargs="*", help="NAME=DIR[:SUB,SUB...]")
    p.add_argument("--json")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--max-files", type=int, default=0)
    p.add_argument("--exclude", action="append", default=[], metavar="FOLDER",
                   help="leave out files under folders of this name (repeatable)")
    p.add_argument("--resummarize", metavar="JSON",
                   help="recompute the figures of an earlier --json run (kernel finder changes)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.root)))
        return 0
    if a.resummarize:
        for old in json.loads(Path(a.resummarize).read_text()):
            found = {f: kernels_in_text(Path(f).read_bytes()) for f in old["found_by_file"]}
            r = summarize(old["corpus"], old["units_detail"], {f: k for f, k in found.items() if k})
            print(f"== {r['corpus']}: kernels found {r['found']} translated {r['translated']} "
                  f"compiled {r['compiled']} ({r['compiled_pct']}%; {r['compiled_pct_expressible']}% "
                  f"of {r['found'] - r['true_refusals']} expressible)")
            for reason, n in r["reasons"][:12]:
                print(f"   {n:4d}  {reason}")
        return 0
    if not a.corpus:
        p.error("corpus: give at least one NAME=DIR")
    out = []
    cache = os.environ.get("XVENDOR_CACHE_DIR") or tempfile.mkdtemp(prefix="xv-port-corpora-")
    env = dict(os.environ, XVENDOR_CACHE_DIR=cache)
    for spec in a.corpus:
        name, _, rest = spec.partition("=")
        if not rest:
            p.error(f"corpus: expected NAME=DIR[:SUB,...], got {spec!r}")
        d, _, subs = rest.partition(":")
        root = Path(d)
        if not root.is_dir():
            p.error(f"corpus {name}: {d} is not a directory")
        r = measure(name, root, [s for s in subs.split(",") if s], a.jobs, a.timeout, a.max_files, env,
                    a.exclude)
        out.append(r)
        print(f"== {name}: units {r['units']} kernels found {r['found']} translated {r['translated']} "
              f"compiled {r['compiled']} ({r['compiled_pct']}%; {r['compiled_pct_expressible']}% of the "
              f"{r['found'] - r['true_refusals']} SYCL can express) unit errors {r['unit_errors']} "
              f"translate {r['translate_s']}s build {r['build_s']}s wall {r['wall_s']}s", flush=True)
        for reason, n in r["reasons"][:12]:
            print(f"   {n:4d}  {reason}", flush=True)
        if a.json:  # after each corpus: a long run that is stopped keeps what it measured
            Path(a.json).write_text(json.dumps(out, indent=1))
    tot_f, tot_c = sum(r["found"] for r in out), sum(r["compiled"] for r in out)
    print(f"TOTAL kernels {tot_f} compiled {tot_c} ({100 * tot_c / max(tot_f, 1):.1f}%)")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
