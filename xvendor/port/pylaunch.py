"""Host launchers -> Python: the host functions that only compute sizes and launch kernels.

``launchers(unit)`` returns Python source with one ``def <host>(mod, <params>)`` per such
function, where ``mod`` is what ``xvendor.port.load`` returns; ``k<<<g, b, s>>>(args)``
becomes ``mod.k[g, b, s](args)`` (``dim3`` -> an (x, y, z) tuple). Integer ``/`` becomes
``//`` (sizes are non-negative here); a function with any other statement (loops, memory
copies, library calls) is not translated and is listed with the reason, never half-done. ``cudaMemcpyToSymbol`` /
``FromSymbol`` become ``mod.symbols.copy_to`` / ``copy_from`` (the module's symbol buffers).
"""

from __future__ import annotations

import keyword
import re

from .parse import node_text

__all__ = ["launchers", "NotTranslated"]

SIZEOF = {"float": 4, "int": 4, "double": 8, "half": 2, "__half": 2, "__nv_bfloat16": 2,
          "floatX": None, "float4": 16, "char": 1, "unsigned int": 4, "long": 8, "size_t": 8}
SKIP_CALLS = re.compile(r"^(cudaCheck|cudaGetLastError|CUDA_CHECK|checkCudaErrors|"
                        r"cudaDeviceSynchronize|cudaFuncSetAttribute)\b")


class NotTranslated(Exception):
    pass


SYMBOL_COPIES = re.compile(r"^cudaMemcpy(To|From)Symbol(Async)?$")


def symbol_copy(fn: str, args: list, first: str) -> str:
    """``cudaMemcpyToSymbol(sym, src, count[, offset[, kind[, stream]]])`` ->
    ``mod.symbols.copy_to("sym", src, count, offset)`` (``FromSymbol(dst, sym, ...)`` ->
    ``copy_from``): the symbols are the module's buffers (NOTE [module symbols])."""
    if len(args) < 3:
        raise NotTranslated(f"{fn} with {len(args)} arguments")
    offset = args[3] if len(args) > 3 else "0"
    if "To" in fn:
        return f"mod.symbols.copy_to({first.strip()!r}, {args[1]}, {args[2]}, {offset})"
    sym = args[1] if re.fullmatch(r"\w+", args[1]) else None
    if sym is None:
        raise NotTranslated(f"{fn} from {args[1]!r}")
    return f"mod.symbols.copy_from({args[0]}, {sym!r}, {args[2]}, {offset})"


def launchers(unit) -> str:
    hosts = [f for f in unit.functions if f.kind == "host" and
             (any(l.host == f.name for l in unit.launches) or
              re.search(r"\bcudaMemcpy(To|From)Symbol", node_text(unit.source, f.node)))]
    out = [f'"""Launchers translated from {unit.path} by `xvendor port`: call each with the '
           'module from xvendor.port.load(...) first."""', ""] + _constants(unit) + [""]
    for fn in hosts:
        try:
            out.append(_function(unit, fn))
        except NotTranslated as e:
            out.append(f"# {fn.name} (line {fn.line}): not translated: {e}\n")
    return "\n".join(out) + "\n"


def _py_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) else name


def _constants(unit) -> list:
    """Object-like macros with a numeric value (TILE, BLOCK_SIZE) as Python constants."""
    return [f"{k} = {v.rstrip('uUlLfF')}" for k, v in unit.macros.items()
            if re.fullmatch(r"-?\d+(\.\d*)?[uUlLfF]*", v)]


def _function(unit, fn) -> str:
    params = ", ".join(["mod"] + [_py_name(p.name) for p in fn.params])
    body = fn.node.child_by_field_name("body")
    lines = []
    for st in body.named_children:
        lines += _statement(unit, st)
    return f"def {fn.name}({params}):\n" + "\n".join("    " + l for l in lines or ["pass"]) + "\n"


