"""Template instantiations of a kernel: from launch sites, argument types, requests.

- explicit launch-site arguments (``k<float, 4><<<...>>>``) when they are constants there;
- deduced from the launch's arguments: a ``T*`` parameter against the declared type of the
  host variable passed, following a host template's own callers (up to 3 levels);
- ``--instantiate 'k<...>'`` / ``mod["k<...>"]``.

A launch whose template argument is a host variable gives none; when that variable is also
the launch's block size (``k<bs><<<grid, bs>>>``), the kernel is *block-bound* and ``load()``
instantiates it per block size at launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import references
from .parse import Launch, at_file_scope, function_declarator, node_text, split_template_args, walk

__all__ = ["instantiations", "block_bound", "eager", "MAX_EAGER"]

# NOTE [eager instantiations]: a kernel template launched from host templates can have
# dozens of instantiations (T x block size x flags: 63 for one reduction sample), and each
# costs a device compile. The build compiles at most MAX_EAGER of them, chosen so every
# template argument value found appears in at least one where the cap allows; the others
# are reported as deferred and compiled on first use (``mod["k<...>"]``, as requested ones).
MAX_EAGER = 4


def instantiations(unit, fn, typedefs, extra) -> list:
    """Template argument lists for kernel ``fn``: launch sites, deduction, ``extra``."""
    out = []
    names = [t for _, t in fn.template_params]
    host_params = _host_template_params(unit)

    def add(args):
        args = list(args)
        if set(re.findall(r"[A-Za-z_]\w*", " ".join(args))) & host_params:
            return  # names a host template's parameter: not a concrete instantiation
        if len(args) < len(names):  # the rest from the defaults (k<float><<<...>>> with U = int)
            rest = [fn.template_defaults.get(t) for t in names[len(args):]]
            if None in rest:
                return
            args += rest
        if args and len(args) == len(names) and args not in out:
            out.append(args)
    # launch sites, then places that name the kernel without launching it (a function
    # pointer passed to a launch helper: NOTE [templates named as values])
    for launch in unit.launches + references.kernel_references(unit, fn.name):
        if launch.kernel != fn.name:
            continue
        if launch.template_args is not None:
            for args in _through_host_templates(unit, launch):
                args = _file_aliases(unit, launch.node, args, host_params)
                rest = names[len(args):]
                if rest and not all(t in fn.template_defaults for t in rest):
                    # k<forward, false><<<...>>>(x, ...): the rest deduced from the arguments
                    for full in _deduce(unit, fn, launch, dict(zip(names, args))):
                        add(full)
                else:
                    add(args)
        else:
            for args in _deduce(unit, fn, launch):
                add(args)
    # launches written inside a function-like macro, bound at each use of the macro
    for launch in macro_launches(unit, fn.name):
        for args in _through_host_templates(unit, launch):
            add(_file_aliases(unit, launch.node, args, host_params))
    # explicit instantiations of the kernel itself (template __global__ void k<float>(...);),
    # object-like macros in them replaced by their values
    for env in _explicit_instantiations(unit, fn):
        add([_expand_macros(unit, env[t]) for t in names])
    for e in extra:
        add(e)
    return out


_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def macro_launches(unit, kernel: str) -> list:
    """Pseudo-launches of ``kernel`` from function-like macros whose body launches it
    (``#define LAUNCH(T) k<T><<<grid, block>>>(...)``, the kernel's name possibly a
    parameter): one per use of the macro in a function, its parameters replaced by that
    use's arguments (``LAUNCH(float);`` -> ``k<float>``), at the use's place in the tree
    (so its constants in scope and its host template apply). Also a body that names the
    kernel's instantiation as a value (NOTE [kernels named in a macro])."""
    # NOTE [kernels named in a macro]: a kernel picker spelled with a macro,
    # ``#define kernel_instance(bpw) if (blocks_per_warp == bpw) return k<bpw>`` used as
    # ``kernel_instance(1); kernel_instance(2); ...`` in a host function returning a function
    # pointer, names each instantiation only in the macro's expansion; written out
    # (``return k<1>;``) it was found (NOTE [templates named as values]), through the macro
    # the kernel had none. A body's ``k<...>`` followed by ``;``, ``,``, ``)`` or its end is
    # such a value, bound at each use like a launch.
    src, out = unit.source, []
    for m in _DEFINE.finditer(src):
        name, params = m.group(1).decode(), [p.strip() for p in m.group(2).decode().split(",")]
        body = m.group(3).decode(errors="replace").replace("\\\n", " ")
        sites = []
        for k in re.finditer(r"\b(\w+)\s*<", body):
            if k.group(1) != kernel and k.group(1) not in params:
                continue
            depth, j = 1, k.end()
            while j < len(body) and depth:
                depth += {"<": 1, ">": -1}.get(body[j], 0)
                j += 1
            # a launch, or (NOTE [kernels named in a macro]) the kernel named as a value
            if depth == 0 and re.match(r"\s*(?:<<<|[;,)]|$)", body[j:]):
                sites.append((k.group(1), split_template_args(body[k.end():j - 1])))
        if not sites:
            continue
        for use in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\s*\(", src):
            if use.start() >= m.start() and use.start() < m.end():
                continue  # the definition itself
            depth, j = 1, use.end()
            while j < len(src) and depth:
                depth += {40: 1, 41: -1}.get(src[j], 0)
                j += 1
            given = split_template_args(src[use.end():j - 1].decode(errors="replace"))
            node = unit.tree.root_node.descendant_for_byte_range(use.start(), use.start())
            host = node
            while host is not None and host.type != "function_definition":
                host = host.parent
            fn = next((f for f in unit.functions if host is not None and f.node.id == host.id), None)
            if fn is None or fn.kind != "host" or len(given) != len(params):
                continue
            env = {p: g.strip() for p, g in zip(params, given)}
            for kname, targs in sites:
                if env.get(kname, kname) != kernel:
                    continue
                targs = [_subst(a, env) for a in targs]
                out.append(Launch(kernel, targs, [], [], fn.name, node.start_point[0] + 1, node))
    return out


def _file_aliases(unit, node, args, host_params) -> list:
    """A launch argument that is a file-scope type alias (``typedef TYPE T;`` then
    ``k<T><<<...>>>`` in ``main``) whose name some host template also uses as its own
    parameter: the alias's type, macros expanded, when no template around the launch
    declares that name (else it is that template's parameter, not concrete here)."""
    names = {a.strip() for a in args} & host_params
    if not names:
        return args
    n = node
    while n is not None:
        if n.type == "template_declaration":
            plist = n.child_by_field_name("parameters")
            names -= {node_text(unit.source, x) for x in walk(plist)
                      if x.type in ("type_identifier", "identifier")} if plist is not None else set()
        n = n.parent
    aliases = unit.__dict__.get("_xv_file_aliases")
    if aliases is None:
        aliases = {}
        for d in walk(unit.tree.root_node):
            if d.type == "type_definition" and at_file_scope(d):
                t, nm = d.child_by_field_name("type"), d.child_by_field_name("declarator")
                if t is not None and nm is not None and nm.type == "type_identifier":
                    aliases.setdefault(node_text(unit.source, nm), []).append(node_text(unit.source, t))
            elif d.type == "alias_declaration" and at_file_scope(d):
                nm, t = d.child_by_field_name("name"), d.child_by_field_name("type")
                if nm is not None and t is not None:
                    aliases.setdefault(node_text(unit.source, nm), []).append(node_text(unit.source, t))
        unit.__dict__["_xv_file_aliases"] = aliases
    out = []
    for a in args:
        found = aliases.get(a.strip(), []) if a.strip() in names else []
        out.append(_expand_macros(unit, found[0]) if len(set(found)) == 1 else a)
    return out


def _expand_macros(unit, text: str) -> str:
    """Object-like macros in ``text`` replaced by their values; a macro the unit defines
    more than once with different values (one per #if branch) is left to the SYCL
    compiler's preprocessor."""
    def value(m):
        name = m.group(0)
        if name not in unit.macros or not unit.macros[name]:
            return name
        defs = set(re.findall(rb"^[ \t]*#[ \t]*define[ \t]+" + re.escape(name.encode()) + rb"\b[ \t]*([^\n]*)",
                              unit.source, re.M))
        return unit.macros[name] if len(defs) == 1 else name
    for _ in range(4):
        new = re.sub(r"\b[A-Za-z_]\w*\b", value, text)
        if new == text:
            break
        text = new
    return text


def eager(insts: list, requested: list) -> tuple:
    """(compiled now, deferred): every requested instantiation, then found ones that bring
    a new (position, value) pair, up to MAX_EAGER found ones; see NOTE [eager instantiations]."""
    now = [i for i in insts if i in requested]
    found = [i for i in insts if i not in requested]
    picked, seen = [], set()
    for pass_ in (0, 1):
        for i in found:
            if len(picked) >= MAX_EAGER:
                break
            new = {(k, v) for k, v in enumerate(i)} - seen
            if i not in picked and (new or pass_ == 1):
                picked.append(i)
                seen |= new
    return [i for i in insts if i in now or i in picked], [i for i in found if i not in picked]


def _host_template_params(unit) -> set:
    """Parameter names of every template that is not device code (host function and class
    templates): a launch argument naming one is not concrete."""
    cached = unit.__dict__.get("_xv_host_tparams")
    if cached is None:
        cached = set()
        for n in walk(unit.tree.root_node):
            if n.type != "template_declaration":
                continue
            head = node_text(unit.source, n)[:600]
            body = n.named_children[-1] if n.named_children else None
            if body is not None and body.type == "function_definition" and re.search(
                    r"\b(__global__|__device__)\b", head):
                continue
            plist = n.child_by_field_name("parameters")
            for p in plist.named_children if plist is not None else []:
                ids = [x for x in walk(p) if x.type in ("type_identifier", "identifier")]
                dflt = p.child_by_field_name("default_type") or p.child_by_field_name("default_value")
                ids = [x for x in ids if dflt is None or x.end_byte <= dflt.start_byte]
                if ids:
                    cached.add(node_text(unit.source, ids[-1] if "type_parameter" not in p.type else ids[0]))
        unit.__dict__["_xv_host_tparams"] = cached
    return cached


def block_bound(unit, fn) -> bool:
    """``k<bs><<<grid, bs>>>``: one non-type template parameter, given at every launch site
    as the very expression that is the block size."""
    sites = [l for l in unit.launches if l.kernel == fn.name and l.template_args]
    return (len(fn.template_params) == 1 and fn.template_params[0][0] == "value" and bool(sites)
            and all(len(l.config) >= 2 and l.template_args[0].replace(" ", "") ==
                    l.config[1].replace(" ", "") for l in sites))


def _through_host_templates(unit, launch) -> list:
    """The launch's template arguments when they are constants there; an argument that is
    the enclosing host template's own parameter takes each value that host template's
    callers give it explicitly (``launcher<matmul_naive>(...)``); one named from a generic
    lambda's tag parameter takes each tag the lambda is called with (NOTE [lambda tags])."""
    out = []
    for args in lambda_tags(unit, launch.node, _local_constants(unit, launch)):
        for got in _host_bindings(unit, launch, args):
            if got not in out:
                out.append(got)
    return out


# NOTE [lambda tags]: host code keeps a run-time switch's values compile-time by calling a
# generic lambda with tag objects, `auto go = [&](auto D) { k<T, D><<<...>>>(...); };
# switch (dim) { case 0: go(std::integral_constant<int, 0>{}); ... }` (also
# `constexpr bool c = decltype(tag)::value;` and `std::true_type{}` tags). Each call of the
# lambda binds its `auto` parameters to the tags' values; a template argument that names
# the parameter (`D`, `decltype(D)::value`, `D.value`, `D()`) takes each bound value.
_TAG = re.compile(r"^(?:::)?(?:std\s*::\s*)?(?:integral_constant\s*<[^,<>]+,\s*(?P<v>.+)>|"
                  r"bool_constant\s*<\s*(?P<b>.+)>|(?P<t>true|false)_type)\s*(?:\{\s*\}|\(\s*\))$", re.S)


def lambda_tags(unit, node, args) -> list:
    """``args`` once per binding of the tag parameters of the generic lambdas around
    ``node`` that they name (NOTE [lambda tags]); ``[args]`` when they name none."""
    out = [list(args)]
    n = node
    while n is not None and n.type not in ("function_definition", "translation_unit"):
        if n.type == "lambda_expression":
            out = [b for a in out for b in _bind_lambda(unit, n, a)]
        n = n.parent
    return out


def _bind_lambda(unit, lam, args) -> list:
    s = unit.source
    decl = lam.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    if plist is None:
        return [args]
    params = []
    for i, p in enumerate(x for x in plist.named_children if x.type == "parameter_declaration"):
        ident = [x for x in walk(p) if x.type == "identifier"]
        if "auto" in node_text(s, p).split("=")[0].replace("&", " ").split() and ident:
            params.append((i, node_text(s, ident[-1])))
    params = [(i, nm) for i, nm in params if any(re.search(rf"\b{re.escape(nm)}\b", a) for a in args)]
    if not params:
        return [args]
    holder = lam.parent
    if holder is None or holder.type != "init_declarator":
        return []
    var = holder.child_by_field_name("declarator")
    var = node_text(s, var) if var is not None else ""
    scope = holder
    while scope is not None and scope.type not in ("compound_statement", "function_definition"):
        scope = scope.parent
    out = []
    for call in (x for x in walk(scope) if x.type == "call_expression" and x.start_byte > lam.end_byte):
        f = call.child_by_field_name("function")
        if f is None or f.type != "identifier" or node_text(s, f) != var:
            continue
        given = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
        env = {}
        for i, nm in params:
            m = _TAG.match(" ".join(node_text(s, given[i]).split())) if i < len(given) else None
            if m is None:
                break
            value = m.group("v") or m.group("b") or m.group("t")
            env[nm] = _local_constants(unit, _Site(call, [value.strip()]))[0]
        if len(env) != len(params):
            continue
        got = []
        for a in args:
            for nm, v in env.items():
                q = re.escape(nm)
                a = re.sub(rf"\bdecltype\s*\(\s*{q}\s*\)\s*::\s*value\b|\b{q}\s*\.\s*value\b|"
                           rf"\b{q}\s*\(\s*\)|\b{q}\b", f"({v})", a)
            got.append(_fold(a))
        if got not in out:
            out.append(got)
    return out


def _host_bindings(unit, launch, args) -> list:
    host = unit.function(launch.host)
    own = [t for _, t in host.template_params] if host is not None else []
    dispatch = _dispatch_types(unit, launch)
    named = {k: v for k, v in dispatch.items() if any(re.search(rf"\b{re.escape(k)}\b", a) for a in args)}
    if named:  # inside AT_DISPATCH_* (or the unit's own): each combination of the bound values
        combos = [list(args)]
        for alias, types in named.items():
            combos = [[_fold(re.sub(rf"\b{re.escape(alias)}\b", str(t), a)) for a in c]
                      for c in combos for t in types]
        out = []
        for c in combos:
            if c not in out and not _runtime_values(unit, launch, c):
                out.append(c)
        if not any(re.search(rf"\b{re.escape(t)}\b", a) for a in out[0] for t in own) if out else True:
            return out
        args_list = out
        out = []
        for env in host_envs(unit, host):
            for c in args_list:
                got = [_fold(_subst(a, env)) for a in c]
                if got not in out and not _runtime_values(unit, launch, got):
                    out.append(got)
        return out
    if not any(re.search(rf"\b{re.escape(t)}\b", a) for a in args for t in own):
        return [] if _runtime_values(unit, launch, args) else [args]
    out = []
    for env in host_envs(unit, host):  # each binding of the host template's parameters
        got = [_fold(_subst(a, env)) for a in args]
        if got not in out and not _runtime_values(unit, launch, got):
            out.append(got)
    return out


def _subst(text: str, env: dict) -> str:
    if not env:
        return text
    rx = re.compile(r"\b(" + "|".join(re.escape(k) for k in env) + r")\b")
    return rx.sub(lambda m: env[m.group(1)], text)


MAX_DEPTH, MAX_ENVS = 6, 64


def _calls_by_name(unit) -> dict:
    """name -> [(caller Function, call_expression node)] over every function of the unit
    (found once per unit)."""
    cached = unit.__dict__.get("_xv_calls")
    if cached is None:
        cached = {}
        for caller in unit.functions:
            for n in walk(caller.node):
                if n.type != "call_expression":
                    continue
                f = n.child_by_field_name("function")
                if f is None or any(c.type == "kernel_call_syntax" for c in n.children):
                    continue
                if f.type == "template_function":
                    name = node_text(unit.source, f.child_by_field_name("name"))
                elif f.type in ("identifier", "qualified_identifier"):
                    name = node_text(unit.source, f)
                else:
                    continue
                cached.setdefault(name.split("::")[-1].strip(), []).append((caller, n))
        unit.__dict__["_xv_calls"] = cached
    return cached


def _explicit_instantiations(unit, host) -> list:
    """Bindings from explicit instantiations of host template ``host``
    (``template void reduce<float>(int, float *);``): the written template arguments, the
    rest matched from the parameter types."""
    from .parse import _param
    own = [t for _, t in host.template_params]
    out = []
    # written out, then made by a file-scope macro use (NOTE [instantiations through a macro])
    nodes = [(unit, n) for n in walk(unit.tree.root_node)]
    nodes += [(sub, n) for sub in macro_expansions(unit) for n in walk(sub.tree.root_node)]
    for src, n in nodes:
        if n.type != "template_instantiation":
            continue
        d = function_declarator(n.child_by_field_name("declarator"))
        if d is None or d.child_by_field_name("declarator") is None:
            continue
        callee = d.child_by_field_name("declarator")
        text = node_text(src.source, callee)
        if text.split("<")[0].split("::")[-1].strip() != host.name:
            continue
        given = split_template_args(text[text.index("<") + 1:text.rindex(">")]) if "<" in text else []
        env = dict(zip(own, [_expand_macros(unit, g) for g in given]))
        plist = d.child_by_field_name("parameters")
        ps = [_param(src.source, p, i) for i, p in enumerate(plist.named_children)
              if p.type == "parameter_declaration"] if plist is not None else []
        for hp, ip in zip(host.params, ps):
            if hp.base in own and hp.base not in env:
                env[hp.base] = ip.base
        for t in own:
            if t not in env and t in host.template_defaults:
                env[t] = host.template_defaults[t]
        if len(env) == len(own) and env not in out:
            out.append(env)
    return out


# NOTE [instantiations through a macro]: libraries instantiate their kernels (and host
# templates) for each type and option with a macro used at file scope, ``#define MAKE_K(op,
# T) template __global__ void k<T, op>(T *x, int n);`` then ``MAKE_K(ADD, float)``; the
# parser sees a call, not a ``template_instantiation``, so the kernel had none. Each such
# use is expanded (closure's expander: arguments, ``##``, nested macros of the unit) and
# parsed on its own; its explicit instantiations bind like written ones. The uses themselves
# are dropped from the output like written explicit instantiations (closure.drop_edits):
# they instantiate kernels the SYCL build may not have.
def macro_expansions(unit) -> list:
    """Parsed expansions of the file-scope uses of the unit's function-like macros that
    expand to explicit instantiations (NOTE [instantiations through a macro])."""
    got = unit.__dict__.get("_xv_macro_insts")
    if got is None:
        from . import closure, parse
        got = []
        defs = closure._function_macros(unit)
        texts = [node_text(unit.source, it) for it in closure.items(unit)] if defs else []
        texts += [unit.source[a:b].decode(errors="replace") for a, b in getattr(unit, "opaque", ())
                  if defs]  # a use the parser could not read (parse.Unit.opaque)
        for text in texts:
            exp = closure.macro_instantiation_text(unit, text, defs)
            if exp is None:
                continue
            try:
                got.append(parse.parse_source(exp.encode(), "<macro>"))
            except parse.ParseError:
                continue
        unit.__dict__["_xv_macro_insts"] = got
    return got


def host_envs(unit, host, depth: int = 0, stack=()) -> list:
    """Every binding {template parameter: concrete text} of host function template ``host``
    that the unit's own code gives it: explicit template arguments at its call sites and
    the ones deduced from the declared types of the call's arguments, each followed
    through the callers' own template parameters (a host template called by a host
    template called with ``<float>``, up to MAX_DEPTH calls away). [{}] for a plain
    function; [] when no call site binds every parameter."""
    own = [t for _, t in host.template_params]
    if not own:
        return [{}]
    if depth > MAX_DEPTH or (host.name, host.node.start_byte) in stack:
        return []
    memo = unit.__dict__.setdefault("_xv_envs", {})
    if (id(host), depth) in memo:
        return memo[(id(host), depth)]
    out = _explicit_instantiations(unit, host)
    for caller, call in _calls_by_name(unit).get(host.name, []):
        f = call.child_by_field_name("function")
        given = (split_template_args(node_text(unit.source, f.child_by_field_name("arguments"))[1:-1])
                 if f.type == "template_function" else [])
        if len(given) > len(own):
            continue
        if given:  # constexpr bool B = true; f<T, B>(...): the constants in scope
            given = _local_constants(unit, _Site(call, given))
        for tagged in lambda_tags(unit, call, given):  # NOTE [lambda tags]
            _bind_call(unit, host, caller, call, tagged, own, depth, stack, out)
        if len(out) >= MAX_ENVS:
            break
    # named as a value (a function pointer returned or stored): NOTE [templates named as values]
    for caller, env in references.value_bindings(unit, host):
        if len(out) >= MAX_ENVS:
            break
        _add_through_caller(unit, host, caller, None, env, depth, stack, out)
    memo[(id(host), depth)] = out[:MAX_ENVS]
    return memo[(id(host), depth)]


def _bind_call(unit, host, caller, call, given, own, depth, stack, out) -> None:
    """One call of host template ``host`` with template arguments ``given``: its binding
    (the rest deduced from the call's arguments, or defaults), followed through the caller."""
    env = dict(zip(own, given))
    args_node = call.child_by_field_name("arguments")
    args = [node_text(unit.source, a) for a in args_node.named_children
            if a.type != "comment"] if args_node is not None else []
    lo, hi = _arity(host)
    if not lo <= len(args) <= hi:
        return  # an overload of another arity (f(ctx, a, b) beside f(a, b, c, ...))
    decl = _declared(unit, caller)
    for p, a in zip(host.params, args):
        if p.base in own and p.base not in env:
            a = a.strip().lstrip("&").strip()
            ptr = re.match(r"(\w+)\s*[+-](?![-+=>])", a) if p.pointer else None
            if re.fullmatch(r"\w+", a) and decl.get(a):
                env[p.base] = decl[a]
            elif ptr and decl.get(ptr.group(1)):  # x + i3*n: the pointer's own type
                env[p.base] = decl[ptr.group(1)]
            elif _bound_by_cast(p, a):  # clamp_cuda((const half *) src_d, ...): T = half
                env[p.base] = _bound_by_cast(p, a)
    for t in own:
        if t not in env and t in host.template_defaults:
            env[t] = host.template_defaults[t]
    if len(env) < len(own):
        return
    _add_through_caller(unit, host, caller, call, env, depth, stack, out)


def _arity(fn) -> tuple:
    """(fewest, most) arguments a call of ``fn`` may give: its parameters without a default
    value, and all of them (defaulted ones included; no bound when variadic)."""
    d = function_declarator(fn.node.child_by_field_name("declarator"))
    plist = d.child_by_field_name("parameters") if d is not None else None
    if plist is None:
        return len(fn.params), len(fn.params)
    kinds = [c.type for c in plist.named_children if c.type != "comment"]
    if "variadic_parameter_declaration" in kinds or any(c.type == "..." for c in plist.children):
        return kinds.count("parameter_declaration"), 1 << 30
    return kinds.count("parameter_declaration"), len(kinds)


def _add_through_caller(unit, host, caller, call, env, depth, stack, out) -> None:
    """Add binding ``env`` of ``host`` found in ``caller`` to ``out``, once per binding of
    the caller's own template parameters it mentions and per type of an enclosing
    AT_DISPATCH (``call``: the call node, None for a reference outside a call)."""
    tparams = [x for _, x in caller.template_params] if caller is not None else []
    mentions = [t for t in tparams if any(re.search(rf"\b{re.escape(t)}\b", v) for v in env.values())]
    outer = host_envs(unit, caller, depth + 1, stack + ((host.name, host.node.start_byte),)) if mentions else [{}]
    dispatch = _dispatch_types_at(unit, call) if call is not None else {}
    for o in outer:
        for alias, types in (dispatch.items() or [(None, [None])]):
            for t in types:
                e = {k: _subst(v, o) for k, v in env.items()}
                if alias:
                    e = {k: re.sub(rf"\b{alias}\b", t, v) for k, v in e.items()}
                if e not in out:
                    out.append(e)


_INTS = ["int64_t", "int32_t", "int16_t", "int8_t", "uint8_t"]
_SCALAR_TYPES = {"Half": "c10::Half", "BFloat16": "__nv_bfloat16", "Float": "float", "Double": "double",
                 "Int": "int32_t", "Long": "int64_t", "Short": "int16_t", "Char": "int8_t",
                 "Byte": "uint8_t", "Bool": "bool"}


def _dispatch_types(unit, launch) -> dict:
    return _dispatch_types_at(unit, launch.node)


def _dispatch_types_at(unit, node) -> dict:
    """``AT_DISPATCH_FLOATING_TYPES_AND_HALF(t.scalar_type(), "op", [&] { k<scalar_t><<<..>>> })``
    -> {"scalar_t": ["float", "double", "c10::Half"]}: the aliases the enclosing PyTorch
    dispatch macros bind, and the C++ types they bind them to (c10's Half/BFloat16 as CUDA's);
    also the names a dispatch macro of the unit's own binds (NOTE [project dispatch macros]).
    Every enclosing dispatch call counts (nested ones bind different names)."""
    out: dict = {}
    own = _own_dispatch_macros(unit)
    n = node.parent
    while n is not None and n.type not in ("function_definition", "translation_unit"):
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            name = node_text(unit.source, f) if f is not None else ""
            if name in own:
                params, binds = own[name]
                given = [x for x in n.child_by_field_name("arguments").named_children if x.type != "comment"]
                for k, v in binds.items():
                    if k in params:  # BOOL_SWITCH(cond, kFlag, ...): the name is an argument
                        i = params.index(k)
                        if i >= len(given):
                            continue
                        k = node_text(unit.source, given[i]).strip()
                    out.setdefault(k, v)
            elif name.startswith("AT_DISPATCH_"):
                for k, v in _at_dispatch(unit, n, name).items():
                    out.setdefault(k, v)
        n = n.parent
    return out


# NOTE [project dispatch macros]: extensions write their own dispatch in the style of
# AT_DISPATCH_*, a function-like macro that switches on a run-time value and binds a
# compile-time name per case before calling the lambda it is given:
# `#define DISPATCH_OP(op, ...) [&] { switch (op) { case SUM: { static constexpr Op OP = SUM;
# return __VA_ARGS__(); } ... } }()`. A launch inside such a macro's lambda that names OP
# takes each value the macro binds it to (`constexpr`/`const` variables, `using`/`typedef`
# aliases written in its replacement text). The bound name may be one of the macro's
# parameters (`BOOL_SWITCH(cond, kFlag, [&] {...})` binding `static constexpr bool CONST_NAME
# = true;`): then the name is the argument given at the use.
_BINDING = re.compile(r"\b(?:constexpr|const)\b[^;=(){}]*?\b([A-Za-z_]\w*)\s*=\s*([^;{}]+?)\s*;|"
                      r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+?)\s*;|"
                      r"\btypedef\s+([^;{}]+?)\s+([A-Za-z_]\w*)\s*;")


