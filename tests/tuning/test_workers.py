"""Worker processes survive what LLVM does to them: abort, exit, hang (l1: real processes)."""

import os
import textwrap
from pathlib import Path

import pytest

from xvendor.tuning import sweep
from xvendor.tuning.workers import Worker, worker_env

pytestmark = pytest.mark.l1

ROOT = Path(__file__).resolve().parents[2]

# A stand-in toolchain: "abort" kills the process the way an LLVM assertion does.
FAKE = textwrap.dedent('''
    import os, time
    ASM = "; NumVgprs: 64\\n; NumAgprs: 0\\n; ScratchSize: 0\\n v_mfma_f32_16x16x32_bf16 a[0:3]\\n"

    def compile_one(template, arch, config):
        if template == "abort":
            print("LLVM ERROR: Cannot select: intrinsic", flush=True)  # on stdout, like LLVM
            os.abort()
        if template == "hang":
            time.sleep(60)
        if template == "error":
            raise ValueError("bad config")
        return {"vendor": "amd", "asm": ASM, "shared": 1024, "num_warps": 4, "compile_s": 0.0}
''')


@pytest.fixture
def worker(tmp_path):
    (tmp_path / "fake_toolchain.py").write_text(FAKE)
    env = worker_env(None)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    w = Worker(env)
    yield w
    w.close()


def job(template):
    return {"toolchain": "fake_toolchain", "template": template, "arch": "gfx950",
            "config": {}}


def test_abort_is_a_failed_record_and_the_next_job_runs(worker):
    ok = worker.run(job("fine"), 60)
    assert ok["ok"] and ok["vgpr"] == 64 and ok["mma_instr"] == "v_mfma_f32_16x16x32_bf16"
    dead = worker.run(job("abort"), 60)
    assert not dead["ok"] and "compiler process died" in dead["reason"]
    assert "-6" in dead["reason"]  # SIGABRT
    again = worker.run(job("fine"), 60)  # a fresh worker took over
    assert again["ok"]


def test_exception_is_a_compile_failure_not_a_crash(worker):
    rec = worker.run(job("error"), 60)
    assert not rec["ok"] and rec["reason"] == "compile failed: ValueError: bad config"
    assert worker.proc is not None and worker.proc.poll() is None  # same worker lives on


def test_hang_times_out(worker):
    rec = worker.run(job("hang"), 3)
    assert not rec["ok"] and rec["reason"].startswith("timed out after 3 s")
    assert worker.run(job("fine"), 60)["ok"]


def test_cache_key_separates_what_changes_the_code():
    from xvendor.triton import configs
    tc = sweep.toolchain("triton")
    a, b = configs.SPACES["gfx950"]["gemm"][:2]
    k = sweep.ResultCache.key
    assert k(tc, "gemm", "h", "gfx950", a) == k(tc, "gemm", "h", "gfx950", a)
    assert len({k(tc, "gemm", "h", "gfx950", a), k(tc, "gemm", "h", "gfx950", b),
                k(tc, "gemm", "h", "gfx942", a), k(tc, "gemm", "h2", "gfx950", a),
                k(tc, "grouped_mm", "h", "gfx950", a)}) == 5
    assert tc.source_hash("gemm") != tc.source_hash("grouped_mm")