def _statement(unit, st) -> list:
    s = unit.source
    if st.type == "comment":
        return ["#" + node_text(s, st).lstrip("/").rstrip("*/")]
    if st.type == "return_statement" and len(st.named_children) == 0:
        return ["return"]
    if st.type == "declaration":
        out = []
        ty = node_text(s, st.child_by_field_name("type"))
        for d in st.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                name = _py_name(node_text(s, d.child_by_field_name("declarator")))
                val = d.child_by_field_name("value")
                if val.type == "argument_list":  # dim3 g(a, b)
                    out.append(f"{name} = ({', '.join(_expr(unit, a) for a in val.named_children)},)")
                else:
                    out.append(f"{name} = {_expr(unit, val)}")
            elif d.type == "function_declarator" and ty == "dim3":  # dim3 g(a, b) parses so
                name = node_text(s, d.child_by_field_name("declarator"))
                vals = [_py_name(node_text(s, a)) for a in d.child_by_field_name("parameters").named_children]
                out.append(f"{_py_name(name)} = ({', '.join(vals)},)")
            else:
                raise NotTranslated(f"declaration without a value at line {st.start_point[0] + 1}")
        if ty not in ("int", "size_t", "dim3", "unsigned int", "long", "float", "auto", "unsigned"):
            raise NotTranslated(f"a {ty} variable at line {st.start_point[0] + 1}")
        return out
    if st.type == "expression_statement" and st.named_children:
        e = st.named_children[0]
        if e.type == "assignment_expression":
            op = node_text(s, e.child_by_field_name("operator"))
            if op in ("=", "+=", "-=", "*=") or (op == "/=" and "." not in node_text(s, e)):
                return [f"{_expr(unit, e.child_by_field_name('left'))} "
                        f"{'//=' if op == '/=' else op} {_expr(unit, e.child_by_field_name('right'))}"]
        if e.type == "call_expression":
            fn = node_text(s, e.child_by_field_name("function"))
            inner = e.child_by_field_name("arguments").named_children
            if SKIP_CALLS.match(fn) and len(inner) == 1 and inner[0].type == "call_expression":
                e, fn = inner[0], node_text(s, inner[0].child_by_field_name("function"))  # cudaCheck(x(...))
            if SYMBOL_COPIES.match(fn):
                return [symbol_copy(fn, [_expr(unit, a) for a in e.child_by_field_name("arguments").named_children],
                                    node_text(s, e.child_by_field_name("arguments").named_children[0]))]
            if SKIP_CALLS.match(fn):
                return []
            if fn == "assert":
                cond = e.child_by_field_name("arguments").named_children[0]
                return [f"assert {_expr(unit, cond)}"]
            cfg = [c for c in e.children if c.type == "kernel_call_syntax"]
            if cfg:
                return [_launch(unit, e, cfg[0])]
        raise NotTranslated(f"statement at line {st.start_point[0] + 1}: {node_text(s, st)[:60]!r}")
    raise NotTranslated(f"{st.type.replace('_', ' ')} at line {st.start_point[0] + 1}")


def _launch(unit, call, cfg) -> str:
    s = unit.source
    fn = call.child_by_field_name("function")
    name = node_text(s, fn)
    target = f'mod["{" ".join(name.split())}"]' if "<" in name else f"mod.{name}"
    conf = [_expr(unit, c) for c in cfg.named_children][:3]
    if len(conf) == 3 and conf[2] == "0":
        conf = conf[:2]
    args = [_expr(unit, a) for a in call.child_by_field_name("arguments").named_children]
    return f"{target}[{', '.join(conf)}]({', '.join(args)})"


def _expr(unit, n) -> str:
    s, t = unit.source, n.type
    if t == "number_literal":
        txt = node_text(s, n).rstrip("uUlLfF") if not node_text(s, n).startswith("0x") else node_text(s, n).rstrip("uUlL")
        return txt
    if t == "identifier":
        return _py_name(node_text(s, n))
    if t in ("true", "false", "null", "nullptr"):
        return {"true": "True", "false": "False", "nullptr": "None", "NULL": "None"}.get(node_text(s, n), node_text(s, n))
    if t == "parenthesized_expression":
        return f"({_expr(unit, n.named_children[0])})"
    if t == "binary_expression":
        op = node_text(s, n.child_by_field_name("operator"))
        a, b = _expr(unit, n.child_by_field_name("left")), _expr(unit, n.child_by_field_name("right"))
        if op == "/" and not re.search(r"\d\.\d|\d[eE]|float|double", node_text(s, n)):
            op = "//"
        op = {"&&": "and", "||": "or"}.get(op, op)
        return f"{a} {op} {b}"
    if t == "unary_expression":
        op = node_text(s, n.child_by_field_name("operator"))
        return f"{'not ' if op == '!' else op}{_expr(unit, n.child_by_field_name('argument'))}"
    if t == "conditional_expression":
        c, a, b = (_expr(unit, n.child_by_field_name(k)) for k in ("condition", "consequence", "alternative"))
        return f"({a} if {c} else {b})"
    if t == "cast_expression":
        ty = node_text(s, n.child_by_field_name("type"))
        v = _expr(unit, n.child_by_field_name("value"))
        return f"float({v})" if ty in ("float", "double") else f"int({v})" if "*" not in ty else v
    if t == "sizeof_expression":
        ty = node_text(s, n).split("(", 1)[-1].rstrip(")").strip()
        if SIZEOF.get(ty):
            return str(SIZEOF[ty])
        raise NotTranslated(f"sizeof({ty})")
    if t == "field_expression":
        f = node_text(s, n.child_by_field_name("field"))
        if f in "xyz":
            return f"{_expr(unit, n.child_by_field_name('argument'))}[{'xyz'.index(f)}]"
    if t == "call_expression":
        fn = node_text(s, n.child_by_field_name("function")).replace("std::", "")
        args = [_expr(unit, a) for a in n.child_by_field_name("arguments").named_children]
        if fn in ("ceil_div", "CEIL_DIV", "cdiv", "div_ceil") and len(args) == 2:
            return f"(-(-({args[0]}) // ({args[1]})))"
        if fn in ("min", "max"):
            return f"{fn}({', '.join(args)})"
        if fn == "dim3":
            return f"({', '.join(args)},)"
    raise NotTranslated(f"expression {node_text(s, n)[:60]!r}")
