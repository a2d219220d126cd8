"""``xvendor ci matrix | versions | compile | run | report merge`` (also
``python -m xvendor.ci ...``).

Only the standard library is imported up front: the matrix job of a CI runs
``xvendor ci matrix`` (and the final job ``xvendor ci report merge``) with the package
installed ``--no-deps``, without torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .run import CELL_ENV

FILE_HELP = ("the matrix file (default: ci/matrix.toml from the current folder); the folder "
             "above it with a pyproject.toml, setup.py or .git is the project root")


def cmd_matrix(args) -> int:
    from . import matrix as ci_matrix
    mx = ci_matrix.load(args.file)
    if args.changed is not None:
        changed = ci_matrix.normalise_changed(args.changed, mx.root or Path.cwd())
        cells = mx.affected(changed)
    else:
        cells = list(mx.cells)
    # The merge job (GitLab) reads the matrix file from the project root, where it starts.
    where = Path(args.file).resolve()
    rel = where.relative_to(mx.root).as_posix() if mx.root and where.is_relative_to(mx.root) \
        else args.file
    print(ci_matrix.emit(cells, args.format, rel))
    text = ci_matrix.summary(cells)
    print(text, file=sys.stderr)
    if args.summary:
        with open(args.summary, "a") as f:
            f.write(text + "\n")
    return 0


def cmd_versions(args) -> int:
    from . import matrix as ci_matrix, run as ci_run
    if not args.cell:
        print(ci_run.format_versions(ci_run.installed_versions()))
        return 0
    cell = ci_matrix.load(args.file).cell(args.cell)
    rows = ci_run.check_cell(cell)
    print(f"xvendor ci versions: cell {cell.name}\n{ci_run.format_versions(rows)}")
    try:
        ci_run.require_cell(cell, rows)
    except ci_run.CellMismatch as e:
        if args.report:
            ci_run.write_check_failure(args.report, args.file, cell, rows, str(e))
        raise
    return 0


def cmd_compile(args) -> int:
    from . import compile_cell, matrix as ci_matrix
    return compile_cell.compile_cell(ci_matrix.load(args.file).cell(args.cell), args.report)


def cmd_run(args) -> int:
    from . import run as ci_run
    tiers = [t for t in args.tier.split(",") if t] if args.tier else None
    return ci_run.run(tiers, args.report, args.path, args.file, args.pytest_args, args.cell)


def cmd_merge(args) -> int:
    from . import report_merge
    return report_merge.main(args.dirs, args.out, args.file)


def add_subcommands(ci: argparse.ArgumentParser) -> None:
    ci_sub = ci.add_subparsers(dest="ci_command", required=True)
    m = ci_sub.add_parser("matrix", help="emit the runner matrix from ci/matrix.toml")
    m.add_argument("--format", choices=["github", "gitlab", "json"], default="json",
                   help="github: a fromJson include list; gitlab: a pipeline, one job per "
                        "cell; json: every cell with all its fields (default)")
    m.add_argument("--changed", nargs="*", metavar="PATH",
                   help="only the cells these changed files affect (path rules in the file); "
                        "relative paths are read from the current folder, and those outside "
                        "the project root affect no cell")
    m.add_argument("--summary", metavar="FILE",
                   help="append which cells run, are unstable or disabled (Markdown), e.g. "
                        "$GITHUB_STEP_SUMMARY")
    m.add_argument("--file", default="ci/matrix.toml", help=FILE_HELP)
    m.set_defaults(fn=cmd_matrix)
    v = ci_sub.add_parser("versions", help="installed torch and toolchains; with --cell, "
                                           "fail unless they are what the cell pins")
    v.add_argument("--cell", help="a cell name (as `xvendor ci matrix` prints it)")
    v.add_argument("--report", metavar="DIR",
                   help="on a mismatch, also write the report there, saying what differs")
    v.add_argument("--file", default="ci/matrix.toml", help=FILE_HELP)
    v.set_defaults(fn=cmd_versions)
    c = ci_sub.add_parser("compile", help="the cell's cross-compiles: xvendor's templates "
                                          "and the project's own compile_entry")
    c.add_argument("--cell", required=not os.environ.get(CELL_ENV),
                   default=os.environ.get(CELL_ENV) or None,
                   help="a cell name (as `xvendor ci matrix` prints it)")
    c.add_argument("--report", default="build/ci-report", help="folder for compile-*.json")
    c.add_argument("--file", default="ci/matrix.toml", help=FILE_HELP)
    c.set_defaults(fn=cmd_compile)
    r = ci_sub.add_parser("run", help="run the tiers this machine can run; JUnit + report")
    r.add_argument("--tier", help="comma-separated tiers (default: the cell's; without a "
                                  "cell l0,l1, plus l2 with a GPU)")
    r.add_argument("--cell", default=os.environ.get(CELL_ENV) or None,
                   help="the cell this machine runs: checked first, with its installed "
                        "versions and hardware (default: $XVENDOR_CI_CELL)")
    r.add_argument("--report", default="build/ci-report",
                   help="folder for junit.xml, report.md, report.html, summary.json")
    r.add_argument("--path", default=None,
                   help="the tests to run (default: pytest's own configuration: testpaths, "
                        "or the current folder)")
    r.add_argument("--file", default="ci/matrix.toml", help=FILE_HELP)
    r.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    r.set_defaults(fn=cmd_run)
    rep = ci_sub.add_parser("report", help="reports of several cells")
    rep_sub = rep.add_subparsers(dest="report_command", required=True)
    mg = rep_sub.add_parser("merge", help="one matrix page (Markdown + HTML) from the "
                                          "report folders of every cell's job")
    mg.add_argument("dirs", nargs="+", metavar="DIR",
                    help="folders holding the cells' reports (searched for summary.json)")
    mg.add_argument("--out", default="build/ci-matrix", help="folder for matrix.md, matrix.html")
    mg.add_argument("--file", default=None,
                    help="the matrix file, to list its cells that sent no report and its "
                         "disabled cells")
    mg.set_defaults(fn=cmd_merge)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``ci`` to the ``xvendor`` subcommands."""
    ci = sub.add_parser("ci", help="the multi-vendor CI matrix and tier runner")
    add_subcommands(ci)
    return ci


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m xvendor.ci",
                                description="the multi-vendor CI matrix and tier runner")
    add_subcommands(p)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as e:  # MatrixError, CellMismatch
        print(f"xvendor: {e}", file=sys.stderr)
        return 2