def _own_dispatch_macros(unit) -> dict:
    """Function-like macros of the unit that call a lambda they are given (``__VA_ARGS__()``
    or a parameter called) after binding names: macro -> {name: [values, in order]}."""
    cached = unit.__dict__.get("_xv_dispatch_macros")
    if cached is None:
        cached = {}
        for m in _DEFINE.finditer(unit.source):
            params = [p.strip() for p in m.group(2).decode(errors="replace").split(",")]
            body = m.group(3).decode(errors="replace").replace("\\\n", " ")
            called = [c for c in (p if p != "..." else "__VA_ARGS__" for p in params if p)
                      if re.search(rf"\b{re.escape(c)}\s*\)?\s*\(\s*\)", body)]
            if not called:
                continue
            binds: dict = {}
            for b in _BINDING.finditer(body):
                name, value = (b.group(1), b.group(2)) if b.group(1) else \
                    (b.group(3), _Type(b.group(4))) if b.group(3) else (b.group(6), _Type(b.group(5)))
                if name in called:  # the lambda parameter itself
                    continue
                vals = binds.setdefault(name, [])
                value = type(value)(" ".join(value.split()))
                if value not in vals:
                    vals.append(value)
            if binds:
                cached.setdefault(m.group(1).decode(), ([p for p in params if p], binds))
        unit.__dict__["_xv_dispatch_macros"] = cached
    return cached


