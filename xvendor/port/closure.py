"""Which file-scope declarations device code needs: the kernels' device-reachable closure.

CUDA device code can only call ``__device__`` (or ``constexpr``) functions and use types,
constants and ``__constant__``/``__device__`` variables. Everything else at file scope is
host code (host classes holding ``cudaStream_t``, functors, explicit instantiations of host
templates, globals, ...) and must never reach the SYCL compiler: one host class using a host
API would break every kernel of its file. The closure starts from the kernels and follows
names: each kept declaration's identifiers select the declarations (and macros) that
declare them, until nothing new is reached. Names, not scopes: two namespaces declaring the
same type name both stay (harmless), and a type is kept whole (its host-only member
functions are dropped by the translator, as CUDA forbids calling them from device code).

Preprocessor lines (``#define``, ``#if`` ...) always stay; only declarations go.
"""

from __future__ import annotations

import re

from . import parse
from .parse import function_declarator, node_text, walk

__all__ = ["drop_edits", "items"]

CONTAINERS = {"translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
              "preproc_elifdef", "namespace_definition", "declaration_list",
              "linkage_specification"}
_PREPROC = {"preproc_def", "preproc_function_def", "preproc_call", "preproc_include",
            "comment", "#if", "#ifdef", "#ifndef", "#else", "#elif", "#endif", "#elifdef",
            "identifier", "preproc_defined", "binary_expression", "unary_expression",
            "parenthesized_expression", "number_literal", "preproc_arg", "call_expression",
            "namespace", "namespace_identifier", "{", "}", "extern", "string_literal", "\n",
            "preproc_directive", "char_literal", "true", "false"}
_ALWAYS = {"static_assert_declaration"}
_NAMES = ("identifier", "type_identifier", "namespace_identifier", "field_identifier")
_DEVICE = {"__device__", "__global__"}


def items(unit, spaces=None) -> list:
    """Every file-scope declaration node (inside #if branches, namespaces, extern "C");
    ``spaces`` (a dict) gets node id -> its namespace path (anonymous ones are transparent)."""
    out, stack = [], [(unit.tree.root_node, ())]
    while stack:
        n, path = stack.pop()
        if n.type == "namespace_definition":
            nm = n.child_by_field_name("name")
            if nm is not None:
                path = path + tuple(node_text(unit.source, nm).split("::"))
        for c in n.children:
            if spaces is not None:
                spaces[c.id] = path
            if c.type == "linkage_specification" and (c.child_by_field_name("body") is None or
                                                      c.child_by_field_name("body").type != "declaration_list"):
                out.append(c)  # extern "C" void f(); is one item: never leave a bare extern "C"
            elif c.type in CONTAINERS:
                stack.append((c, path))
            elif c.type not in _PREPROC and c.type != ";" and c.is_named:
                # the condition of an #if is a field of the preproc node, not an item
                if n.type.startswith("preproc_if") and c == n.child_by_field_name("condition"):
                    continue
                if n.type == "preproc_ifdef" and c == n.child_by_field_name("name"):
                    continue
                out.append(c)
    return out


def _unwrap(item):
    """``extern "C" <declaration>`` -> the declaration."""
    if item.type == "linkage_specification" and item.child_by_field_name("body") is not None:
        return item.child_by_field_name("body")
    return item


