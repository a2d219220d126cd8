"""CUDA kernels -> SYCL free-function kernels, by minimal in-place rewrites of the source.

What is rewritten (everything else is kept as written, comments included; the CUDA names
the kept code uses get their meaning from ``include/xvendor_cuda_compat.h``):

- each ``__global__`` kernel becomes an ordinary function ``<name>__xv_body`` plus one
  ``extern "C"`` nd_range<3> free-function wrapper per instantiation (the kernel's own name,
  or ``<name>__<args>`` for a template instantiation) that takes ABI-plain parameters
  (narrow scalars widened) and calls the body; with ``warp=32`` the wrapper requires
  32-wide sub-groups, so warp code keeps CUDA's lane arithmetic;
- static ``__shared__ T a[N][M]`` -> ``static work_group_static<T[N][M]>`` bound to a
  ``T(&)[N][M]`` reference (indexing unchanged);
- ``extern __shared__ T a[]`` -> ``T *a`` over the work-group local memory of a trailing
  ``work_group_memory<char[]>`` wrapper parameter whose byte size the launch sets;
- a device function passed by name (``cg::reduce(w, v, op)``) -> a forwarding lambda;
- host code (host functions, host globals, host-API types, ``#include``) is dropped;
  kernels that use a construct from ``constructs.UNSUPPORTED`` are dropped with their
  reason.

Template instantiations: see ``instantiate.py``. Typedefs (``floatX``) are resolved in the
``#if`` branch the file's own ``#define``s select (``conditions.py``), for the launch path's
dtype checks. Verified here: tests/port (kernels run on the OpenCL CPU device) and llm.c's
dev/cuda (bench/port_llmc*.py). Not verified: a GPU device (l2), CUTLASS-style sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import closure, conditions, constructs, instantiate as inst_mod, lints as lints_mod
from . import symbols as sym_mod
from . import torch_ops
from .parse import at_file_scope as _file_scope
from .parse import Function, Unit, node_text, split_template_args, walk

__all__ = ["KernelReport", "Instantiation", "Translation", "translate", "sycl_name"]

HEADER = "xvendor_cuda_compat.h"
HEADER_MORE = "xvendor_cuda_compat_more.h"  # device printf, clock()


@dataclass
class Instantiation:
    args: list  # template argument texts; [] for a plain kernel
    sycl_name: str
    params: list  # [(name, kind, pointee base type or None, writable)] of the wrapper
    symbols: list = field(default_factory=list)  # hidden trailing parameters: module symbols


@dataclass
class KernelReport:
    name: str
    status: str = "ok"  # ok | unsupported | compile_error
    reason: str = ""
    lints: list = field(default_factory=list)
    instantiations: list = field(default_factory=list)  # [Instantiation]
    line: int = 0
    file: str = ""  # the file that defines it (the source, or a header it includes)
    template: bool = False
    dynamic_shared: bool = False
    block_bound: bool = False  # its one template argument is the launch's block size
    deferred: list = field(default_factory=list)  # instantiations found, compiled on first use

    @property
    def sycl_name(self):
        return None if self.template else self.name

    def as_json(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason,
                "lints": list(self.lints), "line": self.line, "file": self.file,
                "compiled": None,
                "instantiations": [{"args": ", ".join(i.args), "sycl_name": i.sycl_name}
                                   for i in self.instantiations],
                "sycl_name": self.sycl_name, "block_bound": self.block_bound,
                "deferred": [", ".join(a) for a in self.deferred]}


@dataclass
class Translation:
    unit: Unit
    source: str  # the SYCL source (includes HEADER)
    kernels: list  # [KernelReport], one per kernel name, in source order
    warp: str

    def report(self, name: str) -> KernelReport:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def as_json(self) -> dict:
        return {"source": self.unit.path, "warp": self.warp,
                "kernels": [k.as_json() for k in self.kernels]}


def sycl_name(kernel: str, args: list) -> str:
    if not args:
        return kernel
    return kernel + "__" + re.sub(r"[^A-Za-z0-9]+", "_", "_".join(args)).strip("_")


def _typedefs(unit: Unit) -> dict:
    """alias -> type, from the #if branches the file's own #defines select; an alias with
    several candidates that cannot be told apart maps to None (its dtype is not checked)."""
    out, seen = {}, {}
    for n in walk(unit.tree.root_node):
        if n.type in ("type_definition", "alias_declaration"):
            on = conditions.active(unit, n)
            if on is False:
                continue
            d = n.child_by_field_name("declarator") or n.child_by_field_name("name")
            if d is not None:
                seen.setdefault(node_text(unit.source, d), []).append(on)
        if n.type == "type_definition" and conditions.active(unit, n) is not False:
            t, d = n.child_by_field_name("type"), n.child_by_field_name("declarator")
            if t is not None and d is not None and d.type == "type_identifier":
                out[node_text(unit.source, d)] = node_text(unit.source, t)
        elif n.type == "alias_declaration" and conditions.active(unit, n) is not False:
            nm, t = n.child_by_field_name("name"), n.child_by_field_name("type")
            if nm is not None and t is not None:
                out[node_text(unit.source, nm)] = node_text(unit.source, t)
    for name, states in seen.items():
        if len(states) > 1 and None in states:
            out[name] = None  # several branches, undecidable here
    return out


def _resolve(base: str, typedefs: dict) -> str:
    for _ in range(8):
        if typedefs.get(base) is None:
            break
        base = " ".join(re.sub(r"\b(const|volatile)\b", "", typedefs[base]).split())
    return base


def _subst(text: str, mapping: dict) -> str:
    for k, v in mapping.items():
        text = re.sub(rf"\b{re.escape(k)}\b", v, text)
    return text


def _unsupported(unit: Unit, fn: Function, gvars: dict) -> str:
    text = node_text(unit.source, fn.node)
    for c in sorted((n for n in walk(fn.node) if n.type == "comment"), key=lambda n: -n.start_byte):
        a, b = c.start_byte - fn.node.start_byte, c.end_byte - fn.node.start_byte
        text = text[:a] + " " + text[b:]  # byte offsets == char offsets for ASCII code
    # NOTE [dead PTX]: a branch the SYCL compile's preprocessor does not take (#if
    # __CUDA_ARCH__ >= ..., a feature macro defined only for an NVIDIA architecture) is
    # no reason to refuse: its text is blanked before the checks; the kernel gets a lint
    # (the branch taken instead is what runs: it may be a no-device-code stub)
    dead = conditions.dead_ranges(unit, fn.node)
    base = fn.node.start_byte
    for a, b in dead:
        a, b = max(a, base) - base, min(b, fn.node.end_byte) - base
        text = text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]
    if any(n.type == "gnu_asm_expression" and not any(a <= n.start_byte < b for a, b in dead)
           for n in walk(fn.node)):
        return "inline PTX (asm)"
    through = _asm_macro(unit, text)
    if through:
        return f"inline PTX (asm, through the macro '{through}')"
    body = fn.node.child_by_field_name("body")
    for rx, reason in constructs.UNSUPPORTED:
        if rx.search(text):
            return reason
    # NOTE [library through an alias or a macro]
    for alias, target in _library_aliases(unit).items():
        if re.search(rf"(?<![\w:.>]){re.escape(alias)}\s*::", text):
            return f"{constructs.LIBRARY_REASON} (through the namespace alias '{alias}' = {target})"
    through = _asm_macro(unit, text, _library_rx(unit), "_xv_lib_macros")
    if through:
        return f"{constructs.LIBRARY_REASON} (through the macro '{through}')"
    if body is not None:
        used = {node_text(unit.source, n) for n in walk(body) if n.type == "identifier"}
        for name in sorted(used & set(gvars)):
            return (f"{gvars[name]} symbol '{name}' with a non-zero initializer (the host could "
                    "not rewrite it; make it __constant__ const or set it from the host)")
        for n in walk(body):
            if n.type == "declaration" and any(c.type == "type_qualifier" and
                                               node_text(unit.source, c) == "__shared__"
                                               for c in n.children) and n.has_error:
                return f"a __shared__ declaration the parser could not read (line {n.start_point[0] + 1})"
    return ""


# NOTE [PTX through a macro]: hand-written tensor-core and async-copy code hides its inline
# PTX in a header's macros (``#define LDMATRIX_X4(R0, R1, R2, R3, addr) asm volatile(...)``);
# the kernel names only the macro, so the asm check missed it and the kernel failed to
# compile on whatever came next instead of being refused for the PTX. A macro counts when
# every definition of it in a branch the SYCL compile may take spells ``asm`` (itself or
# through the macros it uses): one definition with a portable fallback is no reason.
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\(")
_MACRO_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _macro_bodies(unit) -> dict:
    """name -> [replacement texts of its definitions outside branches never compiled]."""
    got = unit.__dict__.get("_xv_macro_bodies")
    if got is None:
        got = {}
        for n in walk(unit.tree.root_node):
            if n.type in ("preproc_def", "preproc_function_def") and conditions.active(unit, n) is not False:
                nm, v = n.child_by_field_name("name"), n.child_by_field_name("value")
                if nm is not None:
                    got.setdefault(node_text(unit.source, nm), []).append(
                        node_text(unit.source, v) if v is not None else "")
        unit.__dict__["_xv_macro_bodies"] = got
    return got


def _asm_macro(unit, text: str, rx=_ASM, memo_key="_xv_asm_macros") -> str:
    """The first macro ``text`` uses that expands to inline PTX (NOTE [PTX through a macro]),
    or to what ``rx`` matches (a library call: NOTE [library through an alias or a macro])."""
    bodies = _macro_bodies(unit)
    memo = unit.__dict__.setdefault(memo_key, {})

    def spells_asm(name, depth=0):
        if name in memo:
            return memo[name]
        memo[name] = False  # a recursive use ends here
        defs = bodies.get(name, [])
        ok = bool(defs) and depth < 6 and all(
            rx.search(b) or any(spells_asm(m, depth + 1) for m in set(_MACRO_NAME.findall(b))
                                  if m in bodies and m != name) for b in defs)
        memo[name] = ok
        return ok
    for m in dict.fromkeys(_MACRO_NAME.findall(text)):
        if m in bodies and spells_asm(m):
            return m
    return ""


# NOTE [library through an alias or a macro]: a project that builds for CUDA and ROCm names
# CUB through its own alias (``#if HIP namespace my_cub = hipcub; #else namespace my_cub = cub;
# #endif``) or a macro (``#define MY_SUM_OP cub::Sum()``); the library check saw neither, so
# the kernels failed to compile on the alias ("expected namespace name": CUB is not in the
# SYCL build) instead of being refused for the library call, and the alias's declaration
# broke the unit's other kernels until the build gave up. A namespace alias of a library
# namespace (in a branch the SYCL compile may take) counts like the library's own name, and
# so does a macro every live definition of which spells one (as for PTX through a macro).
def _library_aliases(unit) -> dict:
    """alias -> target of the unit's namespace aliases of library namespaces."""
    got = unit.__dict__.get("_xv_lib_aliases")
    if got is None:
        got = {}
        for n in walk(unit.tree.root_node):
            if n.type == "namespace_alias_definition" and conditions.active(unit, n) is not False:
                nm = n.child_by_field_name("name")
                target = node_text(unit.source, n)[len("namespace"):].split("=", 1)[-1]
                target = target.strip().rstrip(";").strip().lstrip(":")
                if nm is not None and constructs.LIBRARY_NAMESPACE.match(target):
                    got[node_text(unit.source, nm)] = target
        # an alias of an alias
        for _ in range(3):
            for a, t in list(got.items()):
                for n in walk(unit.tree.root_node):
                    if n.type == "namespace_alias_definition" and conditions.active(unit, n) is not False:
                        nm = n.child_by_field_name("name")
                        tt = node_text(unit.source, n).split("=", 1)[-1].strip().rstrip(";").strip()
                        if nm is not None and tt.lstrip(":").split("::")[0] == a:
                            got.setdefault(node_text(unit.source, nm), t)
        unit.__dict__["_xv_lib_aliases"] = got
    return got


