"""`xvendor port FILE.cu`: translate CUDA kernels to SYCL free functions, per-kernel verdicts.

Writes DIR/<stem>.sycl.cpp (the kernels; build it with the compat header in
xvendor/port/include), DIR/<stem>.py (the host launchers as Python) and DIR/<stem>.json
(``{"kernels": [{"name", "status", "reason", "lints", "instantiations", "sycl_name"}]}``).
Exit status: 0 when every kernel is ok (with --compile: compiled, so a template kernel
with no instantiation is ``not_compiled``), 1 when some are not (each listed on stderr with
its reason), 2 on a usage or parse error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_arguments", "add_parser", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a CUDA source (.cu / .cuh)")
    p.add_argument("-o", "--output", default=".", help="directory for the outputs (default: .)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help="translate only this kernel (repeatable)")
    p.add_argument("--instantiate", action="append", default=[], metavar="'name<T,...>'",
                   help="also instantiate a template kernel so (repeatable)")
    p.add_argument("--warp", choices=("32", "native"), default="32",
                   help="32 (default): warps are 32-wide sub-groups; native: the device's width")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="also look for #include \"...\" files here (repeatable)")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro for the SYCL compile (repeatable)")
    p.add_argument("--compile-commands", metavar="compile_commands.json",
                   help="also take -I/-D from this compilation database's entry for FILE")
    p.add_argument("--compile", action="store_true",
                   help="build with SYCL RTC on the CPU device; compile errors per kernel")
    p.add_argument("--check", metavar="REF.py",
                   help="run each kernel against REF.py's reference (implies --compile)")
    p.add_argument("--torch-ops", metavar="NAMESPACE",
                   help="also write DIR/<stem>_ops.py: torch.library ops NAMESPACE::* for the "
                        "file's bound (or tensor) host functions over the ported kernels")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("port", help="translate CUDA kernels to SYCL free-function kernels",
                              description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.set_defaults(fn=lambda args: run(args))
    return p


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="xvendor port", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as e:  # argparse exits 2 on a usage error; keep 0 for --help
        return int(e.code or 0)
    return run(args)


def run(args) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from . import build, parse, pylaunch
    err = Console(stderr=True)
    src = Path(args.file)
    out = Path(args.output)
    try:
        if not src.is_file():
            raise parse.ParseError(f"{src}: no such file")
        out.mkdir(parents=True, exist_ok=True)
        if getattr(args, "compile_commands", None):
            from . import compdb
            inc, dfn = compdb.flags_for(args.compile_commands, src)
            args.include, args.define = list(args.include) + inc, list(args.define) + dfn
        for d in args.include:
            if not Path(d).is_dir():
                raise ValueError(f"-I {d}: not a directory")
        for d in args.define:
            if not d.split("=")[0].isidentifier():
                raise ValueError(f"-D {d}: expected NAME or NAME=VALUE")
        opts = {"include_dirs": args.include, "defines": args.define}
        unit = parse.parse_file(src, include_dirs=args.include)
        n_kernels = len(unit.kernels)
        with Progress(console=err, transient=True, disable=n_kernels < 8) as bar:
            task = bar.add_task("translating", total=n_kernels)
            step = lambda name: bar.update(task, advance=1, description=f"translating {name}")  # noqa: E731
            if args.compile or args.check:
                res = build.compile_translation(src, warp=args.warp, instantiate=args.instantiate,
                                                kernels=args.kernel or None, progress=step, **opts)
                t = res.translation
            else:
                res, t = None, build.translate_file(src, warp=args.warp, instantiate=args.instantiate,
                                                    kernels=args.kernel or None, progress=step,
                                                    include_dirs=args.include, defines=args.define)
    except (parse.ParseError, ValueError, OSError, ImportError) as e:
        err.print(f"xvendor port: {e}", markup=False)
        return 2
    missing = set(args.kernel) - {k.name for k in t.kernels}
    if missing:
        err.print(f"xvendor port: no kernel named {sorted(missing)} in {src}", markup=False)
        return 2
    stem = src.name.split(".")[0]
    (out / f"{stem}.sycl.cpp").write_text(t.source)
    for name, text in build.includes().items():  # the headers the .sycl.cpp includes
        (out / name).write_text(text)
    (out / f"{stem}.py").write_text(pylaunch.launchers(unit))
    report = t.as_json()
    verdicts = {}
    for k, row in zip(t.kernels, report["kernels"]):
        status, reason = k.status, k.reason
        if res is not None:
            row["compiled"] = k.status == "ok" and bool(k.instantiations) and res.program is not None
            if k.status == "ok" and not row["compiled"]:
                status = row["status"] = "not_compiled"
                reason = k.reason or "nothing of it was compiled"
        verdicts[k.name] = (status, reason)
    bad = [k for k in t.kernels if verdicts[k.name][0] != "ok"]
    if args.check and res is not None and res.program is not None:
        from . import verify as check_mod
        from .launch import Module
        reference, cases = check_mod.load_reference(args.check)
        mod = Module(str(src), res, args.warp, tuple(args.instantiate), args.kernel or None)
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("checking", total=sum(len(c.blocks) for c in cases))
            rows = check_mod.check(mod, reference, cases, progress=lambda: bar.advance(task))
        check_mod.print_table(rows, Console())
        report["check"] = [r.__dict__ for r in rows]
        bad += [r for r in rows if not r.ok]
    if getattr(args, "torch_ops", None):  # PyTorch extensions (torch_ops.py)
        from . import torch_ops
        try:
            text, ops = torch_ops.ops_module(unit, args.torch_ops, str(src.resolve()),
                                             [str(Path(d).resolve()) for d in args.include],
                                             args.define, args.warp)
        except ValueError as e:
            err.print(f"xvendor port: {e}", markup=False)
            return 2
        refused = {}
        for o in ops:  # an op whose kernels did not port (or compile) is not registered
            broken = [f"{k} is {verdicts[k][0]}" for k in o.kernels if k in verdicts and verdicts[k][0] != "ok"]
            if broken and not o.reason:
                refused[o.name] = "it launches a kernel that did not port: " + ", ".join(broken)
        if refused:
            text, ops = torch_ops.ops_module(unit, args.torch_ops, str(src.resolve()),
                                             [str(Path(d).resolve()) for d in args.include],
                                             args.define, args.warp, refused=refused)
        (out / f"{stem}_ops.py").write_text(text)
        report["torch_ops"] = [{"op": f"{args.torch_ops}::{o.name}", "function": o.function,
                                "schema": o.schema, "registered": not o.reason, "fake": o.fake,
                                "reason": o.reason, "kernels": o.kernels} for o in ops]
        for o in ops:
            if o.reason:
                err.print(f"{src}:{o.line}: op {args.torch_ops}::{o.name}: not registered: {o.reason}",
                          markup=False, soft_wrap=True)
        err.print(f"{sum(not o.reason for o in ops)}/{len(ops)} ops -> {out / (stem + '_ops.py')}",
                  markup=False)
        bad += [o for o in ops if o.reason]
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    for k in t.kernels:
        status, reason = verdicts[k.name]
        if status != "ok":
            where = src.parent / k.file if k.file else src
            err.print(f"{where}:{k.line}: {k.name}: {status}: {reason.splitlines()[0] if reason else ''}",
                      markup=False, soft_wrap=True)
        for lint in k.lints:
            err.print(f"{src}: {k.name}: lint: {lint}", markup=False, soft_wrap=True)
    ok = sum(verdicts[k.name][0] == "ok" for k in t.kernels)
    if not t.kernels and b"__global__" in unit.source:  # never "0 kernels, all fine"
        err.print(f"xvendor port: {src}: the text has __global__ but no kernel could be parsed "
                  "(check the lines around it)", markup=False)
        return 1
    err.print(f"{ok}/{len(t.kernels)} kernels ok -> {out / (stem + '.sycl.cpp')}", markup=False)
    return 1 if bad else 0