def _declared(unit, item) -> set:
    """Names ``item`` declares (functions, types, variables, enumerators, aliases)."""
    s, n = unit.source, _unwrap(item)
    while n.type == "template_declaration":
        inner = [c for c in n.named_children if c.type != "template_parameter_list"]
        if not inner:
            return set()
        n = inner[-1]
    out = set(_macro_declared(unit, n))
    if n.type == "function_definition":
        d = function_declarator(n.child_by_field_name("declarator"))
        if d is not None and d.child_by_field_name("declarator") is not None:
            out.add(node_text(s, d.child_by_field_name("declarator")).split("::")[-1].split("<")[0].strip())
        return out
    for c in walk(n):
        if c.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
            nm = c.child_by_field_name("name")
            if nm is not None:
                out.add(node_text(s, nm).split("<")[0])
        elif c.type == "enumerator":
            out.add(node_text(s, c.child_by_field_name("name")))
    if n.type in ("type_definition", "declaration", "field_declaration"):
        for d in n.children_by_field_name("declarator"):
            ids = [x for x in walk(d) if x.type in ("identifier", "type_identifier", "field_identifier")]
            if ids:
                out.add(node_text(s, ids[0]))
    elif n.type == "alias_declaration":
        out.add(node_text(s, n.child_by_field_name("name")))
    elif n.type == "namespace_alias_definition":  # namespace cg = cooperative_groups;
        nm = n.child_by_field_name("name")
        if nm is not None:
            out.add("ns:" + node_text(s, nm))  # only a namespace use (``cg::``) reaches it
    elif n.type == "using_declaration":  # using std::min; declares min here
        ids = [x for x in walk(n) if x.type in ("identifier", "type_identifier")]
        if ids:
            out.add(node_text(s, ids[-1]))
    return out


# NOTE [declarations through a macro]: a project can declare a family of device types or
# functions with one function-like macro used at file scope, ``#define ATOMIC(NAME) template
# <class T> struct Atomic##NAME##Impl {...};`` then ``ATOMIC(Add)``. The parser sees only a
# call ``ATOMIC(Add)``, which declares nothing by name, so the closure dropped it and every
# use of ``AtomicAddImpl`` was undeclared. The use is expanded here (parameters replaced by
# the arguments, ``##`` pasted, nested uses of the unit's function-like macros expanded up
# to 4 deep) and the expansion parsed on its own: the names its declarations declare are
# the use's. The use itself stays in the output as written (the macro does the rest).
_FN_MACRO = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_USE = re.compile(r"\s*(\w+)\s*\(")


def _function_macros(unit) -> dict:
    defs = unit.__dict__.get("_xv_fn_macros")
    if defs is None:
        defs = {}
        for m in _FN_MACRO.finditer(unit.source):
            params = [p.strip() for p in m.group(2).decode(errors="replace").split(",") if p.strip()]
            body = m.group(3).decode(errors="replace").replace("\\\n", "\n")
            defs.setdefault(m.group(1).decode(), (params, body))
        unit.__dict__["_xv_fn_macros"] = defs
    return defs


def _expand_uses(text: str, defs: dict, depth: int = 0) -> str:
    """``text`` with every use of a macro of ``defs`` replaced by its expansion."""
    if depth > 4:
        return text
    out, i = [], 0
    for m in re.finditer(r"\b(\w+)\s*\(", text):
        if m.start() < i or m.group(1) not in defs:
            continue
        depth_p, j = 1, m.end()
        while j < len(text) and depth_p:
            depth_p += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        if depth_p:
            break
        params, body = defs[m.group(1)]
        args = [a.strip() for a in parse.split_template_args(text[m.end():j - 1])] if params else []
        if params and params[-1] != "..." and len(args) != len(params):
            continue
        env = dict(zip(params, args))
        if params and params[-1] == "...":
            env["__VA_ARGS__"] = ", ".join(args[len(params) - 1:])
        body = re.sub(r"(?<!#)#(?!#)\s*(\w+)", lambda x: x.group(0) if x.group(1) not in env
                      else '"' + env[x.group(1)] + '"', body) if env else body
        body = re.sub(r"\b\w+\b", lambda x: env.get(x.group(0), x.group(0)), body)
        body = re.sub(r"\s*##\s*", "", body)
        out.append(text[i:m.start()])
        out.append(_expand_uses(body, {k: v for k, v in defs.items() if k != m.group(1)}, depth + 1))
        i = j
    out.append(text[i:])
    return "".join(out)