def _at_dispatch(unit, n, name) -> dict:
    """The aliases PyTorch's ``AT_DISPATCH_*`` call ``n`` binds."""
    if "INDEX_TYPES" in name:
        return {"index_t": ["int32_t", "int64_t"]}
    types = []
    if "FLOATING" in name or "ALL_TYPES" in name:
        types += ["float", "double"]
    if "INTEGRAL" in name or "ALL_TYPES" in name:
        types += _INTS
    if "HALF" in name:
        types.append("c10::Half")  # ATen's own Half (NOTE [c10::Half] in the torch compat header)
    if re.search(r"_AND\d?$", name):
        args = node_text(unit.source, n.child_by_field_name("arguments"))
        for m in re.finditer(r"\b(?:k|ScalarType::)(Half|BFloat16|Float|Double|Int|Long|Short|Char|Byte|Bool)\b", args):
            types.append(_SCALAR_TYPES[m.group(1)])
    if "REDUCED_FLOATING" in name:
        types = ["c10::Half", "__nv_bfloat16"]
    return {"scalar_t": list(dict.fromkeys(types))} if types else {}


@dataclass
class _Site:
    """A call site seen as a launch by ``_local_constants``: its node, template arguments."""
    node: object
    template_args: list


def _local_constants(unit, launch) -> list:
    """The launch's template arguments with the host's compile-time constants in scope
    (``const uint BM = 128;`` in an enclosing block, innermost first) replaced by their
    values, so ``k<BM, BN><<<...>>>`` instantiates as ``k<128, 128>``."""
    values, n, shadow = {}, launch.node, set()
    while n is not None and n.type not in ("function_definition", "translation_unit"):
        if n.type == "lambda_expression":  # its parameters hide the outer names
            d = n.child_by_field_name("declarator")
            pl = d.child_by_field_name("parameters") if d is not None else None
            for q in (pl.named_children if pl is not None else ()):
                ids = [x for x in walk(q) if x.type == "identifier"]
                if ids:
                    shadow.add(node_text(unit.source, ids[-1]))
        p = n.parent
        if p is not None and p.type in ("compound_statement", "case_statement"):
            for c in p.named_children:
                if c.start_byte >= n.start_byte:
                    break
                if c.type in ("alias_declaration", "type_definition"):  # using K = Traits<4, T>;
                    values.update((k, v) for k, v in _local_alias(unit, c).items() if k not in values)
                    continue
                if c.type != "declaration" or not re.search(
                        r"\b(const|constexpr)\b", node_text(unit.source, c).split("=")[0]):
                    continue
                for d in c.children_by_field_name("declarator"):
                    name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
                    if (d.type == "init_declarator" and name is not None and value is not None
                            and node_text(unit.source, name) not in shadow):
                        values.setdefault(node_text(unit.source, name), node_text(unit.source, value))
        n = p
    args = list(launch.template_args)
    for _ in range(4):
        new = [re.sub(r"\b[A-Za-z_]\w*\b", lambda m: _value_text(values[m.group(0)]) if m.group(0) in values
                      else m.group(0), a) for a in args]
        if new == args:
            break
        args = new
    return [a if a == b else _fold(a) for a, b in zip(args, launch.template_args)]


