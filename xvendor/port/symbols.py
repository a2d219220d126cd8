"""``__constant__`` / ``__device__`` variables: const globals, or module-owned buffers.

A ``__constant__`` variable with an initializer that the host never writes becomes a plain
``const`` global. The others (zero-initialized, as CUDA's) become buffers the module owns:
the declaration turns into a work-group-static address slot plus a ``sizeof`` kernel, every
use into ``::xvc::sym<T>(slot)``, and each kernel that reaches one takes its address as a
hidden trailing parameter (NOTE [module symbols] in launch.py).
"""

from __future__ import annotations

import re

from .parse import Unit, at_file_scope, node_text, walk

__all__ = ["symbols", "symbols_used", "declarations", "initialized_globals", "constant_edits",
           "declaration_edits", "use_edits"]


def initialized_globals(unit: Unit) -> dict:
    """__constant__ / __device__ variables with a non-zero initializer that are not const
    globals (kernels using them are refused): name -> qualifier. A ``__constant__`` variable with an initializer that the host never writes
    (no ``cudaMemcpyToSymbol(name, ...)``) is a plain ``const`` global instead, which SYCL
    device code reads as is (``_constant_edits``)."""
    out = {}
    for n, quals, names, const in declarations(unit):
        if not const and _initialized(unit, n):
            for name in names:
                out[name] = "__device__" if "__device__" in quals and "__constant__" not in quals else "__constant__"
    return out


_ZERO_INIT = re.compile(r"=\s*(\{\s*\}|\{\s*0+(\.0*)?[fFuUlL]*\s*\}|0+(\.0*)?[fFuUlL]*)\s*$")


def _initialized(unit, decl) -> bool:
    """A declarator has an initializer other than zero (CUDA zero-fills the others)."""
    for d in decl.children_by_field_name("declarator"):
        if d.type == "init_declarator" and not _ZERO_INIT.search(node_text(unit.source, d)):
            return True
    return False


def symbols(unit) -> dict:
    """Module-owned symbols: name -> (qualifier, type text with its array extents, e.g.
    ``float[16]``): file-scope ``__constant__``/``__device__`` variables that become
    ``device_global``s (the host reads and writes them through ``mod.symbols``)."""
    out = {}
    for n, quals, names, const in declarations(unit):
        if const or _initialized(unit, n) or not names:
            continue
        q = "__device__" if "__device__" in quals and "__constant__" not in quals else "__constant__"
        # each declarator of `__device__ static unsigned a = 0, b[4];` is its own symbol
        for d in n.children_by_field_name("declarator"):
            ty = _symbol_type(unit, n, d)
            if ty is not None:
                out[ty[0]] = (q, ty[1])
    return out


def _symbol_type(unit, decl, d):
    """(name, type text with the declarator's own pointers and extents) of declarator ``d``
    of ``decl``, or None when it names nothing."""
    s = unit.source
    ty = " ".join(node_text(s, c) for c in decl.children
                  if c.type not in ("storage_class_specifier", ";", ",") and
                  c not in decl.children_by_field_name("declarator") and
                  node_text(s, c) not in ("__constant__", "__device__", "__managed__"))
    if d.type == "init_declarator":
        d = d.child_by_field_name("declarator")
    name = next((node_text(s, x) for x in walk(d) if x.type == "identifier"), None)
    if name is None:
        return None
    return name, (ty + node_text(s, d).replace(name, "", 1)).strip()


def declaration_edits(unit) -> list:
    """Each symbol's declaration -> a work-group-static address slot, its type, and an
    extern "C" kernel that reports its size (NOTE [module symbols] in launch.py); one per
    name of a declaration that declares several."""
    edits, table = [], symbols(unit)
    for n, quals, names, const in declarations(unit):
        if not names or any(nm not in table for nm in names):
            continue
        edits.append((n.start_byte, n.end_byte, "\n".join(
            f"inline syclex::work_group_static<void *> {name}__xv_sym; "
            f"using {name}__xv_type = {table[name][1]};\n"
            f'extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<3>))\n'
            f"void __xv_sym_size__{name}(unsigned long long *out) {{ *out = sizeof({name}__xv_type); }}"
            for name in names)))
    return edits


def symbols_used(unit, reach) -> list:
    """The module symbols the functions in ``reach`` name, in a stable order."""
    table = symbols(unit)
    used = set()
    for f in reach:
        body = f.node.child_by_field_name("body")
        if body is not None:
            used |= {node_text(unit.source, n) for n in walk(body) if n.type == "identifier"} & set(table)
    return sorted(used)