def _library_rx(unit):
    aliases = _library_aliases(unit)
    extra = "|".join(re.escape(a) for a in aliases)
    return re.compile(constructs.LIBRARY.pattern + (rf"|(?<![\w:.>])({extra})\s*::" if extra else ""))


# empty tag types passed by value for compile-time dispatch: the wrapper makes them itself
_TAG = re.compile(r"^(std::)?(bool_constant|integral_constant|true_type|false_type)\b")


def _param_problem(p, typedefs, tnames) -> str:
    if _TAG.match(p.base):
        return ""
    if p.reference and not re.search(r"\bconst\b", p.type):
        return f"parameter '{p.name}' is a non-const reference (a kernel cannot write back to the host)"
    return ""


def _reachable(unit: Unit, fn: Function) -> list:
    """fn and the device functions it calls, transitively (by name)."""
    devices = {}
    for f in unit.functions:
        if f.kind in ("device", "kernel"):
            devices.setdefault(f.name, []).append(f)
    seen, out, todo = set(), [], [fn]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        out.append(f)
        for c in f.calls:
            todo.extend(g for g in devices.get(c, []) if g.kind == "device")
    return out


def _uses_dynamic_shared(unit: Unit, fns: list) -> bool:
    for f in fns:
        for n in walk(f.node):
            if n.type == "declaration" and _is_shared(unit, n) and _is_extern(unit, n):
                return True
    return False


