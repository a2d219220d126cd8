"""Which ``#if`` branch is taken, as far as the file itself says: for type resolution only.

The translator keeps every branch in the SYCL source (the SYCL compiler's preprocessor
picks), but the launch path must know what ``floatX`` is to check a tensor's dtype. This
evaluates ``#if / #ifdef / #ifndef / #elif / #else`` conditions over the ``#define``s that
come before the node in the file (``defined(X)``, numbers, macros with numeric values,
``! && || == != < > <= >=`` and parentheses; unknown identifiers are 0, as in C). A
condition it cannot evaluate makes the answer None (unknown), never a guess. ``-D``
options given to the compiler are not seen.
"""

from __future__ import annotations

import re

from .parse import node_text

__all__ = ["active", "dead_ranges"]

_BRANCHES = ("preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else", "preproc_elifdef")


def _all_defines(unit) -> list:
    """Every #define of the file, in order (found once per unit)."""
    cached = getattr(unit, "_xv_defines", None)
    if cached is None:
        cached = []
        stack = [unit.tree.root_node]
        while stack:
            n = stack.pop()
            if n.type == "preproc_def":
                cached.append(n)
            stack.extend(reversed(n.children))
        unit._xv_defines = cached
    return cached


def _defines(unit, before: int) -> dict:
    memo = unit.__dict__.setdefault("_xv_defines_before", {})
    if before in memo:
        return memo[before]
    out = {}
    for n in _all_defines(unit):
        if n.start_byte >= before:
            break
        if active(unit, n) is not False:
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            out[node_text(unit.source, name)] = node_text(unit.source, value).strip() if value else ""
    memo[before] = out
    return out


def _eval(unit, cond_node, at: int):
    if cond_node is None:
        return None
    text = node_text(unit.source, cond_node)
    macros = _defines(unit, at)
    text = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", text)

    def ident(m):
        v = macros.get(m.group(0), "0").rstrip("uUlL")
        return v if re.fullmatch(r"\d+", v) else ("0" if m.group(0) not in macros else "x")
    text = re.sub(r"\b[A-Za-z_]\w*\b", ident, text)
    if "x" in text or re.search(r"\d\s*\(", text) or not re.fullmatch(r"[\d\s()!&|=<>+\-*/%]*", text):
        return None
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))  # noqa: S307 - digits and operators only
    except Exception:
        return None


def _taken(unit, branch):
    """Whether ``branch`` (an #if/#ifdef/#elif/#else node) is the one taken."""
    t = branch.type
    if t == "preproc_ifdef":
        name = node_text(unit.source, branch.child_by_field_name("name"))
        negate = node_text(unit.source, branch.children[0]).strip() == "#ifndef"
        defined = name in _defines(unit, branch.start_byte)
        return defined != negate
    if t in ("preproc_if", "preproc_elif"):
        own = _eval(unit, branch.child_by_field_name("condition"), branch.start_byte)
    else:
        own = True  # #else
    if t == "preproc_if" or own is None:
        return own
    earlier = _taken_before(unit, branch)
    if earlier is None:
        return None
    return own and not earlier


def _taken_before(unit, branch):
    """Whether an earlier branch of the same #if chain was taken (None: unknown)."""
    prev = branch.parent
    if prev is None or prev.type not in _BRANCHES:
        return None
    t = _taken(unit, prev)
    if t is None:
        return None
    return t or (prev.type in ("preproc_elif",) and _taken_before(unit, prev))


def active(unit, node):
    """True/False when the file's own #defines decide whether ``node`` is compiled; None."""
    memo = unit.__dict__.setdefault("_xv_active", {})
    key = (node.start_byte, node.end_byte, node.type)
    if key not in memo:
        memo[key] = _active(unit, node)
    return memo[key]


def _active(unit, node):
    result = True
    n, child = node.parent, node
    while n is not None:
        if n.type in _BRANCHES and child != n.child_by_field_name("alternative"):
            taken = _taken(unit, n)
            if taken is False:
                return False
            if taken is None:
                result = None
        child, n = n, n.parent
    return result


def dead_ranges(unit, node) -> list:
    """[(start, end)] byte ranges inside ``node`` that the file's own #defines rule out
    (an ``#if`` / ``#elif`` / ``#ifdef`` branch whose condition is false, or an ``#else``
    after a taken branch): code the SYCL compile's preprocessor never sees. ``__CUDA_ARCH__``
    is not defined there (the translation is compiled as a host pass would be), so
    ``#if __CUDA_ARCH__ >= 800`` branches are dead; a condition that does not evaluate
    keeps its branch (never a guess)."""
    out = []
    for n in _walk(node):
        if n.type in _BRANCHES and _taken(unit, n) is False:
            alt = n.child_by_field_name("alternative")
            out.append((n.start_byte, alt.start_byte if alt is not None else n.end_byte))
    return out


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))