class _Type(str):
    """A local type alias's aliased type: substituted as it is (no parentheses)."""


def _value_text(v) -> str:
    return str(v) if isinstance(v, _Type) else f"({v})"


def _local_alias(unit, c) -> dict:
    """``using K = Traits<4, T>;`` / ``typedef Traits<4, T> K;`` -> {"K": "Traits<4, T>"}."""
    name, ty = c.child_by_field_name("name"), c.child_by_field_name("type")
    if c.type == "type_definition":
        name = c.child_by_field_name("declarator")
    if name is None or ty is None or name.type != "type_identifier":
        return {}
    return {node_text(unit.source, name): _Type(" ".join(node_text(unit.source, ty).split()))}


def _fold(expr: str) -> str:
    """An integer expression of literals folded to its value, a parenthesized ``true`` /
    ``false`` to the word (else as it is)."""
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", expr)
    word = re.fullmatch(r"\s*(\(\s*)*(true|false)(\s*\))*\s*", text)
    if word and text.count("(") == text.count(")"):
        return word.group(2)
    if re.fullmatch(r"[\d\s()+\-*/%<>&|^~]*", text):
        try:
            return str(int(eval(text.replace("/", "//"), {"__builtins__": {}}, {})))  # noqa: S307
        except Exception:
            return expr
    return expr


