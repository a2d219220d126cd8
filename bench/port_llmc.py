"""`xvendor port` on karpathy/llm.c's dev/cuda: kernels translated / compiled, translation
time per file, cold and warm SYCL RTC build time (OpenCL CPU device).

    python bench/port_llmc.py /path/to/llm.c/dev/cuda [--json out.json]

Each file is built in a fresh process twice: first with an empty SYCL persistent cache
(cold), then with the cache the first run filled (warm). The corpus is read in place and
never copied here; nothing in the tool knows about it. Not measured yet: numerical
agreement with each file's own *_cpu reference (needs the file's main() driver ported).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(path: str) -> dict:
    from xvendor.port import build
    t0 = time.perf_counter()
    t = build.translate_file(path)
    translate_s = time.perf_counter() - t0
    res = build.compile_translation(path)
    kernels = res.translation.kernels
    return {"file": Path(path).name, "translate_s": round(translate_s, 3),
            "build_s": round(res.seconds, 2), "rounds": res.rounds,
            "kernels": len(t.kernels),
            "translated": sum(k.status == "ok" for k in t.kernels),
            "compiled": sum(k.status == "ok" and bool(k.instantiations) for k in kernels),
            "verdicts": {k.name: (k.status + (": " + k.reason.splitlines()[0][:160] if k.reason else ""))
                         for k in kernels},
            "lints": {k.name: k.lints for k in kernels if k.lints}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory")
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(a.one)))
        return 0
    files = sorted(Path(a.directory).glob("*.cu"))
    rows = []
    for f in files:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, XVENDOR_CACHE_DIR=cache)
            runs = []
            for _ in ("cold", "warm"):
                r = subprocess.run([sys.executable, __file__, a.directory, "--one", str(f)],
                                   env=env, capture_output=True, text=True)
                runs.append(json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0
                            else {"file": f.name, "error": r.stderr[-2000:]})
        row = runs[0]
        row["warm_build_s"] = runs[1].get("build_s")
        rows.append(row)
        print(f"{f.name:40s} kernels {row.get('kernels', '?'):>3} translated "
              f"{row.get('translated', '?'):>3} compiled {row.get('compiled', '?'):>3} "
              f"translate {row.get('translate_s', '?')}s cold {row.get('build_s', '?')}s "
              f"warm {row.get('warm_build_s', '?')}s", flush=True)
    tot = {k: sum(r.get(k, 0) for r in rows) for k in ("kernels", "translated", "compiled")}
    print(f"TOTAL kernels {tot['kernels']} translated {tot['translated']} compiled {tot['compiled']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "total": tot}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
