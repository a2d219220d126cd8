"""Templates named as values in host code, not called: where their instantiations come from
when no ``k<...><<<...>>>`` launch or call site names them.

- a kernel template passed to a launch helper (``launch(k<T, 0>, params, x, y)``) or taken
  by address (``auto kernel = &k<T>; kernel<<<...>>>``): its written template arguments are
  an instantiation, through the enclosing host template's bindings like a launch's;
- a host template returned or stored as a function pointer (``return convert_cuda;`` in a
  function returning ``to_fp16_cuda_t``): the pointer type's parameters bind its template
  parameters, as a call's argument types would.

See NOTE [templates named as values].
"""

from __future__ import annotations

import re

from .parse import Launch, node_text, split_template_args, walk

__all__ = ["kernel_references", "value_bindings"]

# NOTE [templates named as values]: real backends launch most kernels through a helper that
# takes the kernel as a function pointer (``helper(k<T, 0>, launch_params, args...)`` then
# ``kernel<<<...>>>(args...)`` inside it), through ``auto kernel = &k<Traits>`` picked in a
# switch, or hand out host launchers from a table of function pointers typed by an alias
# (``to_fp16_cuda_t get(type) { ... return dequantize_row_cuda; }``). None of these names the
# kernel at a ``<<<>>>`` site or calls the host template, so neither the launch sites nor the
# call sites gave those kernels any instantiation. A template named as a value has exactly
# the instantiation its written arguments (and, for a function pointer of known type, the
# pointer's parameter types) select: the same facts a call gives, read from another place.

_SKIP_PARENTS = ("function_declarator", "template_declaration", "call_expression")


def _index(unit) -> dict:
    """name -> [(enclosing Function or None, node)] for every template function named as a
    value (not called, not declared) anywhere in the unit (found once per unit)."""
    cached = unit.__dict__.get("_xv_value_refs")
    if cached is not None:
        return cached
    cached = {}
    templates = {f.name for f in unit.functions if f.template_params}
    by_node = {f.node.id: f for f in unit.functions}
    for n in walk(unit.tree.root_node):
        if n.type == "template_function":
            name_node = n.child_by_field_name("name")
        elif n.type == "identifier":
            name_node = n
            if n.parent is not None and n.parent.type in ("template_function", "qualified_identifier"):
                continue  # counted as the template_function / qualified name itself
        else:
            continue
        if name_node is None:
            continue
        name = node_text(unit.source, name_node).split("::")[-1].strip()
        if name not in templates:
            continue
        p = n.parent
        if p is None or p.type in _SKIP_PARENTS and (
                p.type != "call_expression" or p.child_by_field_name("function") == n):
            continue  # the function of a call (or a launch), or a declaration's own name
        f = p
        while f is not None and f.type != "function_definition":
            f = f.parent
        cached.setdefault(name, []).append((by_node.get(f.id) if f is not None else None, n))
    unit.__dict__["_xv_value_refs"] = cached
    return cached


def kernel_references(unit, kernel: str) -> list:
    """Pseudo-launches (no configuration, no arguments) for each place a host function
    names kernel template ``kernel`` with written template arguments without launching it."""
    out = []
    for fn, n in _index(unit).get(kernel, []):
        if fn is None or fn.kind != "host" or n.type != "template_function":
            continue
        targs = split_template_args(node_text(unit.source, n.child_by_field_name("arguments"))[1:-1])
        out.append(Launch(kernel, targs, [], [], fn.name, n.start_point[0] + 1, n))
    return out


def value_bindings(unit, host) -> list:
    """[(enclosing Function or None, {template parameter: text})] for each place host
    template ``host`` is named as a value: its written arguments, the rest bound from the
    function-pointer type it is converted to; only complete bindings."""
    own = [t for _, t in host.template_params]
    out = []
    for fn, n in _index(unit).get(host.name, []):
        given = []
        if n.type == "template_function":
            given = split_template_args(node_text(unit.source, n.child_by_field_name("arguments"))[1:-1])
        if len(given) > len(own):
            continue
        env = dict(zip(own, given))
        target = _target_type(unit, fn, n)
        params = _pointer_params(unit, target) if target else None
        if params is not None and len(params) == len(host.params):
            for p, text in zip(host.params, params):
                if p.base in own and p.base not in env:
                    bound = _bind(p, text)
                    if bound:
                        env[p.base] = bound
        for t in own:
            if t not in env and t in host.template_defaults:
                env[t] = host.template_defaults[t]
        if len(env) == len(own):
            out.append((fn, env))
    return out