def _is_shared(unit, decl) -> bool:
    return any(c.type == "type_qualifier" and node_text(unit.source, c) == "__shared__"
               for c in decl.children)


def _is_extern(unit, decl) -> bool:
    return any(c.type == "storage_class_specifier" and node_text(unit.source, c) == "extern"
               for c in decl.children)


def translate(unit: Unit, *, warp: str = "32", instantiate: list | None = None,
              kernels: list | None = None, exclude: dict | None = None,
              drop_devices: dict | None = None, progress=None, defines=(),
              drop_instantiations: dict | None = None) -> Translation:
    """Translate ``unit``. ``instantiate``: ["name<args>"]; ``kernels``: only these names;
    ``exclude``: name -> (status, reason) for kernels to leave out (compile errors found
    earlier); ``drop_devices``: device functions that failed to compile (kernels that call
    them get ``compile_error``), name -> compiler log; ``progress``: called once per kernel;
    ``drop_instantiations``: kernel name -> {wrapper name: reason} of instantiations left
    out (NOTE [static_assert instantiations] in build.py)."""
    if warp not in ("32", "native"):
        raise ValueError(f"warp must be '32' or 'native', got {warp!r}")
    exclude = exclude or {}
    extra = {}
    for spec in instantiate or []:
        m = re.fullmatch(r"\s*(\w+)\s*<(.*)>\s*", spec)
        if not m:
            raise ValueError(f"instantiate: expected 'name<T, ...>', got {spec!r}")
        extra.setdefault(m.group(1), []).append(split_template_args(m.group(2)))
    typedefs, gvars = _typedefs(unit), sym_mod.initialized_globals(unit)
    src, edits, reports = unit.source, [], {}
    for fn in unit.functions:
        if fn.kind == "host":
            body = fn.node.child_by_field_name("body")
            if body is not None and body.type == "compound_statement":  # not `= default`
                edits.append((fn.outer.start_byte, fn.outer.end_byte, ""))
            continue
        if fn.kind == "device":
            if fn.name in (drop_devices or ()):
                edits.append((fn.outer.start_byte, fn.outer.end_byte,
                              f"/* device function {fn.name} left out: it does not compile */"))
            else:
                edits += _shared_edits(unit, fn)
            continue
        if progress:
            progress(fn.name)
        if kernels and fn.name not in kernels:
            edits.append((fn.outer.start_byte, fn.outer.end_byte, f"/* kernel {fn.name}: not selected */"))
            continue
        rep = reports.get(fn.name)
        if rep is None:
            where = unit.where(fn.line)
            name = Path(unit.path).name
            file, _, line = (name, "", where.split()[-1]) if where.startswith("line") else where.rpartition(":")
            rep = reports[fn.name] = KernelReport(fn.name, line=int(line), file=file,
                                                  template=bool(fn.template_params))
        reach = _reachable(unit, fn)
        tnames = {t for _, t in fn.template_params}
        reason = next((r for r in (_param_problem(p, typedefs, tnames) for p in fn.params) if r), "")
        reason = reason or next((r for r in (_unsupported(unit, f, gvars) for f in reach) if r), "")
        rep.lints = lints_mod.lint(unit, fn, reach)
        broken = sorted({f.name for f in reach} & set(drop_devices or ()))
        if broken and fn.name not in exclude:
            exclude = {**exclude, fn.name: ("compile_error", f"calls device function(s) {broken} "
                                            "that do not compile:\n" + drop_devices[broken[0]])}
        if reason or fn.name in exclude:
            rep.status, rep.reason = ("unsupported", reason) if reason else exclude[fn.name]
            edits.append((fn.outer.start_byte, fn.outer.end_byte,
                          f"/* kernel {fn.name} not translated: {rep.reason.splitlines()[0][:200]} */"))
            continue
        rep.dynamic_shared = _uses_dynamic_shared(unit, reach)
        insts = (inst_mod.instantiations(unit, fn, typedefs, extra.get(fn.name, []))
                 if fn.template_params else [[]])
        dropped = (drop_instantiations or {}).get(fn.name, {})
        if dropped:
            for a in insts:
                if sycl_name(fn.name, a) in dropped:
                    rep.lints.append(f"instantiation {fn.name}<{', '.join(a)}> left out: "
                                     f"{dropped[sycl_name(fn.name, a)]}")
            insts = [a for a in insts if sycl_name(fn.name, a) not in dropped]
        if fn.template_params:
            insts, rep.deferred = inst_mod.eager(insts, [list(e) for e in extra.get(fn.name, [])])
        edits += _kernel_edits(unit, fn, rep, insts, typedefs, warp)
    edits += sym_mod.constant_edits(unit) + sym_mod.declaration_edits(unit) + _file_scope_edits(unit, gvars)
    kept = [f for f in unit.kernels if f.name in reports and reports[f.name].status == "ok"]
    targs = {w for f in kept for i in reports[f.name].instantiations for a in i.args
             for w in re.findall(r"[A-Za-z_]\w*", a)}
    edits += closure.drop_edits(unit, kept, targs)
    out = _apply(src, edits)
    # parse.py spelled __align__ as alignas for tree-sitter (same length): the compiler gets
    # __align__ back (GNU aligned, accepted after const and before the type, as by nvcc;
    # alignas is not: "'alignas' attribute cannot be applied to types")
    out = re.sub(r"\balignas  (\s*)\(", r"__align__\1(", out)
    head = (f"// SYCL free-function kernels translated from {unit.path} by `xvendor port`.\n"
            + "".join(f"#define {d.partition('=')[0]} {d.partition('=')[2] or '1'}\n" for d in defines)
            + f"#include \"{HEADER}\"\n#include \"{HEADER_MORE}\"\n"
            + (f"#include \"{torch_ops.HEADER}\"\n" if torch_ops.uses_torch(unit.source) else "")
            # NOTE [CUDA compilation]: the translated code is what nvcc compiles, so its
            # `#ifdef __CUDACC__` branches are taken (as branches.py and parse.py read them);
            # defined after the headers (the C++ and SYCL headers must not see it).
            # __CUDA_ARCH__ stays undefined (NOTE [dead PTX])
            + "#ifndef __CUDACC__\n#define __CUDACC__ 1\n#endif\n"
            + "".join(f"#define {f} xvc_{f}\n" for f in _ROUNDS))
    return Translation(unit, head + out, list(reports.values()), warp)


