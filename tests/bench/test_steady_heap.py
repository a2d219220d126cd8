"""bench/steady_heap.py: ``--heap steady`` really re-executes the benchmark with glibc's
trimming held off, and ``--heap default`` leaves the process as it started."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import steady_heap  # noqa: E402

PROBE = """
import os, sys
sys.path.insert(0, {bench!r})
import steady_heap
print(steady_heap.ensure(sys.argv[1], __file__))
print(os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("MALLOC_MMAP_THRESHOLD_"))
"""


def _run(tmp_path, mode):
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(bench=str(BENCH)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.splitlines()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_steady_reexecutes_with_glibc_settings(tmp_path):
    title, values = _run(tmp_path, "steady")
    assert title.startswith("heap steady")
    assert values.split() == [steady_heap.STEADY["MALLOC_TRIM_THRESHOLD_"],
                              steady_heap.STEADY["MALLOC_MMAP_THRESHOLD_"]]


def test_default_leaves_the_process_alone(tmp_path):
    title, values = _run(tmp_path, "default")
    assert title.startswith("heap as the process started")
    assert values == "None None"


def test_no_reexec_when_imported_by_another_program():
    # ensure() inside a process that is not the benchmark (a test, a notebook) must not
    # replace that process
    if all(os.environ.get(k) == v for k, v in steady_heap.STEADY.items()):
        pytest.skip("this process already runs with the steady settings")
    assert steady_heap.ensure("steady", str(BENCH / "vs_torch.py")).startswith("heap as")


def test_bad_mode_is_named():
    with pytest.raises(ValueError, match="--heap"):
        steady_heap.ensure("sometimes", __file__)