def _macro_declared(unit, n) -> set:
    """Names a file-scope use of a function-like macro declares (NOTE [declarations through
    a macro]); empty for anything else."""
    text = node_text(unit.source, n)
    m = _USE.match(text)
    defs = _function_macros(unit) if m else {}
    if not m or m.group(1) not in defs:
        return set()
    expanded = _expand_uses(text, defs)
    if expanded == text:
        return set()
    try:
        sub = parse.parse_source(expanded.encode(), "<macro>")
    except parse.ParseError:
        return set()
    return {nm for it in items(sub) for nm in _declared(sub, it)}


_INSTANTIATIONS = re.compile(r"(?:\s*(?:extern\s+)?template\s+(?!<)[^;{}]*;?)+\s*")


def macro_instantiation_text(unit, text: str, defs=None):
    """The expansion of ``text`` (a file-scope item's) when it is uses of function-like
    macros that expand to explicit instantiations only, else None (NOTE [instantiations
    through a macro] in instantiate.py)."""
    defs = _function_macros(unit) if defs is None else defs
    m = _USE.match(text)
    if not m or m.group(1) not in defs:
        return None
    exp = _expand_uses(text, defs)
    if exp == text or not _INSTANTIATIONS.fullmatch(exp):
        return None
    return exp


def _is_device_code(unit, item) -> bool:
    """A kernel, a ``__device__``/``constexpr`` function, or a function template of one."""
    item = _unwrap(item)
    kinds = {c.type for c in item.children}
    n = item
    while n.type == "template_declaration":
        n = n.named_children[-1]
        kinds |= {c.type for c in n.children}
    if kinds & _DEVICE:
        return True
    return n.type == "function_definition" and any(
        c.type == "type_qualifier" and node_text(unit.source, c) == "constexpr" for c in n.children)


def _kind(unit, item) -> str:
    """'function' | 'type' | 'variable' | 'instantiation' | 'other'."""
    n = _unwrap(item)
    while n.type == "template_declaration":
        n = n.named_children[-1]
    if n.type == "template_instantiation":
        return "instantiation"
    if n.type == "function_definition":
        return "function"
    if n.type == "declaration":
        if any(c.type == "function_declarator" for c in walk(n.child_by_field_name("declarator") or n)):
            return "prototype"
        if n.child_by_field_name("declarator") is None:
            return "type"  # struct X {...};
        return "variable"
    if n.type in ("struct_specifier", "class_specifier", "union_specifier", "enum_specifier",
                  "type_definition", "alias_declaration", "concept_definition", "using_declaration",
                  "namespace_alias_definition"):
        return "type"
    return "other"


def _referenced(unit, item) -> set:
    """(qualifier, name) of every name ``item`` uses (``db::load`` -> ("db", "load"))."""
    out = set()
    for c in walk(item):
        if c.type == "namespace_identifier":
            out.add(("", "ns:" + node_text(unit.source, c)))
        if c.type in _NAMES:
            q, p, me = "", c.parent, c
            if p is not None and p.type in ("template_function", "template_type") and p.parent is not None:
                p, me = p.parent, p
            if p is not None and p.type == "qualified_identifier" and p.child_by_field_name("name") == me:
                scope = p.child_by_field_name("scope")
                q = node_text(unit.source, scope).split("<")[0] if scope is not None else ""
            out.add((q, node_text(unit.source, c)))
    return out


def _visible(candidates, spaces, here, qual) -> list:
    """The candidates a name used in namespace ``here`` (as ``qual::name``) can mean; all of
    them when scoping cannot tell (a using-directive, a class scope)."""
    def ok(c):
        ns = spaces.get(c.id, ())
        if qual:
            return ns[-len(qual.split("::")):] == tuple(qual.split("::")) if ns else False
        return ns == here[:len(ns)]
    picked = [c for c in candidates if ok(c)]
    if picked and not qual:  # an inner namespace's declaration hides the outer ones
        deepest = max(len(spaces.get(c.id, ())) for c in picked)
        picked = [c for c in picked if len(spaces.get(c.id, ())) == deepest]
    return picked or list(candidates)