# the integer roundings the device compiler has no builtin for (the compat header's xvc_*)
_ROUNDS = ("lround", "lroundf", "llround", "llroundf", "lrint", "lrintf", "llrint", "llrintf")


def _shared_edits(unit, fn) -> list:
    """__shared__ declarations, and device functions passed as values (SYCL device code
    cannot call through a function pointer: each becomes a forwarding lambda)."""
    edits = sym_mod.use_edits(unit, fn)
    body = fn.node.child_by_field_name("body")
    if body is None:
        return edits
    # a member function is never passed by its bare name, and a name the function declares
    # itself (a parameter, a local: ``const int count = mask.count(y, x);``) is that variable
    devices = {f.name for f in unit.functions if f.kind == "device" and not f.member}
    devices -= {p.name for p in fn.params} | _local_names(unit, body)
    for n in walk(body):
        if n.type == "argument_list":
            for a in n.named_children:
                name = node_text(unit.source, a)
                if a.type == "identifier" and name in devices:
                    edits.append((a.start_byte, a.end_byte,
                                  f"[](auto &&...xv_a) {{ return {name}(xv_a...); }}"))
    for n in walk(body):
        if n.type == "declaration" and _is_shared(unit, n):
            edits.append((n.start_byte, n.end_byte, _shared_decl(unit, n)))
    return edits + _printf_format_edits(unit, body)


