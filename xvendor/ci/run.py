"""``xvendor ci run``: detect what this machine can do, run the tiers that apply under
pytest (with the xvendor.testing plugin), and write JUnit XML plus a matrix report in
Markdown and HTML: cells x tiers with pass/fail/skip counts, and what each skip needs.

Told which cell it runs (``--cell NAME`` or ``$XVENDOR_CI_CELL``), it first checks that this
environment is that cell (Python, machine, torch version and build, each toolchain's
distributions) and, for a hardware tier, that the cell's arch is present; it stops with
what differs otherwise. ``xvendor ci versions`` is the same check on its own.
"""

from __future__ import annotations

import collections
import html
import importlib.metadata as md
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from . import matrix as ci_matrix

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


def matching_cell(mx: ci_matrix.Matrix, caps: Capabilities):
    """The matrix cell this machine stands for: its main device's arch, then Python."""
    arch = next((a for a, v in zip(caps.archs, caps.vendors) if v != "cpu"), "cpu")
    fits = [c for c in mx.cells if c.arch == arch]
    return next((c for c in fits if c.python == caps.python), fits[0] if fits else None)


@dataclass
class TierResult:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    skip_reasons: collections.Counter = field(default_factory=collections.Counter)


def parse_junit(path: Path) -> dict[str, TierResult]:
    """Per-tier counts from pytest's JUnit XML (the plugin records each test's tier)."""
    tiers: dict[str, TierResult] = collections.defaultdict(TierResult)
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        res = tiers[props.get("xv_tier", "l0")]
        if case.find("failure") is not None or case.find("error") is not None:
            res.failed += 1
        elif (skip := case.find("skipped")) is not None:
            res.skipped += 1
            res.skip_reasons[_reason(skip.get("message", ""))] += 1
        else:
            res.passed += 1
    return dict(tiers)


def _reason(message: str) -> str:
    return message.split(": ", 1)[1] if message.startswith("Skipped: ") or \
        message.startswith("Skipped:") else message


def _rows(mx, cell, tiers, results):
    for c in mx.cells:
        cells = []
        for t in ci_matrix.TIERS:
            if t not in c.tiers:
                cells.append("—")
            elif cell is not None and c.name == cell.name and t in tiers:
                r = results.get(t, TierResult())
                cells.append(f"{r.passed} passed, {r.failed} failed, {r.skipped} skipped")
            else:
                cells.append(f"not run here (runner {c.runner})")
        yield c, cells


def markdown_report(mx, cell, caps, tiers, results, rc, versions=None) -> str:
    lines = ["# xvendor CI matrix report", "",
             f"This machine: {', '.join(sorted(set(caps.archs)))}; Python {caps.python}; "
             f"toolchains: {', '.join(f'{k} {v}' for k, v in caps.toolchains.items()) or 'none'}",
             f"Cell: {cell.name if cell else 'not in the matrix'}; tiers run: {', '.join(tiers)}; "
             f"pytest exit code {rc}", "",
             "| cell | " + " | ".join(ci_matrix.TIERS) + " |",
             "|---|" + "---|" * len(ci_matrix.TIERS)]
    for c, cells in _rows(mx, cell, tiers, results):
        lines.append(f"| {c.name} | " + " | ".join(cells) + " |")
    lines += ["", "## Skips: what they need", ""]
    reasons = collections.Counter()
    for r in results.values():
        reasons.update(r.skip_reasons)
    lines += [f"- {n} × {why}" for why, n in reasons.most_common()] or ["- none"]
    if versions:
        lines += ["", "## Installed vs the cell", "", "| | installed | cell wants |",
                  "|---|---|---|"]
        lines += [f"| {v.what} | {v.installed or 'not installed'} | {v.wanted} |"
                  for v in versions]
    return "\n".join(lines) + "\n"


