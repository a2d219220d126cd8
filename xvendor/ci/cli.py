"""``xvendor ci matrix | versions | run`` (also ``python -m xvendor.ci ...``).

Only the standard library is imported up front: the matrix job of a CI runs
``xvendor ci matrix`` with the package installed ``--no-deps``, without torch.
"""

from __future__ import annotations

import argparse
import os
import sys

from .run import CELL_ENV


def cmd_matrix(args) -> int:
    from . import matrix as ci_matrix
    mx = ci_matrix.load(args.file)
    cells = mx.affected(args.changed) if args.changed is not None else list(mx.cells)
    print(ci_matrix.emit(cells, args.format))
    return 0


def cmd_versions(args) -> int:
    from . import matrix as ci_matrix, run as ci_run
    if not args.cell:
        print(ci_run.format_versions(ci_run.installed_versions()))
        return 0
    cell = ci_matrix.load(args.file).cell(args.cell)
    rows = ci_run.check_cell(cell)
    print(f"xvendor ci versions: cell {cell.name}\n{ci_run.format_versions(rows)}")
    ci_run.require_cell(cell, rows)
    return 0


def cmd_run(args) -> int:
    from . import run as ci_run
    tiers = [t for t in args.tier.split(",") if t] if args.tier else None
    return ci_run.run(tiers, args.report, args.path, args.file, args.pytest_args, args.cell)


def add_subcommands(ci: argparse.ArgumentParser) -> None:
    ci_sub = ci.add_subparsers(dest="ci_command", required=True)
    m = ci_sub.add_parser("matrix", help="emit the runner matrix from ci/matrix.toml")
    m.add_argument("--format", choices=["github", "gitlab", "json"], default="json")
    m.add_argument("--changed", nargs="*", metavar="PATH",
                   help="only the cells these changed files affect (path rules in the file)")
    m.add_argument("--file", default="ci/matrix.toml")
    m.set_defaults(fn=cmd_matrix)
    v = ci_sub.add_parser("versions", help="installed torch and toolchains; with --cell, "
                                           "fail unless they are what the cell pins")
    v.add_argument("--cell", help="a cell name (as `xvendor ci matrix` prints it)")
    v.add_argument("--file", default="ci/matrix.toml")
    v.set_defaults(fn=cmd_versions)
    r = ci_sub.add_parser("run", help="run the tiers this machine can run; JUnit + report")
    r.add_argument("--tier", help="comma-separated tiers (default: the cell's; without a "
                                  "cell l0,l1, plus l2 with a GPU)")
    r.add_argument("--cell", default=os.environ.get(CELL_ENV) or None,
                   help="the cell this machine runs: checked first, with its installed "
                        "versions and hardware (default: $XVENDOR_CI_CELL)")
    r.add_argument("--report", default="build/ci-report", help="folder for junit.xml, report.*")
    r.add_argument("--path", default="tests", help="the tests to run")
    r.add_argument("--file", default="ci/matrix.toml")
    r.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    r.set_defaults(fn=cmd_run)


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
