"""The package makes ld.lld reachable for FlyDSL by itself (l1: runs the real linker)."""

import os
import subprocess

import pytest

from xvendor.rocm import linker

pytestmark = pytest.mark.l1


def test_wrapper_runs_ziglang_lld(tmp_path, monkeypatch):
    pytest.importorskip("ziglang")
    monkeypatch.setenv("XVENDOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm-here"))
    root = linker.ensure_linker()
    assert os.environ["ROCM_PATH"] == root == str(tmp_path / "rocm-lld")
    lld = linker.rocm_linker()
    out = subprocess.run([str(lld), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "LLD" in out.stdout
    assert linker.ensure_linker() == root  # idempotent


def test_a_real_rocm_linker_is_kept(tmp_path, monkeypatch):
    fake_rocm = tmp_path / "rocm"
    lld = fake_rocm / "llvm" / "bin" / "ld.lld"
    lld.parent.mkdir(parents=True)
    lld.write_text("#!/bin/sh\n")
    lld.chmod(0o755)
    monkeypatch.setenv("ROCM_PATH", str(fake_rocm))
    assert linker.ensure_linker() == str(fake_rocm)
    assert os.environ["ROCM_PATH"] == str(fake_rocm)