def _printf_format_edits(unit, body) -> list:
    """``const char *msg = "..."; printf(msg);`` -> ``printf("...")``: the SYCL printf takes
    its format from the constant address space (the compat header's printf puts a string
    literal there), so a format named through a local constant pointer is replaced by the
    literal it is initialized with. Only a local declared const, initialized with a literal
    and never assigned again; any other non-literal format is left (a compile error)."""
    s, literals, decls = unit.source, {}, []
    for n in walk(body):
        if n.type != "declaration" or not re.search(r"\bconst\b", node_text(s, n).split("=")[0]):
            continue
        for d in n.children_by_field_name("declarator"):
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if value is None or value.type not in ("string_literal", "concatenated_string"):
                continue
            ids = [x for x in walk(d.child_by_field_name("declarator")) if x.type == "identifier"]
            if ids:
                literals[node_text(s, ids[0])] = node_text(s, value)
                decls.append(n)
    if not literals:
        return []
    text = s[body.start_byte:body.end_byte]
    for n in decls:  # the initializations themselves are no assignments
        a, b = n.start_byte - body.start_byte, n.end_byte - body.start_byte
        text = text[:a] + b" " * (b - a) + text[b:]
    text = text.decode(errors="replace")
    edits = []
    for n in walk(body):
        if n.type != "call_expression" or node_text(s, n.child_by_field_name("function")) != "printf":
            continue
        args = [a for a in n.child_by_field_name("arguments").named_children if a.type != "comment"]
        name = node_text(s, args[0]) if args and args[0].type == "identifier" else None
        if name in literals and not re.search(rf"\b{re.escape(name)}\s*(?:[-+]?=(?!=)|\+\+|--)|"
                                              rf"(?:\+\+|--)\s*{re.escape(name)}\b", text):
            edits.append((args[0].start_byte, args[0].end_byte, literals[name]))
    return edits