def _runtime_values(unit, launch, args=None) -> bool:
    """A launch-site template argument names a host variable or parameter (its value is
    only known when the host code runs), so the site gives no instantiation."""
    host = unit.function(launch.host)
    if host is None:
        return False
    names = {t for _, t in host.template_params}  # a host template's own parameters
    for n in walk(host.node):
        if n.type in ("parameter_declaration", "init_declarator", "optional_parameter_declaration"):
            ids = [x for x in walk(n) if x.type == "identifier"]
            if ids:
                names.add(node_text(unit.source, ids[0]))
    args = launch.template_args if args is None else args
    used = set(re.findall(r"[A-Za-z_]\w*", " ".join(args)))
    return bool(used & names) or any("." in a or "->" in a for a in args)


def _deduce(unit, fn, launch, fixed=None) -> list:
    """Template argument lists deduced from the launch's argument types (``T*`` against
    the declared type of a host variable); through host templates' own call sites.
    ``fixed``: the leading template arguments written at the launch site."""
    host = unit.function(launch.host)
    if host is None:
        return []
    per_param = {t: {v} for t, v in (fixed or {}).items()}
    dispatch = None
    for p, a in zip(fn.params, launch.args):
        for kind, tname in fn.template_params:
            if tname in (fixed or {}):
                continue
            # PyTorch extensions: x.packed_accessor32<scalar_t, 3, ...>() / x.data_ptr<T>()
            # against an accessor<T, ...> / T* parameter (scalar_t: each AT_DISPATCH type)
            acc = _TENSOR_ARG.search(a)
            if kind == "type" and acc and p.base != tname and re.search(rf"<\s*{re.escape(tname)}\s*,", p.type):
                dispatch = _dispatch_types(unit, launch) if dispatch is None else dispatch
                per_param.setdefault(tname, set()).update(dispatch.get(acc.group(1), [acc.group(1)]))
            elif kind == "type" and acc and p.base == tname:
                dispatch = _dispatch_types(unit, launch) if dispatch is None else dispatch
                per_param.setdefault(tname, set()).update(dispatch.get(acc.group(1), [acc.group(1)]))
            elif kind == "type" and p.base == tname:
                per_param.setdefault(tname, set()).update(_types_of(unit, host, a.strip(), 0))
            elif kind == "value" and re.search(rf"<\s*{re.escape(tname)}\s*>", p.type):
                # a tag argument: std::bool_constant<Atomic> against std::bool_constant<true>{}
                shape = re.escape(" ".join(re.sub(r"\bconst\b", "", p.type).split()))
                shape = shape.replace(re.escape(tname), r"\s*([\w:]+)\s*")
                m = re.fullmatch(shape + r"\s*(\{\s*\}|\(\s*\))?", " ".join(a.split()))
                declared = _declared(unit, host).get(a.strip()) if re.fullmatch(r"\w+", a.strip()) else None
                if m is None and declared:  # constexpr std::bool_constant<true> True; ... k(True)
                    m = re.fullmatch(shape, " ".join(re.sub(r"\b(constexpr|const)\b", "", declared).split()))
                if m and m.group(1) not in {t for _, t in host.template_params}:
                    per_param.setdefault(tname, set()).add(m.group(1))
    for _, t in fn.template_params:
        if not per_param.get(t) and t in fn.template_defaults:
            per_param[t] = {fn.template_defaults[t]}
    if not all(per_param.get(t) for _, t in fn.template_params):
        return []
    names = [t for _, t in fn.template_params]
    combos = [[]]
    for t in names:
        combos = [c + [v] for c in combos for v in sorted(per_param[t])]
    return combos


