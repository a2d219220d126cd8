"""Where a CI report comes from: host, OS, CPU, GPUs with their driver and runtime versions
(as torch and the vendor's own tool report them, where present), torch's build, the
toolchain versions, the commit, and when. Every value is read here, on the machine; what
cannot be read is left out, never guessed.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

# The vendor tools that print GPU and driver versions, with the query that does it.
_VENDOR_TOOLS = (
    ("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]),
    ("amd-smi", ["amd-smi", "version"]),
    ("rocm-smi", ["rocm-smi", "--showdriverversion"]),
    ("xpu-smi", ["xpu-smi", "discovery", "--dump", "1,2"]),
    ("sycl-ls", ["sycl-ls"]),
)


def _first_line(cmd: list[str], cwd: str | None = None, timeout: float = 10) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return out.splitlines()[0].strip() if proc.returncode == 0 and out else None


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x {os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} x {os.cpu_count()}"


def _commit() -> str | None:
    for var in ("GITHUB_SHA", "CI_COMMIT_SHA"):
        if os.environ.get(var):
            return os.environ[var]
    return _first_line(["git", "rev-parse", "HEAD"]) if shutil.which("git") else None


def _torch() -> dict:
    try:
        import torch
    except Exception as e:  # reported as such; the tests will say more
        return {"torch": f"not importable ({type(e).__name__})"}
    info = {"torch": torch.__version__, "torch_git": getattr(torch.version, "git_version", "")}
    if torch.version.cuda:
        info["cuda_runtime"] = torch.version.cuda
    if torch.version.hip:
        info["hip_runtime"] = torch.version.hip
    gpus = []
    try:
        if torch.cuda.is_available():
            gpus += [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            gpus += [torch.xpu.get_device_name(i) for i in range(torch.xpu.device_count())]
    except Exception as e:  # a broken driver is a fact for the report
        gpus.append(f"device query failed: {type(e).__name__}: {e}")
    info["gpus"] = gpus
    return info


def collect(toolchains: dict, started: float, seconds: float) -> dict:
    """The provenance block: plain strings, for JUnit properties and the reports."""
    import datetime
    info = {"host": platform.node(), "os": _os_name(), "kernel": platform.release(),
            "cpu": _cpu(), "python": platform.python_version(), **_torch()}
    gpus = info.pop("gpus", [])
    info["gpus"] = "; ".join(gpus) if gpus else "none"
    for name, cmd in _VENDOR_TOOLS:
        if shutil.which(cmd[0]):
            line = _first_line(cmd)
            if line:
                info[name] = line
    for name, version in sorted(toolchains.items()):
        info[f"toolchain {name}"] = version
    info["commit"] = _commit() or "unknown (no git checkout, no CI commit variable)"
    info["started"] = datetime.datetime.fromtimestamp(started, datetime.timezone.utc) \
        .isoformat(timespec="seconds")
    info["duration_s"] = f"{seconds:.1f}"
    return {k: str(v) for k, v in info.items()}