def _local_names(unit, body) -> set:
    """Names declared inside a function body (variables, lambda and loop parameters)."""
    out = set()
    for n in walk(body):
        if n.type in ("init_declarator", "declaration", "parameter_declaration",
                      "optional_parameter_declaration", "for_range_loop"):
            for d in n.children_by_field_name("declarator"):
                while d.type not in ("identifier", "init_declarator") and d.child_by_field_name("declarator"):
                    d = d.child_by_field_name("declarator")
                if d.type == "init_declarator":
                    d = d.child_by_field_name("declarator")
                ids = [x for x in walk(d) if x.type == "identifier"] if d is not None else []
                if ids:
                    out.add(node_text(unit.source, ids[0]))
    return out


_ALIGN_SPEC = re.compile(r"\b(?:alignas|__align__)\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)")


def _shared_decl(unit, decl) -> str:
    s = unit.source
    # attributes ([[maybe_unused]]) go before the declarations, not into the type
    attrs = " ".join(node_text(s, c) for c in decl.children if c.type == "attribute_declaration")
    ty = " ".join(node_text(s, c) for c in decl.children
                  if c.type not in ("storage_class_specifier", ";", ",", "attribute_declaration") and
                  c not in decl.children_by_field_name("declarator") and
                  node_text(s, c) != "__shared__")
    extern = _is_extern(unit, decl)
    # alignas(...) / __align__(...) belong to the variable, not to work_group_static's type
    # argument (where they do not parse): `__shared__ alignas(16) float a[N];`
    aligns = []
    while True:
        m = _ALIGN_SPEC.search(ty)
        if m is None:
            break
        aligns.append(m.group(0).strip())
        ty = (ty[:m.start()] + " " + ty[m.end():]).strip()
    align = " ".join(re.sub(r"^__align__", "alignas", a) for a in aligns)
    out = []
    for d in decl.children_by_field_name("declarator"):
        ids = [x for x in walk(d) if x.type == "identifier"]
        name = node_text(s, ids[0])
        dtext = node_text(s, d)
        if extern:
            out.append(f"{attrs + ' ' if attrs else ''}{ty} *{name} = reinterpret_cast<{ty} *>(::xvc::dyn_smem());")
        else:
            abstract = dtext.replace(name, "", 1)
            ref = dtext.replace(name, f"(&{name})", 1)
            lead = f"{align} " if align else ""
            # work_group_static<volatile T[n]> is rejected; the storage is plain and the
            # name a volatile reference to it, so every access stays volatile as in CUDA
            wty = " ".join(re.sub(r"\bvolatile\b", " ", ty).split())
            out.append(f"{lead}static syclex::work_group_static<{wty}{abstract}> {name}__xv_wgs; "
                       f"{attrs + ' ' if attrs else ''}{ty} {ref} = {name}__xv_wgs;")
    return " ".join(out)