_TENSOR_ARG = re.compile(r"\.\s*(?:packed_accessor(?:32|64)?|generic_packed_accessor|data_ptr|data|"
                         r"mutable_data_ptr|const_data_ptr)\s*<\s*([\w:]+)")


def _declared(unit, host) -> dict:
    """name -> base type of file-scope variables, then (overriding them) the host
    function's parameters and local variables."""
    out = dict(_file_scope_names(unit))
    out.update({p.name: p.base for p in host.params})
    for n in walk(host.node):
        if n.type == "declaration" and n.child_by_field_name("type") is not None:
            out.update(_names(unit, n))
    return out


_CONTAINERS = ("translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif")


def _file_scope_names(unit) -> dict:
    """name -> base type of the file-scope variables (found once per unit)."""
    cached = unit.__dict__.get("_xv_globals")
    if cached is None:
        cached, stack = {}, [unit.tree.root_node]
        while stack:
            n = stack.pop()
            for c in n.children:
                if c.type in _CONTAINERS:
                    stack.append(c)
                elif c.type == "declaration":
                    cached.update(_names(unit, c))
        unit.__dict__["_xv_globals"] = cached
    return cached


def _names(unit, n) -> dict:
    out = {}
    if n.child_by_field_name("type") is None:
        return out
    ty = n.child_by_field_name("type")
    base = re.sub(r"\b(const|volatile|static|extern)\b", "", node_text(unit.source, ty)).strip()
    decls = n.children_by_field_name("declarator")
    if ty.type == "type_identifier" and decls:
        # a statement macro written without its ';' (GGML_TENSOR_LOCALS-style
        # ``LOCALS\n const float * p = ...;``) is read as the declaration's type, the real
        # type left between it and the declarator: that is the type
        rest = unit.source[ty.end_byte:decls[0].start_byte].decode(errors="replace")
        rest = re.sub(r"\b(const|volatile|static|extern|constexpr|inline|register)\b", " ", rest)
        if re.fullmatch(r"\s*[A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*\s*", rest):
            base = " ".join(rest.split())
    for d in decls:
        ids = [x for x in walk(d) if x.type == "identifier"]
        if ids:
            out[node_text(unit.source, ids[0])] = base
    return out


