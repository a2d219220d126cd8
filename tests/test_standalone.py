"""The repository stands alone: a user's clone has none of the team's notes, so no code,
doc, test or kernel cites them (regression: devices.py, the SYCL headers and the porting
guide did)."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.l0

ROOT = Path(__file__).resolve().parents[1]
# Built from parts so that this file does not match itself.
NOTES = ("TOOLCHAINS" + ".md", "DESIGN" + ".md", "../" + "shared", "shared/" + "TOOLCHAINS")
TEXT = {".py", ".md", ".cpp", ".h", ".toml", ".yml", ".yaml", ".sh", ".txt", ".cfg"}


def _files():
    for folder in ("xvendor", "tests", "docs", "bench", "examples", "scripts", "sycl_kernels",
                   "ci", ".github", ".ci"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and (path.suffix in TEXT or path.parent.name == ".ci"):
                yield path
    yield from (ROOT / name for name in ("README.md", "Makefile", "pyproject.toml"))


def test_no_file_cites_the_team_notes():
    hits = [f"{p.relative_to(ROOT)}: {note}" for p in _files()
            for note in NOTES if note in p.read_text(errors="replace")]
    assert not hits, hits


def test_the_scan_sees_the_files_it_should():
    seen = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert {"xvendor/devices.py", "sycl_kernels/gemm_tile.h", "docs/porting-cuda-to-sycl.md",
            "README.md", ".ci/run"} <= seen
