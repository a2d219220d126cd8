"""Lints: CUDA constructs that translate, but whose meaning differs (or breaks) in SYCL.

Each lint is a string ``"line N: <what> (<why it matters in SYCL>)"`` attached to the kernel
whose code (or a device function it calls) has it. Lints do not change a kernel's status:
the port compiles, and the porter decides. Checked, in source order, without a preprocessor:

- an early ``return`` before a later barrier in the same function: every work-item of a
  SYCL work-group must reach each ``group_barrier`` (CUDA tolerates exited threads);
- a warp collective with a mask that is not provably full: the translation always runs the
  whole 32-wide sub-group;
- a read of a ``__shared__`` array at another index than the one written since the last
  barrier: another thread's write with no barrier in between (a latent race that the CPU
  device's scheduling exposes deterministically);
- a call through a function pointer: SYCL device code forbids it.

These are syntactic approximations: a loop-carried race or a write through a pointer alias
is not seen, and a guarded read that is in fact safe is flagged.
"""

from __future__ import annotations

import re

from . import constructs
from .parse import node_text, walk

__all__ = ["lint"]


def lint(unit, kernel, reach) -> list:
    out = []
    for fn in reach:
        out += _early_return(unit, fn) + _masks(unit, fn) + _shared_races(unit, fn)
        out += _function_pointers(unit, fn) + _dead_ptx(unit, fn)
        if fn.has_error:
            bad = next((n for n in walk(fn.node) if n.type == "ERROR" or n.is_missing), None)
            line = bad.start_point[0] + 1 if bad is not None else fn.line
            out.append(f"line {line}: the parser recovered from a syntax error in {fn.name} "
                       "(check the translated text there)")
    seen = []
    out = [re.sub(r"\bline (\d+)", lambda m: unit.where(int(m.group(1))), x) for x in out]
    return [x for x in out if not (x in seen or seen.append(x))]


def _line(n) -> int:
    return n.start_point[0] + 1


def _calls(unit, fn):
    for n in walk(fn.node):
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            if f is not None:
                yield n, node_text(unit.source, f)


def _early_return(unit, fn) -> list:
    barriers = [n for n, name in _calls(unit, fn)
                if constructs.BARRIERS.match(name + "(") or name in constructs.WARP_SYNC_CALLS]
    if not barriers:
        return []
    body = fn.node.child_by_field_name("body")
    out = []
    for r in (n for n in walk(body) if n.type == "return_statement"):
        later = [b for b in barriers if b.start_byte > r.end_byte]
        if later:
            out.append(f"line {_line(r)}: a thread may return before the barrier or warp "
                       f"collective at line {_line(later[0])} in {fn.name} (every SYCL work-item "
                       "must reach each one; keep the threads alive and guard the work instead)")
    return out


def _masks(unit, fn) -> list:
    out = []
    for call, name in _calls(unit, fn):
        if name not in constructs.WARP_SYNC_CALLS:
            continue
        args = call.child_by_field_name("arguments").named_children
        if not args:
            continue
        mask = node_text(unit.source, args[0]).strip()
        for _ in range(4):  # follow #define FULL_MASK 0xffffffff
            mask = unit.macros.get(mask, mask)
        if mask.replace(" ", "") not in constructs.FULL_MASKS:
            out.append(f"line {_line(call)}: {name} with mask '{mask}' that is not provably "
                       "full (the SYCL translation always uses the whole 32-wide sub-group)")
    return out


class _Shared(set):
    arrays: set


def _shared_names(unit, fn) -> set:
    names = _Shared()
    names.arrays = set()
    for n in walk(fn.node):
        if n.type == "declaration" and any(node_text(unit.source, c) == "__shared__"
                                           for c in n.children if c.type == "type_qualifier"):
            for d in n.children_by_field_name("declarator"):
                ids = [x for x in walk(d) if x.type == "identifier"]
                if ids:
                    names.add(node_text(unit.source, ids[0]))
                    if "[" in node_text(unit.source, d):
                        names.arrays.add(node_text(unit.source, ids[0]))
    for _ in range(2):  # float *p = shared; float *q = p + 4; -> aliases
        for n in walk(fn.node):
            if n.type == "init_declarator":
                value = n.child_by_field_name("value")
                roots = {node_text(unit.source, x) for x in walk(value) if x.type == "identifier"} if value else set()
                ids = [x for x in walk(n.child_by_field_name("declarator")) if x.type == "identifier"]
                if ids and roots & names and "*" in node_text(unit.source, n.child_by_field_name("declarator")):
                    names.add(node_text(unit.source, ids[0]))
                    names.arrays.add(node_text(unit.source, ids[0]))
    return names


def _accesses(unit, node, shared, events):
    """(kind, name, index text, node) in evaluation-ish order: right side before left."""
    t = node.type
    if t == "call_expression":
        f = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if args is not None:
            _accesses(unit, args, shared, events)
        if f is not None and constructs.BARRIERS.match(node_text(unit.source, f) + "("):
            events.append(("barrier", None, None, node))
        return
    if t in ("assignment_expression", "update_expression"):
        left = node.child_by_field_name("left") or node.child_by_field_name("argument")
        right = node.child_by_field_name("right")
        if right is not None:
            _accesses(unit, right, shared, events)
        target = _shared_target(unit, left, shared)
        if target:
            if left.type == "subscript_expression":
                for c in left.children[1:]:
                    _accesses(unit, c, shared, events)
            events.append(("write",) + target + (node,))
            return
        if left is not None:
            _accesses(unit, left, shared, events)
        return
    target = _shared_target(unit, node, shared)
    if target:
        events.append(("read",) + target + (node,))
        if node.type == "subscript_expression":
            for c in node.children[1:]:
                _accesses(unit, c, shared, events)
        return
    for c in node.children:
        _accesses(unit, c, shared, events)


