"""``-I`` / ``-D`` from a ``compile_commands.json`` (the JSON compilation database CMake,
Bear and ninja write): the entry whose ``file`` is the source being ported gives the
include folders and macros its real build used.

Flags read: ``-I DIR`` / ``-IDIR`` / ``-isystem DIR`` / ``--include-path DIR`` (nvcc) and
``-D NAME[=V]`` / ``-DNAME[=V]`` / ``--define-macro NAME[=V]`` (nvcc), in the entry's
``arguments`` list or its ``command`` string (split as a POSIX shell does); relative folders
are taken from the entry's ``directory``. Other flags are ignored.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

__all__ = ["flags_for", "CompileCommandsError"]


class CompileCommandsError(ValueError):
    """The database cannot be read or has no entry for the file."""


_INCLUDE = ("-I", "-isystem", "--include-path", "-iquote")
_DEFINE = ("-D", "--define-macro")


def flags_for(db_path, source) -> tuple[list, list]:
    """(include folders, NAME[=V] defines) of ``source``'s entry in ``db_path``."""
    db_path, source = Path(db_path), Path(source).resolve()
    try:
        entries = json.loads(db_path.read_text())
    except (OSError, ValueError) as e:
        raise CompileCommandsError(f"--compile-commands {db_path}: cannot read it ({e})") from e
    if not isinstance(entries, list):
        raise CompileCommandsError(f"--compile-commands {db_path}: expected a JSON list of entries")
    for e in entries:
        if not isinstance(e, dict) or "file" not in e:
            continue
        directory = Path(e.get("directory", db_path.parent))
        f = Path(e["file"])
        if (f if f.is_absolute() else directory / f).resolve() != source:
            continue
        args = e.get("arguments")
        if args is None:
            args = shlex.split(e.get("command", ""))
        return _parse(args, directory)
    raise CompileCommandsError(f"--compile-commands {db_path}: no entry for {source}")


def _parse(args, directory: Path) -> tuple[list, list]:
    includes, defines, i = [], [], 0
    while i < len(args):
        a, value = args[i], None
        for flag in _INCLUDE + _DEFINE:
            if a == flag and i + 1 < len(args):
                value, i = args[i + 1], i + 1
            elif a.startswith(flag + "=") and flag.startswith("--"):
                value = a[len(flag) + 1:]
            elif a.startswith(flag) and len(a) > len(flag) and not flag.startswith("--") and \
                    not (flag == "-I" and a.startswith("-isystem")):
                value = a[len(flag):]
            if value is not None:
                if flag in _INCLUDE:
                    p = Path(value)
                    includes.append(str(p if p.is_absolute() else (directory / p).resolve()))
                else:
                    defines.append(value)
                break
        i += 1
    return list(dict.fromkeys(includes)), list(dict.fromkeys(defines))
