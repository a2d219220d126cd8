"""Runner matrices from validated cells: GitHub Actions (a ``fromJson`` include list for
``.github/workflows/ci.yml``), GitLab (one job per cell, complete), and plain JSON.

Disabled cells are left out of the GitHub and GitLab output and listed by ``summary``;
unstable ones run without gating (``continue-on-error`` / ``allow_failure``). Standard
library only.
"""

from __future__ import annotations

import json

from .cells import Cell, MatrixError

# GitHub's own job timeout when a cell sets none.
GITHUB_DEFAULT_TIMEOUT = 360

# What every cell's job does before its own commands (GitLab `before_script`; the GitHub
# workflow spells out the same steps, and tests/ci holds the two together). Pins hold `*`:
# set -f keeps the shell from globbing them.
SETUP_SCRIPT = (
    'python$PYTHON -m venv .venv',
    'export PATH="$PWD/.venv/bin:$PATH"',
    'python -m pip install --upgrade pip',
    'python -m pip install $PIP_PRE --index-url "$TORCH_INDEX" "$TORCH_PIN"',
    '(set -f; python -m pip install $PIP_PRE ${TOOLCHAIN_INDEX:+--extra-index-url '
    '"$TOOLCHAIN_INDEX"} "$TORCH_PIN" $TOOLCHAIN_PINS)',
)
VERSIONS_STEP = 'xvendor ci versions --cell "$XVENDOR_CI_CELL" --report build/ci-report'
COMPILE_STEP = 'xvendor ci compile --cell "$XVENDOR_CI_CELL" --report build/ci-report'
# Each job's report moves to a folder of its own: GitLab unpacks every job's artifacts into
# one tree for the merge job.
COLLECT_STEP = 'mkdir -p "ci-reports/$XVENDOR_CI_CELL" && cp -r build/ci-report/. ' \
               '"ci-reports/$XVENDOR_CI_CELL/" || true'
MERGE_STEPS = (
    'python3 -m pip install --no-deps $XVENDOR_PIP_SPEC',
    'python3 -m xvendor.ci report merge ci-reports --file "$XVENDOR_CI_MATRIX" '
    '--out build/ci-matrix',
)


def cell_script(cell: Cell) -> list[str]:
    """The cell's own steps after the setup: its install command, the versions check, its
    cross-compiles (when it has any), its test command."""
    steps = [cell.install, VERSIONS_STEP]
    if cell.compile_jobs or cell.compile_entry:
        steps.append(COMPILE_STEP)
    return steps + [cell.test]


JOB_SCRIPT = SETUP_SCRIPT + ("<install>", VERSIONS_STEP, COMPILE_STEP, "<test>")

# What a job reads from a github row, in order; list fields become one-line strings for
# shell variables (see _github_row).
_ROW_KEYS = ("name", "runner", "vendor", "arch", "runtime", "python", "torch", "channel",
             "status", "tiers", "container", "timeout_minutes", "env", "install", "test",
             "torch_index", "torch_pin", "pip_pre", "toolchain_index", "toolchain_pins",
             "compile", "compile_entry", "cache_key")


def _compile_string(row: dict) -> str:
    return " ".join(f"{j['backend']}:{','.join(j['targets'])}" for j in row["compile"])


def _github_row(row: dict) -> dict:
    """``row`` with tiers comma-separated, pins space-separated, each compile job as
    ``backend:target,target``, env as ``NAME=value`` lines (for $GITHUB_ENV), one runner
    label as a string, and GitHub's own default timeout."""
    flat = dict(row, tiers=",".join(row["tiers"]), toolchain_pins=" ".join(row["toolchain_pins"]),
                compile=_compile_string(row),
                env="\n".join(f"{k}={v}" for k, v in row["env"].items()),
                runner=row["runner"][0] if len(row["runner"]) == 1 else row["runner"],
                timeout_minutes=row["timeout_minutes"] or GITHUB_DEFAULT_TIMEOUT)
    return {k: flat[k] for k in _ROW_KEYS}