def _shared_target(unit, node, shared):
    """(name, index) when ``node`` is ``S[...]...`` or ``S`` for a shared name S."""
    if node is None:
        return None
    idx = []
    while node.type == "subscript_expression":
        i = node.child_by_field_name("indices") or node.child_by_field_name("index")
        text = " ".join(node_text(unit.source, i).split()) if i is not None else ""
        idx.insert(0, text[1:-1].strip() if text.startswith("[") else text)
        node = node.child_by_field_name("argument")
    if node.type == "identifier" and node_text(unit.source, node) in shared:
        if not idx and node_text(unit.source, node) in shared.arrays:
            return None  # the array's address (p = s), not an element
        return node_text(unit.source, node), "][".join(idx)
    return None


def _shared_races(unit, fn) -> list:
    shared = _shared_names(unit, fn)
    body = fn.node.child_by_field_name("body")
    if not shared or body is None:
        return []
    events = []
    _accesses(unit, body, shared, events)
    written, read, out, flagged = {}, {}, [], set()
    for kind, name, idx, node in events:
        if kind == "barrier":
            written.clear()
            read.clear()
        elif kind == "write":
            written.setdefault(name, []).append((idx, node))
            earlier = [(i, n) for i, n in read.get(name, [])
                       if _statement(n) != _statement(node) and _guard(n) != _guard(node)
                       and (i != idx or _guarded_apart(node, n))]
            if earlier and name not in flagged:
                flagged.add(name)
                out.append(f"line {_line(node)}: writes __shared__ '{name}[{idx}]' while other "
                           f"threads may still read '{name}[{earlier[-1][0]}]' (line "
                           f"{_line(earlier[-1][1])}) with no barrier in between in {fn.name} "
                           "(a race; add __syncthreads() before the write)")
        elif kind == "read":
            read.setdefault(name, []).append((idx, node))
        if kind == "read" and name in written and name not in flagged:
            others = [(i, n) for i, n in written[name] if i != idx or _guarded_apart(n, node)]
            if others:
                flagged.add(name)
                out.append(f"line {_line(node)}: reads __shared__ '{name}[{idx}]' written at "
                           f"line {_line(others[-1][1])} ('{name}[{others[-1][0]}]', possibly by "
                           f"another thread) with no barrier in between in {fn.name} "
                           "(a race; add __syncthreads())")
    return out


def _statement(n):
    """The statement holding ``n`` (its byte range, as an identity)."""
    while n is not None and n.type not in ("expression_statement", "declaration",
                                           "return_statement", "if_statement", "for_statement"):
        n = n.parent
    return (n.start_byte, n.end_byte) if n is not None else None


def _guard(n):
    """The innermost ``if`` holding ``n`` (a read and a write under the same guard are taken
    as the same threads' sequential code: not flagged)."""
    n = n.parent
    while n is not None and n.type not in ("if_statement", "function_definition"):
        n = n.parent
    return (n.start_byte, n.end_byte) if n is not None and n.type == "if_statement" else None


def _guarded_apart(write, read) -> bool:
    """The write sits under an ``if`` that does not also hold the read (only some threads
    wrote; the others read what they did not write)."""
    n = write.parent
    while n is not None and n.type != "function_definition":
        if n.type == "if_statement":
            return not (n.start_byte <= read.start_byte < n.end_byte)
        n = n.parent
    return False


def _function_pointers(unit, fn) -> list:
    locals_ = {p.name for p in fn.params}
    for n in walk(fn.node):
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                ids = [x for x in walk(d) if x.type == "identifier"]
                if ids and not any(x.type == "lambda_expression" for x in walk(d)):
                    locals_.add(node_text(unit.source, ids[0]))
    out = []
    for call, name in _calls(unit, fn):
        if re.fullmatch(r"\(?\s*\*?\s*(\w+)\s*\)?", name) and name.strip("()* ") in locals_:
            out.append(f"line {_line(call)}: call through the function pointer '{name}' in "
                       f"{fn.name} (SYCL device code forbids indirect calls: pass a functor or "
                       "make it a template parameter)")
    return out


def _dead_ptx(unit, fn) -> list:
    """Inline PTX, or another refused construct (CUB, ...), in a branch the SYCL compile does
    not take (NOTE [dead PTX] in translate.py): the kernel runs the branch taken instead."""
    from . import conditions, constructs
    dead = conditions.dead_ranges(unit, fn.node)
    for n in walk(fn.node):
        if n.type == "gnu_asm_expression" and any(a <= n.start_byte < b for a, b in dead):
            return [f"line {_line(n)}: inline PTX in {fn.name} under an #if branch the SYCL "
                    "compile does not take (__CUDA_ARCH__ is undefined there): the other branch "
                    "is what runs; check that it implements the operation (not a no-device-code stub)"]
    for a, b in dead:
        text = unit.source[a:b].decode(errors="replace")
        for rx, reason in constructs.UNSUPPORTED:
            m = rx.search(text)
            if m:
                line = unit.source.count(b"\n", 0, a) + 1 + text.count("\n", 0, m.start())
                return [f"line {line}: {reason} in {fn.name} under an #if branch the SYCL compile "
                        "does not take: the other branch is what runs; check that it implements "
                        "the operation (not a no-device-code stub)"]
    return []
