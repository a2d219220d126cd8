"""``#if`` groups whose branches do not balance their braces, resolved before parsing.

See NOTE [split braces].
"""

from __future__ import annotations

import re

__all__ = ["resolve_split_branches"]

# NOTE [split braces]: real code opens a block in one ``#if`` branch and closes it after
# the ``#endif`` (``#if FAST ... if (a) { #else if (b) { #endif ... }``), or opens it in
# every branch (``#if A  if constexpr (x) {..} else { #else ... else { #endif``). tree-sitter
# sees every branch, cannot pair those braces, and the whole function (often the whole
# file after it) becomes an ERROR node: its kernels are never reported and the host code
# launching them is lost. Only such groups (a branch whose braces or parentheses do not
# balance, or that ends in a statement head whose body follows the #endif: `#ifndef HIP`
# / `if constexpr (c)` / `#endif` / `{ ... }`) are resolved here, the way the preprocessor of the SYCL compile resolves them:
# their conditions evaluated over the ``#define``s above them (``defined``, numbers, object
# macros, ``! && || == != < > <= >=``; an unknown name is 0, as in C; ``__CUDACC__`` is
# defined: this is CUDA code), the taken branch kept and the directives and the other
# branches blanked (lines kept, so offsets and line numbers hold). A condition that does not
# evaluate counts as false. Balanced groups are left alone: the SYCL compiler still picks
# their branch.

_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$")
_PREDEFINED = {"__CUDACC__": "1", "__cplusplus": "201703"}


def _lines_without_comments(src: bytes) -> list:
    """The lines of ``src`` with comments, string and character literals blanked."""
    def blank(m):
        return re.sub(rb"[^\n]", b" ", m.group(0))
    text = re.sub(rb'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', blank, src, flags=re.S)
    return text.split(b"\n")


def _directive_lines(lines: list) -> list:
    """Per line: (directive, argument text) for a preprocessor line, "cont" for the
    continuation lines of one, None otherwise."""
    out, cont = [], False
    for line in lines:
        if cont:
            out.append("cont")
        else:
            m = _DIRECTIVE.match(line)
            out.append((m.group(1).decode(), m.group(2).decode(errors="replace").strip()) if m
                       else ("other", "") if line.lstrip().startswith(b"#") else None)
        cont = line.rstrip().endswith(b"\\")
    return out


def _eval(cond: str, macros: dict) -> bool:
    expr = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: " 1 " if (m.group(1) or m.group(2)) in macros else " 0 ", cond)
    for _ in range(8):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f" ({macros[m.group(0)] or 1}) " if m.group(0) in macros
                     else m.group(0), expr)
        if new == expr:
            break
        expr = new
    expr = re.sub(r"\b[A-Za-z_]\w*\b", " 0 ", expr)  # unknown names are 0
    expr = re.sub(r"(?<=\d)[uUlL]+\b", "", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr).replace("/", "//")
    if not re.fullmatch(r"[\d\s()+\-*%<>=!&|^~andornt/]*", expr):
        return False
    try:
        return bool(eval(expr, {"__builtins__": {}}, {}))  # noqa: S307
    except Exception:
        return False


# a branch that ends in a statement head whose body follows the #endif
_DANGLING = re.compile(rb"(?:\b(?:if|for|while|switch)\s*(?:constexpr\s*)?\([^;{}]*\)|\belse|\bdo)\s*$")


def resolve_split_branches(src: bytes) -> bytes:
    """``src`` with every ``#if`` group that has a branch with unbalanced braces or
    parentheses reduced to its taken branch (NOTE [split braces])."""
    if b"#" not in src:
        return src
    lines = _lines_without_comments(src)
    kinds = _directive_lines(lines)
    # groups: [(line of #if/#elif/#else, kind, cond)...], end line; innermost first
    groups, stack = [], []
    for i, k in enumerate(kinds):
        if k is None or k == "cont":
            continue
        if k[0] in ("if", "ifdef", "ifndef"):
            stack.append([(i, k[0], k[1])])
        elif k[0] in ("elif", "else") and stack:
            stack[-1].append((i, k[0], k[1]))
        elif k[0] == "endif" and stack:
            groups.append((stack.pop(), i))
    blanked = set()
    for heads, end in groups:
        bounds = [h[0] for h in heads] + [end]
        nets = []
        for a, b in zip(bounds, bounds[1:]):
            text = b"".join(lines[j] for j in range(a + 1, b) if j not in blanked and kinds[j] is None)
            nets.append((text.count(b"{") - text.count(b"}"), text.count(b"(") - text.count(b")")))
            whole = b"\n".join(lines[j] for j in range(a + 1, b) if j not in blanked and kinds[j] is None)
            if _DANGLING.search(whole):  # #ifndef X / if constexpr (c) / #endif / { ... }
                nets[-1] = (1, 0)
        if all(n == (0, 0) for n in nets):
            continue
        taken = _taken_branch(heads, lines, kinds, blanked)
        for idx, (a, b) in enumerate(zip(bounds, bounds[1:])):
            blanked.add(a)
            if idx != taken:
                blanked.update(range(a + 1, b))
        blanked.add(end)
    if not blanked:
        return src
    out = src.split(b"\n")
    for j in blanked:
        out[j] = re.sub(rb"[^\n]", b" ", out[j])
        k = j
        while kinds[k] not in (None, "cont") and out[k].rstrip().endswith(b"\\") and k + 1 < len(out):
            k += 1  # a directive's continuation lines go with it
            out[k] = re.sub(rb"[^\n]", b" ", out[k])
    return b"\n".join(out)


def _taken_branch(heads, lines, kinds, blanked) -> int | None:
    """Index of the branch of ``heads`` the preprocessor takes, over the macros defined
    (and not undefined) above the group outside blanked lines; None when none is."""
    macros = dict(_PREDEFINED)
    for j in range(heads[0][0]):
        k = kinds[j]
        if j in blanked or k is None or k == "cont":
            continue
        if k[0] == "define":
            m = re.match(r"(\w+)(\([^)]*\))?\s*(.*)", k[1])
            if m:
                macros[m.group(1)] = "" if m.group(2) else m.group(3).strip()
        elif k[0] == "undef":
            macros.pop(k[1].split()[0] if k[1].split() else "", None)
    for idx, (_, kind, cond) in enumerate(heads):
        name = cond.split()[0] if cond.split() else ""
        if (kind == "ifdef" and name in macros or kind == "ifndef" and name not in macros
                or kind in ("if", "elif") and _eval(cond, macros) or kind == "else"):
            return idx
    return None