def _gitlab_job(cell: Cell) -> list[str]:
    row = cell.as_dict()
    q = json.dumps  # JSON strings are valid YAML scalars
    lines = [f"{q(cell.name)}:", "  extends: .xvendor-cell",
             f"  tags: {q(list(cell.runner))}"]
    if cell.container:
        lines.append(f"  image: {q(cell.container)}")
    if cell.timeout_minutes:
        lines.append(f"  timeout: {q(f'{cell.timeout_minutes} minutes')}")
    if cell.status == "unstable":
        lines.append("  allow_failure: true")
    lines += ["  cache:", f"    key: {q(cell.cache_key)}", '    paths: [".cache/pip/"]',
              "  variables:"]
    variables = {"XVENDOR_CI_CELL": cell.name, "XVENDOR_CI_TIERS": ",".join(cell.tiers),
                 "PYTHON": cell.python, "TORCH_INDEX": cell.torch_index,
                 "TORCH_PIN": cell.torch_pin, "PIP_PRE": cell.pip_pre,
                 "TOOLCHAIN_INDEX": cell.toolchain_index,
                 "TOOLCHAIN_PINS": " ".join(cell.toolchain_pins),
                 "COMPILE": _compile_string(row), "COMPILE_ENTRY": cell.compile_entry,
                 **cell.env}
    lines += [f"    {k}: {q(v)}" for k, v in variables.items()]
    lines.append("  script:")
    lines += [f"    - {q(step)}" for step in cell_script(cell)]
    return lines


def _gitlab(cells: list[Cell], matrix_file: str) -> str:
    q = json.dumps
    lines = ["# One job per cell of the matrix (disabled cells left out), then the matrix",
             "# page. Include it, or paste it, into .gitlab-ci.yml. XVENDOR_PIP_SPEC is what",
             "# the merge job installs (--no-deps); xvendor's own repository sets it to -e .",
             "variables:", f"  XVENDOR_CI_MATRIX: {q(matrix_file)}",
             '  XVENDOR_PIP_SPEC: "xvendor"', "",
             ".xvendor-cell:", "  stage: test", "  variables:",
             '    PIP_CACHE_DIR: "$CI_PROJECT_DIR/.cache/pip"', "  before_script:"]
    lines += [f"    - {q(step)}" for step in SETUP_SCRIPT]
    lines += ["  after_script:", f"    - {q(COLLECT_STEP)}",
              "  artifacts:", "    when: always", '    paths: ["ci-reports/"]', ""]
    for cell in cells:
        lines += _gitlab_job(cell) + [""]
    lines += ["xvendor-ci-matrix:", "  stage: .post", "  when: always", "  script:"]
    lines += [f"    - {q(step)}" for step in MERGE_STEPS]
    lines += ["  artifacts:", "    when: always", '    paths: ["build/ci-matrix/"]']
    return "\n".join(lines)


def emit(cells: list[Cell], fmt: str, matrix_file: str = "ci/matrix.toml") -> str:
    """The runner matrix in ``fmt``: github (fromJson include list), gitlab (a pipeline), or
    json (every cell, disabled ones too, with all fields)."""
    if fmt == "json":
        return json.dumps([c.as_dict() for c in cells], indent=2)
    running = [c for c in cells if c.status != "disabled"]
    if fmt == "github":  # consumed as ${{ fromJson(needs.matrix.outputs.matrix) }}
        return json.dumps({"include": [_github_row(c.as_dict()) for c in running]},
                          separators=(",", ":"))
    if fmt == "gitlab":
        return _gitlab(running, matrix_file)
    raise MatrixError(f"ci matrix: unknown format {fmt!r}; formats are github, gitlab, json")


def summary(cells: list[Cell]) -> str:
    """Markdown lines for a CI summary: how many cells run, which are unstable, which are
    disabled (and so not run at all)."""
    def names(status):
        return [c.name for c in cells if c.status == status]
    lines = [f"xvendor ci matrix: {len(cells) - len(names('disabled'))} of {len(cells)} "
             f"cells run"]
    for status, what in (("unstable", "run, a failure does not fail the pipeline"),
                         ("disabled", "left out")):
        if names(status):
            lines.append(f"- {status} ({what}): {', '.join(names(status))}")
    return "\n".join(lines)