_C_CAST = re.compile(r"\(\s*((?:const\s+|volatile\s+)*[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)*)\s*([*&\s]*)\)\s*[\w(]")
_CXX_CAST = re.compile(r"(?:static|reinterpret|const)_cast\s*<\s*((?:const\s+|volatile\s+)*[A-Za-z_][\w:]*"
                       r"(?:\s+[A-Za-z_]\w*)*)\s*([*&\s]*)>\s*\(")
_NOT_TYPES = {"sizeof", "return", "alignof", "decltype"}


def cast_type(expr: str) -> str | None:
    """The base type an argument is cast to: ``(const half *) p`` / ``static_cast<float *>(p)``
    / ``(half) x`` -> ``half``, ``float``, ``half``; None for any other expression. Only a cast
    of the whole argument counts (a cast inside an arithmetic expression says nothing)."""
    expr = expr.strip()
    for rx in (_CXX_CAST, _C_CAST):
        m = rx.match(expr)
        if m is None:
            continue
        if rx is _CXX_CAST:  # the cast's ( ... ) must close at the end of the argument
            rest = expr[m.end() - 1:]
        else:
            rest = expr[m.end() - 1:]
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if rest[i:i + 2] == "->" or rest[i - 1:i + 1] == "->":
                continue  # (const float *) src->data: member access, not an operator
            if depth == 0 and (ch == ")" or rx is _C_CAST and ch in "+-*/%<>=?:|&^,"):
                if rx is _C_CAST and i < len(rest) - 1 and ch != ")":
                    return None
                if i < len(rest) - 1 and rx is _CXX_CAST:
                    return None
        base = " ".join(re.sub(r"\b(const|volatile)\b", "", m.group(1)).split())
        if not base or base.split()[0] in _NOT_TYPES:
            return None
        return base
    return None


def _bound_by_cast(p, expr: str) -> str | None:
    """What a cast argument binds parameter ``p``'s template type to: ``T *`` from
    ``(const half *) x`` is half, ``T`` from it is ``half *``; None when the pointer levels
    cannot match."""
    base = cast_type(expr)
    if base is None:
        return None
    stars = _cast_stars(expr)
    have = p.type.count("*")
    if stars == have:
        return base
    if have == 0 and not p.reference:
        return base + " " + "*" * stars
    return None


def _cast_stars(expr: str) -> int:
    m = _CXX_CAST.match(expr.strip()) or _C_CAST.match(expr.strip())
    return m.group(2).count("*") if m else 0


def _types_of(unit, host, expr, depth) -> set:
    if cast_type(expr):
        return {cast_type(expr)}
    if not re.fullmatch(r"\w+", expr) or depth > 3:
        return set()
    base = _declared(unit, host).get(expr)
    if base is None:
        return set()
    tnames = {t for k, t in host.template_params if k == "type"}
    if base not in tnames:
        return {base}
    # a host template's parameter: the types its call sites bind it to
    return {env[base] for env in host_envs(unit, host) if env.get(base)}