_ATTRS = {"32": "SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<3>)) "
                "[[sycl::reqd_sub_group_size(32)]]",
          "native": "SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclex::nd_range_kernel<3>))"}


def _kernel_edits(unit, fn, rep, insts, typedefs, warp) -> list:
    s, edits = unit.source, _shared_edits(unit, fn)
    for c in fn.node.children:
        if c.type in ("__global__", "launch_bounds"):
            edits.append((c.start_byte, c.end_byte, "" if c.type == "launch_bounds" else "inline"))
    decl = fn.node.child_by_field_name("declarator")
    while decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    name_node = decl.child_by_field_name("declarator")
    edits.append((name_node.start_byte, name_node.end_byte, f"{fn.name}__xv_body"))
    wrappers = []
    for args in insts:
        mapping = dict(zip([t for _, t in fn.template_params], args))
        params, decls, call = [], [], []
        for p in fn.params:
            base = _resolve(_subst(p.base, mapping), typedefs)
            if _TAG.match(p.base):  # not an argument of the launch: built in the wrapper
                call.append(re.sub(r"\bconst\b", "", _subst(p.type, mapping)).strip() + "{}")
                continue
            if p.pointer and not p.reference:
                decls.append(_subst(p.text, mapping) if p.name in p.text else f"{_subst(p.type, mapping)} {p.name}")
                params.append((p.name, "ptr", base, not p.const_pointee))
            elif base in constructs.SCALARS and not p.reference:
                abi, kind = constructs.SCALARS[base]
                decls.append(f"{abi} {p.name}")
                params.append((p.name, kind, base, False))
            else:  # a struct / vector by value: a pointer to a device copy (NOTE [by-value arguments])
                value_type = re.sub(r"\bconst\b|&", "", _subst(p.type, mapping)).strip()
                decls.append(f"const {value_type} *{p.name}__xv_value")
                acc = torch_ops.accessor_type(value_type, typedefs)  # NOTE [accessor arguments]
                params.append((p.name, "accessor", acc, not re.search(r"\bconst\b", p.type))
                              if acc else (p.name, "struct", base, False))
                call.append(f"*{p.name}__xv_value")
                continue
            call.append(p.name)
        syms = sym_mod.symbols_used(unit, _reachable(unit, fn))
        decls += [f"void *__xv_sym_{s_}" for s_ in syms]
        if rep.dynamic_shared:
            decls.append("syclex::work_group_memory<char[]> __xv_smem")
        targs = f"<{', '.join(args)}>" if args else ""
        name = sycl_name(fn.name, args)
        prologue = "::xvc::set_dyn_smem(__xv_smem); " if rep.dynamic_shared else ""
        if syms:  # NOTE [module symbols]: one barrier, then every device function sees them
            prologue += ("{ auto it = ::xvc::item(); if (it.get_local_linear_id() == 0) { "
                         + " ".join(f"{s_}__xv_sym = __xv_sym_{s_};" for s_ in syms)
                         + " } sycl::group_barrier(it.get_group()); } ")
        wrappers.append(f'extern "C" {_ATTRS[warp]}\nvoid {name}({", ".join(decls)}) {{\n'
                        f"  {prologue}{fn.name}__xv_body{targs}({', '.join(call)});\n}}")
        rep.instantiations.append(Instantiation(list(args), name, params, syms))
    if insts and inst_mod.block_bound(unit, fn):
        rep.block_bound = True  # the ones found compiled; mod.k[grid, block] picks k<block>
    elif not insts and inst_mod.block_bound(unit, fn):
        rep.block_bound = True
        rep.reason = ("its template argument is the launch's block size (a run-time value at the "
                      "launch site): load() compiles kernel<block> on first launch with each block")
    elif not insts:
        rep.reason = ("template kernel with no instantiation found: launch it with explicit "
                      "template arguments, pass --instantiate 'name<...>' or use mod['name<...>']")
    # Wrappers of a kernel at file scope go to the end of the file: a template argument may
    # name a device function defined after the kernel. Inside #if / namespaces they stay
    # next to the kernel, under the same conditions.
    at_end = fn.outer.parent is not None and fn.outer.parent.type == "translation_unit"
    where = len(s) if at_end else fn.outer.end_byte
    edits.append((fn.outer.start_byte, fn.outer.start_byte, f"/*@xv:kernel:{fn.name}*/"))
    edits.append((fn.outer.end_byte, fn.outer.end_byte, "/*@xv:end*/"))
    edits.append((where, where, f"\n/*@xv:kernel:{fn.name}*/" + "\n".join(wrappers) + "/*@xv:end*/\n"))
    return edits


