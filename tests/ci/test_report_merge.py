"""`xvendor ci report merge`: one matrix page from per-cell report folders (as a CI's final
job downloads them), in Markdown and HTML; the HTML rendered by a real headless Chromium
(its DOM and a screenshot's colours), from a local file only."""

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from xvendor.ci import matrix as ci_matrix
from xvendor.ci import report_merge
from xvendor.ci import run as ci_run
from xvendor.ci.junit import Failure, TierResult

pytestmark = pytest.mark.l0
GOLDEN = Path(__file__).parent / "golden"
CPU, GFX950 = "torch215-cxx11-cpu-x86_64-linux-py311", "torch215-cxx11-rocm72-x86_64-linux-gfx950-py311"
NIGHTLY = "torch216-cxx11-cpu-x86_64-linux-py311-nightly"
SM90 = "torch215-cxx11-cu132-x86_64-linux-sm_90-py311"


def _cell_report(folder: Path, name: str, tiers, results, failures=(), rc=0, **extra):
    cell = ci_matrix.load(GOLDEN / "matrix.toml").cell(name)
    summary = ci_run._summary(name, cell, tiers, rc, results, list(failures), [],
                              {"host": "runner-1", "commit": "abc123"})
    summary.update(extra)
    ci_run.write_report(folder, summary)


@pytest.fixture
def artifacts(tmp_path):
    """Per-cell artifact folders, as download-artifact lays them out."""
    root = tmp_path / "ci-reports"
    _cell_report(root / f"ci-report-{CPU}", CPU, ["l0", "l1"],
                 {"l0": TierResult(40, 0, 2), "l1": TierResult(12, 0, 0)})
    _cell_report(root / f"ci-report-{GFX950}", GFX950, ["l0", "l1", "l2"],
                 {"l0": TierResult(40, 0, 0), "l1": TierResult(12, 0, 0),
                  "l2": TierResult(7, 1, 0)},
                 [Failure("l2", "tests/rocm/test_gemm.py::test_bf16[gfx950]", "failure",
                          "AssertionError: Tensor-likes are not close!\nMismatched elements: 3")],
                 rc=1)
    _cell_report(root / f"ci-report-{NIGHTLY}", NIGHTLY, ["l0"], {"l0": TierResult(0, 0, 5)},
                 rc=1, not_run=[{"tier": "l0", "skipped": 5,
                                 "reasons": {"needs toolchain triton (not installed)": 5}}])
    return root


def test_merge_builds_one_matrix_page(artifacts, tmp_path):
    out = tmp_path / "page"
    rc = report_merge.main([str(artifacts)], str(out), str(GOLDEN / "matrix.toml"))
    assert rc == 1  # gfx950 failed; the nightly is unstable and does not gate
    md = (out / "matrix.md").read_text()
    assert f"| [{CPU}](#cell-{CPU}) | ✅ passed | 40 passed, 0 failed, 2 skipped | " \
           "12 passed, 0 failed, 0 skipped | — |" in md
    assert f"| [{GFX950}](#cell-{GFX950}) | ❌ failed |" in md
    assert f"❌ failed (unstable) | 0 passed, 0 failed, 5 skipped (ran none) |" in md
    assert f"| {SM90} | no report (not run, or its job sent none) |" in md
    assert f"## {GFX950}" in md and "`tests/rocm/test_gemm.py::test_bf16[gfx950]` (l2): " \
        "AssertionError: Tensor-likes are not close! / Mismatched elements: 3" in md
    assert f"- report: ../ci-reports/ci-report-{GFX950}/report.md" in md
    assert "tier l0 ran no test: needs toolchain triton (not installed)" in md


def test_merge_errors_name_the_folder(tmp_path):
    with pytest.raises(ValueError, match="is not a folder"):
        report_merge.main([str(tmp_path / "nope")], str(tmp_path / "o"), None)
    (tmp_path / "a").mkdir()
    with pytest.raises(ValueError, match="no summary.json under"):
        report_merge.main([str(tmp_path / "a")], str(tmp_path / "o"), None)
    (tmp_path / "a" / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="is not a summary.json of `xvendor ci run`"):
        report_merge.main([str(tmp_path / "a")], str(tmp_path / "o"), None)


def test_merge_command_runs_from_the_cli(artifacts, tmp_path, capsys):
    from xvendor.ci import cli  # (tests/ci/test_no_torch: these modules import no torch)
    assert cli.main(["report", "merge", str(artifacts), "--out", str(tmp_path / "o")]) == 1
    assert f"failing: {GFX950}, {NIGHTLY}" in capsys.readouterr().out
    assert (tmp_path / "o" / "matrix.html").is_file()
    assert cli.main(["report", "merge", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err


class _Dom(HTMLParser):
    """Rows, links and ids of the DOM Chromium serialised."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "tr" and "data-cell" in a:
            self.rows.append((a["data-cell"], a["data-state"]))
        if tag == "a":
            self.links.append(a["href"])


def _chromium(*args, profile: Path) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("needs chromium (scripts/apt-packages.txt)")
    # A fresh profile, nothing fetched from the network: the page is a local file.
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={profile}"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=90)


@pytest.mark.l1
def test_the_matrix_page_renders_in_a_real_browser(artifacts, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    out = tmp_path / "page"
    report_merge.main([str(artifacts)], str(out), str(GOLDEN / "matrix.toml"))
    url = (out / "matrix.html").as_uri()
    proc = _chromium("--dump-dom", url, profile=tmp_path / "profile-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    assert dict(dom.rows) == {CPU: "pass", GFX950: "fail", NIGHTLY: "fail"}
    # Each failing cell links to its failures on the page, and to its own report.
    anchors = [h for h in dom.links if h.startswith("#")]
    assert sorted(anchors) == sorted([f"#cell-{GFX950}", f"#cell-{NIGHTLY}"])
    assert all(h[1:] in dom.ids for h in anchors)
    assert f"../ci-reports/ci-report-{GFX950}/report.html" in dom.links
    assert (out / f"../ci-reports/ci-report-{GFX950}/report.html").resolve().is_file()
    # Rendered: green and red tier cells on the screenshot.
    shot = tmp_path / "matrix.png"
    proc = _chromium(f"--screenshot={shot}", "--window-size=1400,900", url,
                     profile=tmp_path / "profile-shot")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    colours = PIL.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    count = {c: n for n, c in colours}
    green, red = count.get((0x2E, 0x7D, 0x32), 0), count.get((0xC6, 0x28, 0x28), 0)
    assert green > 2000 and red > 2000, (green, red)
