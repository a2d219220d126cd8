"""``xvendor port --compile-commands``: -I/-D from a compilation database (compdb.py)."""

import json

import pytest

from xvendor.port import cli, compdb

from .conftest import CUDA


@pytest.mark.l0
def test_flags_from_arguments_and_command(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("")
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([
        {"directory": str(tmp_path), "file": "other.cu", "command": "nvcc -DWRONG -c other.cu"},
        {"directory": str(tmp_path / "build"), "file": str(src),
         "arguments": ["nvcc", "-I../inc", "-isystem", "/opt/x/include", "--include-path=gen",
                       "-DTILE=32", "-D", "USE_FAST", "--define-macro", "N=4", "-O3", "-c", "k.cu"]}]))
    inc, dfn = compdb.flags_for(db, src)
    assert inc == [str(tmp_path / "inc"), "/opt/x/include", str(tmp_path / "build" / "gen")]
    assert dfn == ["TILE=32", "USE_FAST", "N=4"]
    with pytest.raises(compdb.CompileCommandsError, match="no entry"):
        compdb.flags_for(db, tmp_path / "missing.cu")


@pytest.mark.l0
def test_cli_takes_include_dirs_and_defines_from_the_database(tmp_path, capsys):
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([{"directory": str(CUDA), "file": "kernel_language.cu",
                               "command": "nvcc -Iinclude -DKL_FLUSH_NONFINITE -c kernel_language.cu"}]))
    out = tmp_path / "out"
    assert cli.main([str(CUDA / "kernel_language.cu"), "-o", str(out), "--compile-commands", str(db)]) == 0
    text = (out / "kernel_language.sycl.cpp").read_text()
    assert "#define KL_FLUSH_NONFINITE 1" in text and "kl_twice" in text  # the header in include/
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert cli.main([str(CUDA / "kernel_language.cu"), "-o", str(out), "--compile-commands", str(bad)]) == 2
    assert "--compile-commands" in capsys.readouterr().err