def html_report(mx, cell, caps, tiers, results, rc, versions=None) -> str:
    esc = html.escape
    head = "".join(f"<th>{t}</th>" for t in ci_matrix.TIERS)
    body = []
    for c, cells in _rows(mx, cell, tiers, results):
        tds = "".join(f'<td class="{"bad" if " 0 failed" not in x and "failed" in x else ""}">'
                      f"{esc(x)}</td>" for x in cells)
        body.append(f"<tr><td>{esc(c.name)}</td>{tds}</tr>")
    reasons = collections.Counter()
    for r in results.values():
        reasons.update(r.skip_reasons)
    skips = "".join(f"<li>{n} × {esc(why)}</li>" for why, n in reasons.most_common()) or "<li>none</li>"
    installed = "".join(f"<li>{esc(v.what)}: {esc(v.installed or 'not installed')} (cell wants "
                        f"{esc(v.wanted)})</li>" for v in versions or ())
    installed = f"<h2>Installed vs the cell</h2><ul>{installed}</ul>" if installed else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>xvendor CI matrix</title>"
            f"<style>td,th{{border:1px solid #999;padding:4px}} .bad{{background:#fcc}}</style>"
            f"</head><body><h1>xvendor CI matrix report</h1>"
            f"<p>Cell: {esc(cell.name if cell else 'not in the matrix')}; tiers run: "
            f"{esc(', '.join(tiers))}; pytest exit code {rc}</p>"
            f"<table><tr><th>cell</th>{head}</tr>{''.join(body)}</table>"
            f"<h2>Skips: what they need</h2><ul>{skips}</ul>{installed}</body></html>\n")


def _cell_for_run(name: str, matrix_file: str, tiers: list[str] | None):
    """The named cell, checked against this environment; and the tiers to run (the cell's
    unless told fewer)."""
    cell = ci_matrix.load(matrix_file).cell(name)
    rows = check_cell(cell)
    print(f"xvendor ci run: cell {cell.name}\n{format_versions(rows)}", flush=True)
    require_cell(cell, rows)
    extra = [t for t in tiers or () if t not in cell.tiers]
    if extra:
        raise CellMismatch(f"ci run: --tier {','.join(extra)} is not among cell {cell.name}'s "
                           f"tiers {list(cell.tiers)}")
    return cell, rows, list(tiers or cell.tiers)


def run(tiers: list[str] | None, report_dir: str, test_path: str = "tests",
        matrix_file: str = "ci/matrix.toml", pytest_args: list[str] | None = None,
        cell_name: str | None = None) -> int:
    """Run ``tiers`` (by default: the cell's, else what this machine can run). With
    ``cell_name`` (a cell of ``matrix_file``), first check that this environment is that cell."""
    cell = versions = None
    if cell_name:
        cell, versions, tiers = _cell_for_run(cell_name, matrix_file, tiers)
    caps = detect_capabilities()
    if cell is not None and cell.vendor != "cpu" and set(tiers) & ci_matrix.HARDWARE_TIERS \
            and cell.arch not in caps.archs:
        raise CellMismatch(f"ci run: cell {cell.name} runs hardware tiers on a {cell.arch}, "
                           f"and this machine has {', '.join(sorted(set(caps.archs)))}")
    tiers = tiers or default_tiers(caps)
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", test_path, "--xv-tier", ",".join(tiers),
           f"--junitxml={junit}", "-o", "junit_family=xunit1", *(pytest_args or [])]
    print(f"xvendor ci run: tiers {','.join(tiers)} on {', '.join(sorted(set(caps.archs)))}: "
          f"{' '.join(cmd)}", flush=True)
    # The cell names this run's environment; a run that a test starts is another project's.
    env = {k: v for k, v in os.environ.items() if k != CELL_ENV}
    rc = subprocess.call(cmd, env=env)
    mx = ci_matrix.load(matrix_file) if Path(matrix_file).is_file() else \
        ci_matrix.Matrix((), ())
    results = parse_junit(junit) if junit.is_file() else {}
    cell = cell or matching_cell(mx, caps)
    (out / "report.md").write_text(markdown_report(mx, cell, caps, tiers, results, rc, versions))
    (out / "report.html").write_text(html_report(mx, cell, caps, tiers, results, rc, versions))
    print(f"xvendor ci run: report in {out}/report.md, {out}/report.html, JUnit {junit}")
    if rc == 5:
        print("xvendor ci run: no test ran: that is a failure", file=sys.stderr)
    totals = [sum(getattr(r, k) for r in results.values()) for k in ("passed", "failed", "skipped")]
    print("xvendor: {} passed, {} failed, {} skipped".format(*totals), flush=True)  # last line
    return rc