def drop_edits(unit, kernels: list, extra_names=()) -> list:
    """(start, end, "") edits deleting the file-scope declarations no kernel in ``kernels``
    (Function objects) reaches, nor ``extra_names`` (the template arguments the wrappers
    instantiate kernels with); also every explicit instantiation and host prototype."""
    spaces: dict = {}
    all_items = items(unit, spaces)
    by_name: dict = {}
    info = {}
    for it in all_items:
        kind = _kind(unit, it)
        names = _declared(unit, it)
        info[id(it)] = (kind, names)
        for nm in names:
            by_name.setdefault(nm, []).append(it)
    macros = {}
    for n in walk(unit.tree.root_node):
        if n.type in ("preproc_def", "preproc_function_def"):
            nm, v = n.child_by_field_name("name"), n.child_by_field_name("value")
            if nm is not None and v is not None:
                macros.setdefault(node_text(unit.source, nm), set()).update(
                    re.findall(r"[A-Za-z_]\w*", node_text(unit.source, v)))
    kernel_nodes = {k.outer.id for k in kernels}
    keep, todo, seen_names = set(), [None], set()
    for it in all_items:
        if it.id in kernel_nodes or _unwrap(it).id in kernel_nodes:  # extern "C" __global__
            keep.add(it.id)
            todo.append(it)
    # NOTE [free operators]: ``a * b`` never names ``operator*``: a device operator declared
    # at file scope is reached through the types it takes instead; it is kept once any
    # name of its parameter list is used by kept code (a type of the unit, or one of the
    # compat header's: ``float3``)
    operators = [(it, _param_names(unit, it)) for it in all_items
                 if info[id(it)][0] == "function" and _is_device_code(unit, it)
                 and any(nm.startswith("operator") for nm in info[id(it)][1])]
    used_names = set()
    while todo or operators:
        if not todo:
            woken = [it for it, names in operators if names & used_names]
            if not woken:
                break
            operators = [(it, names) for it, names in operators if not names & used_names]
            for it in woken:
                if it.id not in keep:
                    keep.add(it.id)
                    todo.append(it)
            continue
        it = todo.pop()
        here = spaces.get(it.id, ()) if it is not None else ()
        names = list(_referenced(unit, it)) if it is not None else [("", n) for n in extra_names]
        while names:
            qual, nm = names.pop()
            used_names.add(nm)
            if (here, qual, nm) in seen_names:
                continue
            seen_names.add((here, qual, nm))
            names.extend(("", m) for m in macros.get(nm, ()))
            for other in _visible(by_name.get(nm, ()), spaces, here, qual):
                if other.id in keep:
                    continue
                kind = info[id(other)][0]
                if kind in ("function", "prototype") and not _is_device_code(unit, other):
                    continue  # host code: device code cannot call it
                if kind == "instantiation":
                    continue
                if kind == "variable" and not _device_variable(unit, other):
                    continue  # a host global: device code cannot read it
                keep.add(other.id)
                todo.append(other)
    edits = []
    device = parse.device_words(unit.source)
    dropped_names = {nm for it in all_items if it.id not in keep for nm in info[id(it)][1]}
    kept_names = {nm for it in all_items if it.id in keep for nm in info[id(it)][1]}
    for it in all_items:
        if _redefines_builtin(unit, it, spaces):
            edits.append((it.start_byte, it.end_byte,
                          "/* a CUDA built-in vector type: never compiled by nvcc */"))
            continue
        if it.type in _ALWAYS:  # a static_assert stays unless it names a dropped declaration
            used = {nm for _, nm in _referenced(unit, it)}
            if not used & (dropped_names - kept_names):
                continue
        elif it.id in keep or _using_namespace(unit, it):
            continue
        if it.type == "ERROR" and device.search(unit.source, it.start_byte, it.end_byte) and \
                macro_instantiation_text(unit, node_text(unit.source, it)) is None:
            # NOTE [instantiations through a macro]
            continue  # unparsed device code (also through a macro): keep it visible
        end = it.end_byte
        nxt = it.next_sibling
        if nxt is not None and nxt.type == ";" and it.type in (
                "struct_specifier", "class_specifier", "union_specifier", "enum_specifier"):
            end = nxt.end_byte  # `struct X {...}` and its `;` are two nodes
        edits.append((it.start_byte, end, ""))
    # declarations the parser could not read (parse.Unit.opaque): kept when they hold device
    # code, like an unparsed ERROR node, else host code to drop
    for a, b in getattr(unit, "opaque", ()):
        if not device.search(unit.source, a, b) or macro_instantiation_text(
                unit, unit.source[a:b].decode(errors="replace")) is not None:
            edits.append((a, b, ""))
    return edits


