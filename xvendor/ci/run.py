"""``xvendor ci run``: detect what this machine can do, run the tiers that apply under
pytest (with the xvendor.testing plugin), and write JUnit XML plus a matrix report in
Markdown and HTML: cells x tiers with pass/fail/skip counts, and what each skip needs.
"""

from __future__ import annotations

import collections
import html
import importlib.metadata as md
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from . import matrix as ci_matrix


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
    for name, dist in (("triton", "triton"), ("flydsl", "flydsl"), ("oneapi", "intel-sycl-rt")):
        try:
            tools[name] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return Capabilities([i.vendor for i in infos], [i.arch for i in infos], tools,
                        ".".join(platform.python_version_tuple()[:2]))


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


def markdown_report(mx, cell, caps, tiers, results, rc) -> str:
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
    return "\n".join(lines) + "\n"


def html_report(mx, cell, caps, tiers, results, rc) -> str:
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
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>xvendor CI matrix</title>"
            f"<style>td,th{{border:1px solid #999;padding:4px}} .bad{{background:#fcc}}</style>"
            f"</head><body><h1>xvendor CI matrix report</h1>"
            f"<p>Cell: {esc(cell.name if cell else 'not in the matrix')}; tiers run: "
            f"{esc(', '.join(tiers))}; pytest exit code {rc}</p>"
            f"<table><tr><th>cell</th>{head}</tr>{''.join(body)}</table>"
            f"<h2>Skips: what they need</h2><ul>{skips}</ul></body></html>\n")


def run(tiers: list[str] | None, report_dir: str, test_path: str = "tests",
        matrix_file: str = "ci/matrix.toml", pytest_args: list[str] | None = None) -> int:
    caps = detect_capabilities()
    tiers = tiers or default_tiers(caps)
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", test_path, "--xv-tier", ",".join(tiers),
           f"--junitxml={junit}", "-o", "junit_family=xunit1", *(pytest_args or [])]
    print(f"xvendor ci run: tiers {','.join(tiers)} on {', '.join(sorted(set(caps.archs)))}: "
          f"{' '.join(cmd)}", flush=True)
    rc = subprocess.call(cmd)
    mx = ci_matrix.load(matrix_file) if Path(matrix_file).is_file() else \
        ci_matrix.Matrix((), ())
    results = parse_junit(junit) if junit.is_file() else {}
    cell = matching_cell(mx, caps)
    (out / "report.md").write_text(markdown_report(mx, cell, caps, tiers, results, rc))
    (out / "report.html").write_text(html_report(mx, cell, caps, tiers, results, rc))
    print(f"xvendor ci run: report in {out}/report.md, {out}/report.html, JUnit {junit}")
    if rc == 5:
        print("xvendor ci run: no test ran: that is a failure", file=sys.stderr)
    totals = [sum(getattr(r, k) for r in results.values()) for k in ("passed", "failed", "skipped")]
    print("xvendor: {} passed, {} failed, {} skipped".format(*totals), flush=True)  # last line
    return rc
