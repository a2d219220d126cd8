"""Compile jobs in worker subprocesses: an LLVM abort kills a worker, never the sweep.

Each worker (``python -m xvendor.tuning.workers``) imports the toolchain once and then
serves jobs, one JSON line in, one ``RESULT`` line out; importing torch + triton costs
seconds, so workers are reused. A worker that dies mid-job (LLVM ``abort()``, a segfault,
a timeout) turns that job into a failed record carrying its exit status and the tail of
its stderr, and is replaced for the next job.

A job: ``{"toolchain", "template", "arch", "config"}``; the toolchain names a module with
``compile_one(template, arch, config) -> raw artifacts`` (``TOOLCHAINS`` below, or a dotted
module path: out-of-tree toolchains and tests), and the
worker returns ``xvendor.tuning.resources.inspect(arch, raw)``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback

TOOLCHAINS = {"triton": "xvendor.triton.crosscompile", "flydsl": "xvendor.rocm.crosscompile"}
_MARK = "XVENDOR-RESULT "


def run_job(job: dict) -> dict:
    """Compile and inspect one job in this process (the worker's body)."""
    from . import resources
    name = job["toolchain"]
    mod = importlib.import_module(TOOLCHAINS.get(name, name))
    try:
        raw = mod.compile_one(job["template"], job["arch"], job["config"])
    except Exception as e:  # a compile error is a result, not a crash
        msg = " ".join(f"{type(e).__name__}: {e}".split())
        return {"ok": False, "reason": f"compile failed: {msg[:400]}"}
    return resources.inspect(job["arch"], raw)


def serve() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # compiler chatter must not corrupt the result stream
    for line in sys.stdin:
        job = json.loads(line)
        try:
            result = run_job(job)
        except Exception:
            result = {"ok": False, "reason": "inspection failed: " +
                      " ".join(traceback.format_exc().split())[-400:]}
        out.write(_MARK + json.dumps(result) + "\n")
        out.flush()


class Worker:
    """One worker process, restarted after it dies."""

    def __init__(self, env: dict):
        self.env = env
        self.proc = None
        self.stderr = None

    def _start(self):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "xvendor.tuning.workers"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, env=self.env)

    def run(self, job: dict, timeout_s: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        timer = threading.Timer(timeout_s, self.proc.kill)
        timer.start()
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    return self._died(timer, timeout_s)
                if line.startswith(_MARK):
                    return json.loads(line[len(_MARK):])
        except (BrokenPipeError, OSError):
            return self._died(timer, timeout_s)
        finally:
            timer.cancel()

    def _died(self, timer, timeout_s) -> dict:
        code = self.proc.wait()
        self.stderr.seek(0)
        tail = " ".join(self.stderr.read()[-600:].split())
        self.proc = None
        why = (f"timed out after {timeout_s:.0f} s" if not timer.is_alive() and code < 0
               else f"compiler process died (exit status {code})")
        return {"ok": False, "reason": f"{why}: {tail[-400:]}"}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def worker_env(triton_cache_dir: str | None) -> dict:
    env = dict(os.environ)
    # the worker must import this very xvendor, installed or not
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.pop("TRITON_INTERPRET", None)  # cross-compiles need the real compiler
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # 3.9's default, stated: no warning
    if triton_cache_dir:
        env["TRITON_CACHE_DIR"] = triton_cache_dir
    return env


if __name__ == "__main__":
    serve()