# NOTE [built-in vector types]: CUDA declares these in every unit (cuda_runtime.h is
# included implicitly), so a definition of one at global scope cannot be in a branch nvcc
# compiles: it is the fallback of a host-only build (``#ifdef WITH_CUDA ... #else struct
# float2 {float x, y;}; #endif`` with WITH_CUDA set by the project's build). The compat
# header declares them too: the definition goes, whatever the #if around it says.
_BUILTIN_VECTOR = re.compile(r"(?:u?(?:char|short|int|long|longlong)|float|double)[1-4]|dim3")


def _redefines_builtin(unit, item, spaces) -> bool:
    if spaces.get(item.id, ()) or item.type not in ("struct_specifier", "declaration"):
        return False
    n = item if item.type == "struct_specifier" else item.child_by_field_name("type")
    if n is None or n.type != "struct_specifier" or n.child_by_field_name("body") is None:
        return False
    if item.type == "declaration" and item.child_by_field_name("declarator") is not None:
        return False  # struct float2 {...} v; declares a variable too: left alone
    nm = n.child_by_field_name("name")
    return nm is not None and bool(_BUILTIN_VECTOR.fullmatch(node_text(unit.source, nm)))


def _param_names(unit, item) -> set:
    """The type names a function's parameter list uses (NOTE [free operators])."""
    n = _unwrap(item)
    while n.type == "template_declaration":
        n = n.named_children[-1]
    d = function_declarator(n.child_by_field_name("declarator"))
    ps = d.child_by_field_name("parameters") if d is not None else None
    if ps is None:
        return set()
    return {node_text(unit.source, c) for c in walk(ps) if c.type == "type_identifier"}


def _device_variable(unit, item) -> bool:
    """``__constant__``/``__device__`` variables and compile-time constants."""
    text = node_text(unit.source, _unwrap(item))
    words = set(re.findall(r"\w+", text.split("=")[0]))
    return bool(words & {"__constant__", "__device__", "__shared__", "const", "constexpr"})


# namespaces the SYCL build declares (the C++ library, the compat header's CUDA ones)
_KNOWN_NAMESPACES = {"std", "cooperative_groups", "sycl", "xvc"}


def _using_namespace(unit, item) -> bool:
    """A ``using namespace N;`` to keep: N is declared by the unit or by the SYCL build
    (``using namespace std::chrono;`` names a host header that is dropped: it goes)."""
    m = re.match(r"using\s+namespace\s+([\w:]+)", node_text(unit.source, item).lstrip())
    if m is None:
        return False
    first = m.group(1).lstrip(":").split("::")[0]
    if m.group(1).lstrip(":") == "std" or first in _KNOWN_NAMESPACES - {"std"}:
        return True
    declared = unit.__dict__.get("_xv_namespaces")
    if declared is None:
        declared = unit.__dict__["_xv_namespaces"] = {
            node_text(unit.source, n.child_by_field_name("name")).split("::")[0]
            for n in walk(unit.tree.root_node)
            if n.type in ("namespace_definition", "namespace_alias_definition")
            and n.child_by_field_name("name") is not None}
    return first in declared
