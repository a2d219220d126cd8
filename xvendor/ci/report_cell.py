"""One cell's report (``report.md``, ``report.html``) from its ``summary.json``: what ran,
what failed by name with the first lines of its message, tiers that ran nothing, what each
skip needs, installed versions against the cell, and the provenance block. Standard library
only: ``xvendor ci report merge`` reads the same summaries."""

from __future__ import annotations

import html

TIERS = ("l0", "l1", "l2")


def counts(result: dict | None) -> str:
    r = result or {}
    return f"{r.get('passed', 0)} passed, {r.get('failed', 0)} failed, {r.get('skipped', 0)} skipped"


def verdict(summary: dict) -> str:
    return "passed" if summary["rc"] == 0 else summary.get("status") or "failed"


def _skip_reasons(summary: dict) -> list[tuple[str, int]]:
    total: dict[str, int] = {}
    for r in summary.get("results", {}).values():
        for why, n in r.get("skip_reasons", {}).items():
            total[why] = total.get(why, 0) + n
    return sorted(total.items(), key=lambda kv: -kv[1])


def markdown(summary: dict) -> str:
    lines = [f"# xvendor CI report: {summary['label']}", "",
             f"**{verdict(summary).upper()}** (exit code {summary['rc']}); tiers "
             f"{', '.join(summary['tiers']) or 'none'}"]
    if summary.get("reason"):
        lines += ["", f"**Why**: {summary['reason']}"]
    if summary.get("dry_run"):
        lines += ["", f"**Dry run**: {summary['dry_run']}"]
    lines += ["", "| tier | result |", "|---|---|"]
    lines += [f"| {t} | {counts(summary['results'].get(t))} |" for t in summary["tiers"]]
    lines += ["", "## Failures", ""]
    for f in summary.get("failures", []):
        lines.append(f"- `{f['test']}` ({f['tier']}, {f['kind']})")
        lines += [f"    > {ln}" for ln in f["message"].splitlines()] or ["    > (no message)"]
    if not summary.get("failures"):
        lines.append("- none")
    for n in summary.get("not_run", []):
        lines += ["", f"## Tier {n['tier']} ran no test ({n['skipped']} selected, all skipped)",
                  ""] + [f"- {c} × {why}" for why, c in n["reasons"].items()]
    lines += ["", "## Skips: what they need", ""]
    lines += [f"- {n} × {why}" for why, n in _skip_reasons(summary)] or ["- none"]
    if summary.get("versions"):
        lines += ["", "## Installed vs the cell", "", "| | installed | cell wants | |",
                  "|---|---|---|---|"]
        lines += [f"| {v['what']} | {v['installed'] or 'not installed'} | {v['wanted']} | "
                  f"{'ok' if v['ok'] else 'MISMATCH'} |" for v in summary["versions"]]
    lines += ["", "## Provenance", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary.get("provenance", {}).items()]
    return "\n".join(lines) + "\n"


STYLE = ("body{font-family:sans-serif} td,th{border:1px solid #999;padding:4px 8px}"
         "table{border-collapse:collapse} .pass{background:#c8f7c5} .fail{background:#f7c5c5}"
         " .skip{background:#eee} pre{margin:2px 0 8px 16px;color:#700}")


def html_page(summary: dict) -> str:
    e = html.escape
    cls = "pass" if summary["rc"] == 0 else "fail"
    rows = "".join(
        f"<tr><td>{t}</td><td class='{_tier_class(summary, t)}'>"
        f"{e(counts(summary['results'].get(t)))}</td></tr>" for t in summary["tiers"])
    fails = "".join(f"<li id='fail-{i}'><code>{e(f['test'])}</code> ({e(f['tier'])}, "
                    f"{e(f['kind'])})<pre>{e(f['message'])}</pre></li>"
                    for i, f in enumerate(summary.get("failures", []))) or "<li>none</li>"
    not_run = "".join(
        f"<h2>Tier {e(n['tier'])} ran no test</h2><ul>"
        + "".join(f"<li>{c} × {e(w)}</li>" for w, c in n["reasons"].items()) + "</ul>"
        for n in summary.get("not_run", []))
    skips = "".join(f"<li>{n} × {e(w)}</li>" for w, n in _skip_reasons(summary)) or "<li>none</li>"
    versions = "".join(f"<tr><td>{e(v['what'])}</td><td>{e(v['installed'] or 'not installed')}"
                       f"</td><td>{e(v['wanted'])}</td><td>{'ok' if v['ok'] else 'MISMATCH'}"
                       f"</td></tr>" for v in summary.get("versions") or ())
    versions = f"<h2>Installed vs the cell</h2><table>{versions}</table>" if versions else ""
    prov = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>"
                   for k, v in summary.get("provenance", {}).items())
    notes = "".join(f"<p><b>{label}</b>: {e(summary[key])}</p>" for key, label in
                    (("reason", "Why"), ("dry_run", "Dry run")) if summary.get(key))
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>xvendor CI: {e(summary['label'])}</title><style>{STYLE}</style></head><body>"
            f"<h1>xvendor CI report: {e(summary['label'])}</h1>"
            f"<p class='{cls}' id='verdict'>{e(verdict(summary).upper())} (exit code "
            f"{summary['rc']})</p>{notes}<table id='tiers'><tr><th>tier</th><th>result</th></tr>"
            f"{rows}</table><h2>Failures</h2><ul id='failures'>{fails}</ul>{not_run}"
            f"<h2>Skips: what they need</h2><ul>{skips}</ul>{versions}"
            f"<h2>Provenance</h2><table id='provenance'>{prov}</table></body></html>\n")


def _tier_class(summary: dict, tier: str) -> str:
    r = summary["results"].get(tier) or {}
    if r.get("failed") or any(n["tier"] == tier for n in summary.get("not_run", [])):
        return "fail"
    return "pass" if r.get("passed") else "skip"