_HOST_API = re.compile(r"\b(nccl|cublas|cudnn|curand|cufft|cusparse|MPI_)\w*|\bcuda[A-Z]\w*")


def _file_scope_edits(unit, gvars) -> list:
    """Drop includes, host globals and prototypes, __constant__/__device__ variables."""
    s, edits = unit.source, []
    table = sym_mod.symbols(unit)
    consts = {n.id for n, _, names, const in sym_mod.declarations(unit)
              if const or (names and all(nm in table for nm in names))}
    for n in walk(unit.tree.root_node):
        if n.id in consts:
            continue  # becomes a const global (_constant_edits)
        if n.type == "preproc_include":
            edits.append((n.start_byte, n.end_byte, "\n"))
        elif n.type == "type_definition" and _HOST_API.search(node_text(s, n)) and _file_scope(n):
            edits.append((n.start_byte, n.end_byte, ""))  # typedef struct {ncclComm_t ...} X;
        elif n.type == "preproc_call" and node_text(s, n).split()[:2] == ["#pragma", "once"]:
            edits.append((n.start_byte, n.end_byte, "\n"))
        elif n.type == "declaration" and _file_scope(n):
            text = node_text(s, n)
            kinds = {c.type for c in walk(n)}
            keep = (("const" in text.split() or "constexpr" in text.split() or
                     "static_assert" in text) and not kinds & {"__constant__", "__device__"})
            if kinds & {"__device__"} and "function_declarator" in kinds and "__global__" not in kinds:
                keep = True  # a device function's prototype
            if "__global__" in kinds and "function_declarator" in kinds and "compound_statement" not in kinds:
                keep = False  # a kernel's prototype: its wrapper has the kernel's (C) name
            if "struct_specifier" in kinds and "init_declarator" not in kinds and "function_declarator" not in kinds:
                keep = True  # struct X {...}; written as a declaration
            if keep and _HOST_API.search(text):
                keep = False  # a host-side type (holds NCCL/cuBLAS/MPI handles)
            if not keep:
                edits.append((n.start_byte, n.end_byte, ""))
    return edits


_CONDITIONAL = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif|define|undef)\b"
                         rb"(?:[^\n]*\\\n)*[^\n]*", re.M)


def _directives(src: bytes, start: int, end: int) -> str:
    """The conditional and #define/#undef lines that start inside ``src[start:end]``, each on
    a line of its own: what a deleted or replaced range must leave behind so that the code
    after it sees the preprocessor state it had (a ``#define`` inside a dropped host
    function, the ``#if`` lines around declarations of which only some are dropped)."""
    out = []
    for m in _CONDITIONAL.finditer(src, start, end):
        at_line = m.start() == 0 or src[m.start() - 1:m.start()] == b"\n"
        if at_line and m.start() >= start and m.end() <= end:
            out.append("\n" + m.group(0).decode(errors="replace") + "\n")
    return "".join(out)


def _apply(src: bytes, edits: list) -> str:
    """Apply (start, end, text) edits; an edit inside a replaced range is dropped. A replaced
    range keeps its preprocessor conditionals and macro definitions (``_directives``)."""
    edits = sorted(edits, key=lambda e: (e[0], e[1] != e[0], -(e[1] - e[0])))  # inserts first
    out, pos = [], 0
    for start, end, text in edits:
        if start < pos:
            continue  # nested in an earlier replacement (e.g. a dropped kernel)
        out.append(src[pos:start].decode(errors="replace"))
        out.append(text)
        if end > start and b"#" in src[start:end]:
            out.append(_directives(src, start, end))
        pos = max(pos, end)
    out.append(src[pos:].decode(errors="replace"))
    return "".join(out)