def _target_type(unit, fn, n) -> str | None:
    """The type a value is converted to: the enclosing function's return type when it is
    returned, the declared type when it initializes a variable (or an array of them)."""
    p = n.parent
    while p is not None and p.type in ("conditional_expression", "parenthesized_expression",
                                       "pointer_expression", "initializer_list"):
        p = p.parent
    if p is None:
        return None
    if p.type == "return_statement" and fn is not None:
        t = fn.node.child_by_field_name("type")
        return node_text(unit.source, t) if t is not None else None
    if p.type == "init_declarator" and p.parent is not None and p.parent.type == "declaration":
        t = p.parent.child_by_field_name("type")
        return node_text(unit.source, t) if t is not None else None
    return None


_TYPEDEF_PTR = re.compile(r"\btypedef\s+([^;{}()]*?)\(\s*\*\s*(\w+)\s*\)\s*\(([^;{}]*)\)\s*;")
_TYPEDEF = re.compile(r"\btypedef\s+([^;{}()]+?)\s+(\w+)\s*;")
_USING = re.compile(r"(?:\btemplate\s*<([^;{}]*?)>\s*)?\busing\s+(\w+)\s*=\s*([^;{}]+);")


def _aliases(unit) -> dict:
    """name -> (template parameter names, aliased type text), from the unit's ``typedef``s
    and ``using`` aliases (found once per unit); a function-pointer typedef as
    ``R (*)(params)``."""
    cached = unit.__dict__.get("_xv_aliases")
    if cached is None:
        text = unit.source.decode(errors="replace")
        cached = {}
        for m in _TYPEDEF.finditer(text):
            cached.setdefault(m.group(2), ([], m.group(1)))
        for m in _TYPEDEF_PTR.finditer(text):
            cached[m.group(2)] = ([], f"{m.group(1)} (*)({m.group(3)})")
        for m in _USING.finditer(text):
            names = [re.findall(r"\w+", p)[-1] for p in split_template_args(m.group(1) or "") if re.findall(r"\w+", p)]
            cached.setdefault(m.group(2), (names, m.group(3).strip()))
        unit.__dict__["_xv_aliases"] = cached
    return cached


def _pointer_params(unit, type_text: str, depth: int = 0) -> list | None:
    """Parameter texts of the function-pointer type ``type_text`` names, following typedefs
    and alias templates (``to_fp16_cuda_t`` -> ``to_t_cuda_t<half>`` -> ``void (*)(const
    void * x, half * y, ...)``); None when it is not one."""
    text = " ".join(re.sub(r"\b(const|static|inline)\b", " ", type_text).split())
    m = re.fullmatch(r"[^()]*\(\s*\*\s*\)\s*\((.*)\)", text)
    if m:
        return split_template_args(m.group(1))
    if depth > 6:
        return None
    m = re.fullmatch(r"(?:[\w:]+::)?(\w+)\s*(?:<(.*)>)?", text)
    if m is None or m.group(1) not in _aliases(unit):
        return None
    names, aliased = _aliases(unit)[m.group(1)]
    args = split_template_args(m.group(2)) if m.group(2) else []
    if len(args) != len(names):
        return None
    for name, value in zip(names, args):
        aliased = re.sub(rf"\b{re.escape(name)}\b", value, aliased)
    return _pointer_params(unit, aliased, depth + 1)


def _bind(p, text: str) -> str | None:
    """What parameter text ``text`` of a pointer type binds host parameter ``p``'s template
    type to (``half * y`` against ``dst_t * y``: half); None when the shapes differ."""
    t = " ".join(re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", text).split())
    words = re.sub(r"[*&]", " ", t).split()
    if len(words) > 1 and re.fullmatch(r"[A-Za-z_]\w*", words[-1]) and not re.search(r"[*&]\s*$", t) \
            and words[-1] not in ("int", "long", "short", "char", "double", "float", "unsigned", "signed"):
        t = t[:t.rindex(words[-1])].strip()  # the parameter's name
    stars = t.count("*")
    base = " ".join(re.sub(r"[*&]", " ", t).split())
    if stars != p.type.count("*") or p.reference != ("&" in t) or not base:
        return None
    return base
