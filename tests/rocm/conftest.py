"""Fixtures of the FlyDSL tests: one cold compile cache per session (each config compiles
once), and an MLIR context for the layout proofs."""

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xvendor-flydsl-compile-cache")


@pytest.fixture(scope="module")
def mlir():
    """An MLIR context and insertion point, so FlyDSL's layout algebra evaluates on the CPU
    (the layout proofs)."""
    pytest.importorskip("flydsl")
    from flydsl._mlir import ir
    ctx = ir.Context()
    ctx.load_all_available_dialects()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            yield


def _compile_in_child(jobs, mem_pattern: str) -> list[dict]:
    """Compile ``jobs`` [(template, arch, Config)] with ``crosscompile.compile_one`` in one
    child process (an LLVM abort must not kill pytest); each record is ``resources.inspect``'s
    plus ``mem``: a Counter of the ISA's instructions matching ``mem_pattern``."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    pytest.importorskip("flydsl")
    pytest.importorskip("ziglang")
    code = (
        "import json, re, sys\nfrom collections import Counter\n"
        "from xvendor.rocm import crosscompile\nfrom xvendor.tuning import resources\n"
        "rx = re.compile(sys.argv[1])\nout = []\n"
        "for t, a, c in json.loads(sys.argv[2]):\n"
        "    raw = crosscompile.compile_one(t, a, c)\n"
        "    out.append(dict(resources.inspect(a, raw), mem=Counter(rx.findall(raw['asm']))))\n"
        "print('RESULT' + json.dumps(out))\n")
    payload = json.dumps([(t, a, c.to_dict()) for t, a, c in jobs])
    proc = subprocess.run([sys.executable, "-c", code, mem_pattern, payload],
                          capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[6:])


@pytest.fixture(scope="session")
def compile_in_child():
    """``_compile_in_child`` for module fixtures that compile a batch of FlyDSL jobs."""
    return _compile_in_child
