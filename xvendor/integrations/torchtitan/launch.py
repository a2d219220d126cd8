"""Start a torchtitan training under torchrun with the CPU launcher and read back what it
did: ``start(...)`` / ``Training.result()``. Tests and benchmarks use it; it sends nothing
beyond 127.0.0.1.

    t = start(workdir, ["--module", "llama3", "--config", "llama3_debugmodel", ...], nproc=2)
    result = t.result()          # waits; raises with the log's tail if the run failed
    result.losses, result.calls  # per step (rank 0); per rank {op: n}
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .counts import ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Result:
    steps: list[list[float]]          # rank 0: [step, loss, grad_norm]
    calls: list[dict[str, int]]       # per rank
    log: str

    @property
    def losses(self) -> list[float]:
        return [s[1] for s in self.steps]


class Training:
    def __init__(self, proc: subprocess.Popen, counts_dir: Path, log_path: Path, nproc: int):
        self.proc, self.counts_dir, self.log_path, self.nproc = proc, counts_dir, log_path, nproc

    def result(self, timeout: float = 300) -> Result:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "timeout"
        log = self.log_path.read_text(errors="replace")
        if rc != 0:
            raise RuntimeError(f"torchtitan run failed ({rc}); log tail:\n{log[-4000:]}")
        ranks = [json.loads((self.counts_dir / f"rank{r}.json").read_text())
                 for r in range(self.nproc)]
        return Result(steps=ranks[0]["steps"], calls=[r["calls"] for r in ranks], log=log)


def start(workdir: str | Path, argv: list[str], *, nproc: int = 1, name: str = "run",
          env: dict[str, str] | None = None) -> Training:
    """Launch ``torchrun --nproc-per-node nproc -m xvendor.integrations.torchtitan.run argv``
    in ``workdir`` (which holds ``tests/assets``, see ``assets.make_assets``); one OpenMP
    thread per rank."""
    workdir = Path(workdir)
    counts_dir, log_path = workdir / f"{name}.counts", workdir / f"{name}.log"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", "xvendor.integrations.torchtitan.run", *argv,
           "--dump-folder", str(workdir / f"{name}.out")]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", ENV: str(counts_dir), **(env or {})}
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=workdir, env=full_env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return Training(proc, counts_dir, log_path, nproc)
