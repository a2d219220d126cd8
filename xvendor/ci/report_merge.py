"""``xvendor ci report merge DIR... [--file ci/matrix.toml] [--out build/ci-matrix]``: one
matrix page from the report folders of every cell's job (each holds the ``summary.json``
that ``xvendor ci run`` writes): cells x tiers, red/green, each cell linked to its failures
(listed on the page, by name with their first lines) and to its own report. With the
matrix file, the cells that sent no report and the disabled ones are listed too. Markdown
(``matrix.md``, for a CI summary) and HTML (``matrix.html``). Standard library only: the
merge job installs xvendor ``--no-deps``.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

from .report_cell import TIERS, counts, verdict


def find_summaries(dirs: list[str]) -> list[tuple[Path, dict]]:
    found = []
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise ValueError(f"ci report merge: {d} is not a folder")
        for path in sorted(root.rglob("summary.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as e:
                raise ValueError(f"ci report merge: {path} is not a cell summary: {e}") from e
            if not isinstance(data, dict) or data.get("schema") != 1 or "label" not in data:
                raise ValueError(f"ci report merge: {path} is not a summary.json of "
                                 f"`xvendor ci run`")
            found.append((path, data))
    return found


def _anchor(label: str) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_-]+", "-", label).strip("-")


def _tier_cell(summary: dict, tier: str) -> tuple[str, str]:
    """(css class, text) of one tier of one cell."""
    if tier not in summary["tiers"]:
        return "none", "—"
    r = summary["results"].get(tier)
    if any(n["tier"] == tier for n in summary.get("not_run", [])):
        return "fail", counts(r) + " (ran none)"
    if summary.get("status") == "cell check failed":
        return "fail", "not run: cell check failed"
    if r is None:
        return ("pass", "no test in this tier") if summary["rc"] == 0 else ("fail", "no result")
    return ("fail" if r["failed"] else "pass"), counts(r)


def _rows(found, matrix):
    """(label, summary or None, report path or None, note) for each cell, matrix order."""
    by_cell = {s.get("cell") or s["label"]: (p, s) for p, s in found}
    rows, seen = [], set()
    for cell in (matrix.cells if matrix else ()):
        seen.add(cell.name)
        if cell.status == "disabled":
            rows.append((cell.name, None, None, "disabled: left out of the matrix"))
        elif cell.name in by_cell:
            p, s = by_cell[cell.name]
            rows.append((cell.name, s, p, "unstable" if cell.status == "unstable" else ""))
        else:
            rows.append((cell.name, None, None, "no report (not run, or its job sent none)"))
    rows += [(key, s, p, "") for key, (p, s) in by_cell.items() if key not in seen]
    return rows


def markdown(rows, out: Path) -> str:
    lines = ["# xvendor CI matrix", "", "| cell | verdict | " + " | ".join(TIERS) + " |",
             "|---|---|" + "---|" * len(TIERS)]
    for label, s, _, note in rows:
        if s is None:
            lines.append(f"| {label} | {note} |" + " |" * len(TIERS))
            continue
        mark = "✅ passed" if s["rc"] == 0 else f"❌ {verdict(s)}"
        if note:
            mark += f" ({note})"
        tiers = [_tier_cell(s, t)[1] for t in TIERS]
        lines.append(f"| [{label}](#{_anchor(label)}) | {mark} | " + " | ".join(tiers) + " |")
    for label, s, path, _ in rows:
        if s is None or s["rc"] == 0:
            continue
        lines += ["", f"## {label}", ""]
        if s.get("reason"):
            lines.append(f"- why: {s['reason']}")
        lines += [f"- `{f['test']}` ({f['tier']}): " + f["message"].replace("\n", " / ")
                  for f in s.get("failures", [])]
        lines += [f"- tier {n['tier']} ran no test: " + "; ".join(n["reasons"])
                  for n in s.get("not_run", [])]
        lines.append(f"- report: {os.path.relpath(path.parent / 'report.md', out)}")
    return "\n".join(lines) + "\n"


STYLE = ("body{font-family:sans-serif} td,th{border:1px solid #999;padding:4px 8px}"
         "table{border-collapse:collapse} td.pass{background:#2e7d32;color:#fff}"
         " td.fail{background:#c62828;color:#fff} td.none,td.missing{background:#ddd}"
         " pre{margin:2px 0 8px 16px}")


def html_page(rows, out: Path) -> str:
    e = html.escape
    body, details = [], []
    for label, s, path, note in rows:
        if s is None:
            body.append(f"<tr class='missing'><td>{e(label)}</td><td class='missing' "
                        f"colspan='{len(TIERS) + 1}'>{e(note)}</td></tr>")
            continue
        anchor = _anchor(label)
        state = "pass" if s["rc"] == 0 else "fail"
        link = f"<a href='#{anchor}'>{e(label)}</a>" if state == "fail" else e(label)
        tds = "".join(f"<td class='{c}'>{e(t)}</td>" for c, t in
                      (_tier_cell(s, t) for t in TIERS))
        word = verdict(s) + (f" ({note})" if note else "")
        body.append(f"<tr data-cell='{e(label)}' data-state='{state}'><td>{link}</td>"
                    f"<td class='{state}'>{e(word)}</td>{tds}</tr>")
        if state == "fail":
            items = "".join(f"<li><code>{e(f['test'])}</code> ({e(f['tier'])})"
                            f"<pre>{e(f['message'])}</pre></li>" for f in s.get("failures", []))
            items += "".join(f"<li>tier {e(n['tier'])} ran no test: "
                             f"{e('; '.join(n['reasons']))}</li>" for n in s.get("not_run", []))
            why = f"<p>{e(s['reason'])}</p>" if s.get("reason") else ""
            rel = os.path.relpath(path.parent / "report.html", out)
            details.append(f"<section id='{anchor}'><h2>{e(label)}</h2>{why}<ul>{items}</ul>"
                           f"<p><a href='{e(rel)}'>the cell's report</a></p></section>")
    head = "".join(f"<th>{t}</th>" for t in TIERS)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>xvendor CI matrix</title>"
            f"<style>{STYLE}</style></head><body><h1>xvendor CI matrix</h1>"
            f"<table id='matrix'><tr><th>cell</th><th>verdict</th>{head}</tr>{''.join(body)}"
            f"</table>{''.join(details)}</body></html>\n")


def main(dirs: list[str], out_dir: str, matrix_file: str | None) -> int:
    """Write the matrix page; non-zero when a gating (not unstable) cell failed."""
    from . import matrix as ci_matrix
    found = find_summaries(dirs)
    matrix = ci_matrix.load(matrix_file) if matrix_file else None
    if not found and matrix is None:
        raise ValueError(f"ci report merge: no summary.json under {', '.join(dirs)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = _rows(found, matrix)
    (out / "matrix.md").write_text(markdown(rows, out))
    (out / "matrix.html").write_text(html_page(rows, out))
    bad = [label for label, s, _, note in rows
           if note != "unstable" and not note.startswith("disabled")
           and s is not None and s["rc"] != 0]
    print(f"xvendor ci report merge: {len(found)} cell reports -> {out}/matrix.md, "
          f"{out}/matrix.html; failing: {', '.join(bad) or 'none'}")
    return 1 if bad else 0