def use_edits(unit, fn) -> list:
    """``name`` -> ``name.get()`` for the symbols ``fn`` uses (a local of that name wins)."""
    table = symbols(unit)
    if not table:
        return []
    body = fn.node.child_by_field_name("body")
    if body is None:
        return []
    local = {p.name for p in fn.params}
    for n in walk(body):
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                ids = [x for x in walk(d) if x.type == "identifier"]
                if ids:
                    local.add(node_text(unit.source, ids[0]))
    return [(n.start_byte, n.end_byte, f"::xvc::sym<{node_text(unit.source, n)}__xv_type>("
             f"{node_text(unit.source, n)}__xv_sym)") for n in walk(body)
            if n.type == "identifier" and node_text(unit.source, n) in table
            and node_text(unit.source, n) not in local
            and not (n.parent is not None and n.parent.type == "qualified_identifier")]


def declarations(unit: Unit) -> list:
    """[(declaration, qualifiers, names, becomes const)] of file-scope symbols (memoized)."""
    cached = unit.__dict__.get("_xv_symbols")
    if cached is not None:
        return cached
    cached = []
    for n in walk(unit.tree.root_node):
        if n.type == "declaration" and at_file_scope(n) and not any(
                c.type == "function_declarator" for c in walk(n)):
            quals = {c.type for c in walk(n)} & {"__constant__", "__device__"}
            if not quals:
                continue
            names, inits = [], []
            for d in n.children_by_field_name("declarator"):
                ids = [x for x in walk(d) if x.type == "identifier"]
                if ids:
                    names.append(node_text(unit.source, ids[0]))
                    inits.append(d.type == "init_declarator")
            written = any(re.search(rb"cudaMemcpyToSymbol(Async)?\s*\(\s*" + re.escape(nm.encode()) + rb"\b",
                                    unit.source) for nm in names)
            # a __device__ variable declared const (or constexpr) is as read-only as a
            # __constant__ one: a plain const global (``__device__ const float a = -0.75f;``)
            declared_const = any(c.type == "type_qualifier" and node_text(unit.source, c) in ("const", "constexpr")
                                 for c in n.children)
            const = (("__constant__" in quals or declared_const or not _written(unit, n, names))
                     and bool(inits) and all(inits) and not written)
            cached.append((n, quals, names, const))
    unit.__dict__["_xv_symbols"] = cached
    return cached


_COMMENTS = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)
_ACCESS = rb"(?:\s*\[[^\]\n]*\]|\s*(?:\.|->)\s*\w+)*"
_WRITE_OP = rb"\s*(?:(?<![=!<>])=(?!=)|[-+*/%|&^]=|<<=|>>=|\+\+|--)"


def _written(unit, decl, names) -> bool:
    """Whether code outside declaration ``decl`` may write one of ``names``: assigned,
    incremented, its address taken, or (an array) used other than indexed, where it may
    decay to a pointer that is written through. A __device__ global nobody writes is
    read-only: a plain const global, like an initialized __constant__ one."""
    text = unit.source[:decl.start_byte] + b" " * (decl.end_byte - decl.start_byte) + unit.source[decl.end_byte:]
    text = _COMMENTS.sub(lambda m: re.sub(rb"[^\n]", b" ", m.group(0)), text)
    array = "[" in node_text(unit.source, decl).split("=")[0]
    for name in names:
        nm = re.escape(name.encode())
        if re.search(rb"\b" + nm + rb"\b" + _ACCESS + _WRITE_OP, text) or re.search(
                rb"(?:\+\+|--|(?<!&)&)\s*" + nm + rb"\b", text):
            return True
        if array and re.search(rb"\b" + nm + rb"\b(?!\s*[\[.])", text):
            return True
    return False


def constant_edits(unit: Unit) -> list:
    """``__constant__ float k[3] = {...};`` -> ``const float k[3] = {...};``."""
    edits = []
    for n, quals, names, const in declarations(unit):
        if not const:
            continue
        text = node_text(unit.source, n)
        text = re.sub(r"\b(__constant__|__device__)\b", "", text).strip()
        if not re.search(r"\b(const|constexpr)\b", text.split("=")[0]):
            text = "const " + text
        edits.append((n.start_byte, n.end_byte, text))
    return edits
