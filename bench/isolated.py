"""Shared by the FlyDSL static reports (``flydsl_gemm_isa.py``, ``flydsl_scaled.py``): each
compile runs in a fresh interpreter, because an LLVM error aborts the whole process; the
report script re-invokes itself with ``--one JOB`` and reads back one JSON record."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parser(description: str, targets: tuple[str, ...]) -> argparse.ArgumentParser:
    """The options every report takes: targets, which configs, a JSON dump, the hidden --one."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--targets", default=",".join(targets))
    p.add_argument("--configs", choices=("default", "all"), default="default")
    p.add_argument("--json", type=Path)
    p.add_argument("--one", help=argparse.SUPPRESS)
    return p


def answer_one(args, compile_and_count) -> bool:
    """In the child: run the one job of ``--one`` and print its record. False in the parent."""
    if not args.one:
        return False
    print(json.dumps(compile_and_count(*json.loads(args.one))))
    return True


def run(script: str, job: list, failed: dict, timeout_s: float = 600) -> dict:
    """``script --one job`` in a fresh interpreter; a crash becomes ``failed`` saying so."""
    proc = subprocess.run([sys.executable, str(Path(script).resolve()), "--one", json.dumps(job)],
                          capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {**failed, "ok": False,
                "reason": f"compile process exited {proc.returncode}: {proc.stderr[-800:]}"}
    return json.loads(lines[-1])


def summarize(records: list[dict], json_path: Path | None) -> int:
    """Write the records (``--json``), print the verdict line, return the exit status."""
    if json_path:
        json_path.write_text(json.dumps(records, indent=1))
    bad = [r for r in records if not r["ok"] or r.get("spills") or r.get("scratch")]
    print(f"{len(records) - len(bad)}/{len(records)} code objects ok, no spills, no scratch")
    return 1 if bad else 0
