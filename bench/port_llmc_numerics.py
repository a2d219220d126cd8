"""Numerical agreement of `xvendor port`'s translations of llm.c dev/cuda kernels with
each file's own CPU reference, on the OpenCL CPU SYCL device.

    python bench/port_llmc_numerics.py /path/to/llm.c/dev/cuda

For each file below: the file's ``<op>_cpu`` function is compiled with g++ (its text taken
from the file by the tool's parser, with the file's macros) and run on the same random
inputs as every translated host launcher ``<op><N>(...)`` (from `xvendor port`'s ``.py``
output), over block sizes 32..1024, outputs NaN-poisoned, with llm.c's own rule
``|cpu - gpu| <= tol + |cpu| * FLT_EPSILON`` (non-finite references skipped). Sizes are
smaller than llm.c's (a 2-core CPU runs these); which files, their sizes, integer inputs
and tolerances are this benchmark's data (``FILES``), read off each file's main(). The
translator itself knows nothing of the corpus.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import inspect
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

# file stem -> (sizes, integer inputs {name: (count expr, high)}, tolerance, length of each
# pointer by name (an expression over the sizes), the pointers the CPU reference writes)
FILES = {
    "softmax_forward": ({"N": 64, "C": 1000}, {}, 1e-4, {"out": "N*C", "inp": "N*C"}, ["out"]),
    "layernorm_forward": ({"B": 4, "T": 32, "C": 768}, {}, 1e-5,
                          {"out": "B*T*C", "mean": "B*T", "rstd": "B*T", "inp": "B*T*C",
                           "weight": "C", "bias": "C"}, ["out", "mean", "rstd"]),
    # these define ENABLE_BF16 (floatX = bf16): llm.c's tolerance is then 1e-2 (+ 0.079 |ref|)
    "gelu_forward": ({"N": 8 * 64 * 96}, {}, 1e-2, {"out": "N", "inp": "N"}, ["out"]),
    "gelu_backward": ({"N": 8 * 64 * 96}, {}, 1e-2, {"dinp": "N", "inp": "N", "dout": "N"}, ["dinp"]),
    "residual_forward": ({"N": 8 * 64 * 96}, {}, 1e-2, {"out": "N", "inp1": "N", "inp2": "N"}, ["out"]),
    "encoder_forward": ({"B": 4, "T": 64, "C": 768}, {"inp": 1000}, 1e-2,
                        {"out": "B*T*C", "inp": "B*T", "wte": "1000*C", "wpe": "T*C"}, ["out"]),
    "crossentropy_forward": ({"B": 4, "T": 64, "V": 1000}, {"targets": 1000}, 1e-5,
                             {"losses": "B*T", "probs": "B*T*V", "targets": "B*T"}, ["losses"]),
}
BLOCKS = (32, 64, 128, 256, 512, 1024)
FLT_EPSILON = 1.1920928955078125e-07
BF16_EPSILON = 0.079  # llm.c's validate_result under ENABLE_BF16


def _cpu_library(unit, stem, tmp) -> ctypes.CDLL:
    s = unit.source
    macros = [s[n.start_byte:n.end_byte].decode() for n in _walk(unit.tree.root_node)
              if n.type in ("preproc_def", "preproc_function_def")
              and not re.search(rb"cuda|cublas|__device__", s[n.start_byte:n.end_byte])]
    funcs = [s[f.node.start_byte:f.node.end_byte].decode() for f in unit.functions
             if f.kind == "host" and f.name.endswith("_cpu")]
    src = ("#include <math.h>\n#include <float.h>\n#include <stdlib.h>\n#include <string.h>\n"
           "#include <assert.h>\n#include <algorithm>\nusing std::min; using std::max;\n"
           "typedef float floatX;  // the CPU references compute in float\n" +
           "\n".join(macros) + '\nextern "C" {\n' + "\n".join(funcs) + "\n}\n")
    cpp, so = Path(tmp) / f"{stem}_cpu.cpp", Path(tmp) / f"{stem}_cpu.so"
    cpp.write_text(src)
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-o", str(so), str(cpp)], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(so))


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _ctype_args(params, values):
    out = []
    for p in params:
        v = values[p.name]
        if isinstance(v, torch.Tensor):
            out.append(ctypes.c_void_p(v.data_ptr()))
        elif p.base in ("float",):
            out.append(ctypes.c_float(v))
        else:
            out.append(ctypes.c_int(v))
    return out


def run_file(directory: Path, stem: str, tmp) -> list:
    import xvendor.port
    from xvendor.port import parse, pylaunch, translate
    sizes, ints, tol, lengths, written = FILES[stem]
    path = directory / f"{stem}.cu"
    unit = parse.parse_file(path)
    # floatX as the file's own #defines select it (llm.c converts inputs to it for the GPU)
    bf16 = translate._resolve("floatX", translate._typedefs(unit)) == "__nv_bfloat16"
    eps = BF16_EPSILON if bf16 else FLT_EPSILON
    lib = _cpu_library(unit, stem, tmp)
    py_path = Path(tmp) / f"{stem}_launchers.py"
    py_path.write_text(pylaunch.launchers(unit))
    spec = importlib.util.spec_from_file_location(f"{stem}_launchers", py_path)
    launchers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launchers)
    t0 = time.perf_counter()
    mod = xvendor.port.load(path)
    load_s = time.perf_counter() - t0
    rows = []
    for ref in (f for f in unit.functions if f.kind == "host" and f.name.endswith("_cpu")):
        base = ref.name[:-4]
        names = [p.name for p in ref.params]
        g = torch.Generator().manual_seed(0)
        values = dict(sizes)
        for name, expr in lengths.items():
            n = eval(expr, {}, dict(sizes))  # noqa: S307 - expressions from FILES above
            values[name] = (torch.randint(0, ints[name], (n,), generator=g, dtype=torch.int32)
                            if name in ints else torch.rand(n, generator=g) * 2 - 1)
        if base == "crossentropy_forward":  # llm.c feeds probabilities in (0, 1)
            values["probs"] = torch.rand(values["probs"].numel(), generator=g) * 0.98 + 0.01
        if not set(names) <= set(values):
            continue
        expect = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
        for w in written:
            expect[w].fill_(float("nan"))
        getattr(lib, ref.name)(*_ctype_args(ref.params, expect))
        for lname, fn in inspect.getmembers(launchers, inspect.isfunction):
            if not re.fullmatch(rf"{re.escape(base)}\d+", lname):
                continue
            pnames = list(inspect.signature(fn).parameters)[1:]
            if pnames != names + ["block_size"]:
                continue
            for block in BLOCKS:
                args = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
                if bf16:
                    args = {k: (v.bfloat16() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
                            for k, v in args.items()}
                for w in written:
                    args[w].fill_(float("nan"))
                try:
                    fn(mod, *[args[n] for n in names], block)
                    bad = 0
                    for w in written:
                        ref_v, got = expect[w].double(), args[w].double()
                        ok = ~torch.isfinite(ref_v) | ((ref_v - got).abs() <= tol + ref_v.abs() * eps)
                        bad += int((~ok).sum())
                    rows.append((stem, lname, block, "match" if bad == 0 else f"MISMATCH ({bad} elements)"))
                except Exception as e:  # a launch that is refused is reported, not fatal
                    rows.append((stem, lname, block, f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}"))
    print(f"{stem}: load (translate + RTC) {load_s:.1f}s", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory")
    p.add_argument("--files", nargs="*", default=list(FILES))
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for stem in a.files:
            got = run_file(Path(a.directory), stem, tmp)
            for r in got:
                print(f"  {r[1]:32s} block {r[2]:5d} {r[3]}", flush=True)
            rows += got
    match = sum(r[3] == "match" for r in rows)
    kernels = {(r[0], r[1]) for r in rows}
    good = {(r[0], r[1]) for r in rows} - {(r[0], r[1]) for r in rows if r[3] != "match"}
    print(f"TOTAL runs {len(rows)} matched {match}; launchers {len(kernels)}, all blocks matched {len(good)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
