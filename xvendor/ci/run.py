"""``xvendor ci run``: detect what this machine can do, run the tiers that apply under
pytest (with the xvendor.testing plugin), and write JUnit XML (suites named after the cell,
provenance as properties), ``summary.json`` and a report in Markdown and HTML: counts per
tier, failing tests by name, tiers that ran nothing, what each skip needs, provenance.

A report names a cell only when this environment passes that cell's check (as
``xvendor ci versions --cell``); otherwise it is "unlabelled (this machine: ...)", and a dry
run (``--xv-arch``, ``XVENDOR_ARCH``) says so. A tier that selected tests and ran none of
them fails (the plugin's rule). A failed cell check still writes the report, saying why.

Told which cell it runs (``--cell NAME`` or ``$XVENDOR_CI_CELL``), it first checks that this
environment is that cell (Python, machine, torch version and build, each toolchain's
distributions) and, for a hardware tier, that the cell's arch is present; it stops with
what differs otherwise. ``xvendor ci versions`` is the same check on its own.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import junit, matrix as ci_matrix, report_cell
from .junit import TierResult  # noqa: F401  (re-exported)

CELL_ENV = "XVENDOR_CI_CELL"


class CellMismatch(ValueError):
    """This machine or environment is not the cell it was told it is."""


@dataclass
class Capabilities:
    vendors: list
    archs: list
    toolchains: dict
    python: str

    @property
    def has_accelerator(self) -> bool:
        return any(v != "cpu" for v in self.vendors)


def detect_capabilities() -> Capabilities:
    from .. import devices
    infos = [devices.detect(d) for d in devices.present_devices()]
    tools = {}
    for name, variants in ci_matrix.TOOLCHAIN_PACKAGES.items():
        dists = dict.fromkeys(d for ds in variants.values() for d in ds)
        found = next((v for v in map(dist_version, dists) if v is not None), None)
        if found is not None:
            tools[name] = found
    return Capabilities([i.vendor for i in infos], [i.arch for i in infos], tools,
                        ".".join(platform.python_version_tuple()[:2]))


def dist_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def torch_version() -> str:
    # torch.__version__, not the distribution's: PyPI's wheels leave the build label
    # (+cu132) out of their metadata.
    try:
        import torch
    except Exception as e:  # a broken install is a mismatch to report, not a crash
        return f"not importable ({type(e).__name__})"
    return torch.__version__


@dataclass
class VersionCheck:
    what: str  # python, machine, torch, or a toolchain's distribution
    wanted: str  # as the cell asks for it ("" with no cell)
    installed: str | None
    ok: bool = True


def check_cell(cell: ci_matrix.Cell) -> list[VersionCheck]:
    """What this environment has against what ``cell`` says, one row per cell field that
    an install decides."""
    runtime = ci_matrix.RUNTIMES[cell.runtime]
    py, machine, torch = platform.python_version(), platform.machine(), torch_version()
    rows = [VersionCheck("python", cell.python, py,
                         ci_matrix.version_matches(py, cell.python)),
            VersionCheck("machine", cell.machine, machine, machine == cell.machine),
            VersionCheck("torch", f"{cell.torch_pin}, build +{runtime.local} "
                                  f"(runtime {cell.runtime})", torch,
                         ci_matrix.version_matches(torch, cell.torch)
                         and torch.partition("+")[2] == runtime.local)]
    for name, version in cell.toolchains.items():
        for dist in ci_matrix.packages(name, cell.runtime):
            have = dist_version(dist)
            wanted = ci_matrix.pin(dist, version) + ("" if dist == name else f" ({name})")
            rows.append(VersionCheck(dist, wanted, have,
                                     have is not None and ci_matrix.version_matches(have, version)))
    return rows


def installed_versions() -> list[VersionCheck]:
    """Python, machine, torch and every toolchain distribution xvendor knows, as installed."""
    dists = dict.fromkeys(d for variants in ci_matrix.TOOLCHAIN_PACKAGES.values()
                          for ds in variants.values() for d in ds)
    return [VersionCheck("python", "", platform.python_version()),
            VersionCheck("machine", "", platform.machine()),
            VersionCheck("torch", "", torch_version()),
            *(VersionCheck(d, "", dist_version(d)) for d in dists)]


def format_versions(rows: list[VersionCheck]) -> str:
    table = [("", "installed", "cell wants", "")] + [
        (r.what, r.installed or "not installed", r.wanted or "-",
         "" if not r.wanted else "ok" if r.ok else "MISMATCH") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in table)


def require_cell(cell: ci_matrix.Cell, rows: list[VersionCheck]) -> None:
    bad = [r for r in rows if not r.ok]
    if bad:
        raise CellMismatch(f"ci: this environment is not cell {cell.name}: " + "; ".join(
            f"{r.what}: the cell wants {r.wanted}, installed is {r.installed or 'nothing'}"
            for r in bad))


def default_tiers(caps: Capabilities) -> list[str]:
    return ["l0", "l1", "l2"] if caps.has_accelerator else ["l0", "l1"]


def label_cell(mx: ci_matrix.Matrix, caps: Capabilities):
    """The cell this environment is, as its check says (the first cell of this machine's
    arch whose check passes), or None."""
    arch = next((a for a, v in zip(caps.archs, caps.vendors) if v != "cpu"), "cpu")
    for c in mx.cells:
        if c.arch == arch and all(r.ok for r in check_cell(c)):
            return c
    return None


def parse_junit(path: Path) -> dict[str, TierResult]:
    """Per-tier counts from pytest's JUnit XML (the plugin records each test's tier)."""
    return junit.parse(path)[0]


def _machine(caps: Capabilities) -> str:
    tools = ", ".join(f"{k} {v}" for k, v in caps.toolchains.items()) or "no toolchains"
    return (f"{', '.join(sorted(set(caps.archs)))}, Python {caps.python}, torch "
            f"{torch_version()}, {tools}")


def dry_run_arch(pytest_args) -> str | None:
    args = list(pytest_args or ())
    for i, a in enumerate(args):
        if a == "--xv-arch" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--xv-arch="):
            return a.split("=", 1)[1]
    return os.environ.get("XVENDOR_ARCH") or None


def _summary(label, cell, tiers, rc, results, failures, versions, provenance, **extra):
    not_run = [{"tier": t, "skipped": r.skipped, "reasons": dict(r.skip_reasons.most_common())}
               for t, r in sorted(results.items())
               if t in tiers and r.skipped and not (r.passed or r.failed)]
    return {"schema": 1, "label": label, "cell": cell.name if cell else None, "tiers": tiers,
            "rc": rc, "status": "passed" if rc == 0 else "failed", "reason": None,
            "dry_run": None,
            "results": {t: {"passed": r.passed, "failed": r.failed, "skipped": r.skipped,
                            "skip_reasons": dict(r.skip_reasons.most_common())}
                        for t, r in results.items()},
            "not_run": not_run, "failures": [dataclasses.asdict(f) for f in failures],
            "versions": [dataclasses.asdict(v) for v in versions or ()],
            "provenance": provenance, **extra}


def write_report(out: Path, summary: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "report.md").write_text(report_cell.markdown(summary))
    (out / "report.html").write_text(report_cell.html_page(summary))


def write_check_failure(report_dir, matrix_file, cell, rows, why: str, started=None) -> None:
    """The report of a job whose cell check failed: nothing ran, and this is why."""
    from . import provenance
    started = started or time.time()
    caps_tools = {r.what: r.installed or "not installed" for r in rows[3:]}
    summary = _summary(f"{cell.name} (cell check failed)", cell, list(cell.tiers), 2, {}, [],
                       rows, provenance.collect(caps_tools, started, time.time() - started))
    summary.update(status="cell check failed", reason=why)
    write_report(Path(report_dir), summary)
    print(f"xvendor ci: report in {report_dir}/report.md: {why}", file=sys.stderr)


def _cell_for_run(name: str, matrix_file: str, tiers: list[str] | None, report_dir: str,
                  started: float):
    """The named cell, checked against this environment; and the tiers to run (the cell's
    unless told fewer). A failed check writes the report first."""
    cell = ci_matrix.load(matrix_file).cell(name)
    rows = check_cell(cell)
    print(f"xvendor ci run: cell {cell.name}\n{format_versions(rows)}", flush=True)
    try:
        require_cell(cell, rows)
        extra = [t for t in tiers or () if t not in cell.tiers]
        if extra:
            raise CellMismatch(f"ci run: --tier {','.join(extra)} is not among cell "
                               f"{cell.name}'s tiers {list(cell.tiers)}")
    except CellMismatch as e:
        write_check_failure(report_dir, matrix_file, cell, rows, str(e), started)
        raise
    return cell, rows, list(tiers or cell.tiers)


def run(tiers: list[str] | None, report_dir: str, test_path: str | None = None,
        matrix_file: str = "ci/matrix.toml", pytest_args: list[str] | None = None,
        cell_name: str | None = None) -> int:
    """Run ``tiers`` (by default: the cell's, else what this machine can run) on
    ``test_path`` (by default what pytest's own configuration collects). With ``cell_name``
    (a cell of ``matrix_file``), first check that this environment is that cell."""
    from . import provenance
    started = time.time()
    cell = versions = None
    if cell_name:
        cell, versions, tiers = _cell_for_run(cell_name, matrix_file, tiers, report_dir,
                                              started)
    caps = detect_capabilities()
    if cell is not None and cell.vendor != "cpu" and set(tiers) & ci_matrix.HARDWARE_TIERS \
            and cell.arch not in caps.archs:
        why = (f"ci run: cell {cell.name} runs hardware tiers on a {cell.arch}, and this "
               f"machine has {', '.join(sorted(set(caps.archs)))}")
        write_check_failure(report_dir, matrix_file, cell, versions, why, started)
        raise CellMismatch(why)
    tiers = tiers or default_tiers(caps)
    dry = dry_run_arch(pytest_args)
    mx = ci_matrix.load(matrix_file) if Path(matrix_file).is_file() else \
        ci_matrix.Matrix((), ())
    if cell is None and not dry:
        cell = label_cell(mx, caps)
    label = cell.name if cell and not dry else f"unlabelled (this machine: {_machine(caps)})"
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    xml = out / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", *([test_path] if test_path else []),
           "--xv-tier", ",".join(tiers), f"--junitxml={xml}", "-o", "junit_family=xunit1",
           *(pytest_args or [])]
    print(f"xvendor ci run: tiers {','.join(tiers)} on {', '.join(sorted(set(caps.archs)))}"
          f" as {label}: {' '.join(cmd)}", flush=True)
    # The cell names this run's environment; a run that a test starts is another project's.
    env = {k: v for k, v in os.environ.items() if k != CELL_ENV}
    rc = subprocess.call(cmd, env=env)
    results, failures = junit.parse(xml) if xml.is_file() else ({}, [])
    prov = provenance.collect(caps.toolchains, started, time.time() - started)
    if xml.is_file():
        junit.label_suites(xml, label, {"xv_cell": label, **prov})
    summary = _summary(label, cell if not dry else None, tiers, rc, results, failures,
                       versions, prov)
    if summary["not_run"] and rc == 0:  # the plugin's rule, kept if the plugin was off
        summary.update(rc=1, status="failed")
        rc = 1
    if dry:
        summary["dry_run"] = (f"accelerators relabelled as {dry} (--xv-arch / XVENDOR_ARCH): "
                              f"requires_arch tests below l2 ran without that device; not a "
                              f"result for any cell")
    if rc == 5:
        summary["reason"] = "no test ran: that is a failure"
        print("xvendor ci run: no test ran: that is a failure", file=sys.stderr)
    elif rc not in (0, 1):
        summary["reason"] = f"pytest stopped with exit code {rc} (collection or usage error)"
    write_report(out, summary)
    print(f"xvendor ci run: report in {out}/report.md, {out}/report.html, JUnit {xml}")
    for n in summary["not_run"]:
        print(f"xvendor ci run: tier {n['tier']} ran no test ({n['skipped']} skipped): "
              + "; ".join(n["reasons"]), file=sys.stderr)
    totals = [sum(getattr(r, k) for r in results.values()) for k in ("passed", "failed", "skipped")]
    print("xvendor: {} passed, {} failed, {} skipped".format(*totals), flush=True)  # last line
    return rc
