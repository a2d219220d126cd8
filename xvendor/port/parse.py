"""Parse a CUDA file with tree-sitter-cuda: kernels, device functions, launch sites.

No CUDA toolkit is needed and no preprocessor runs: every ``#if`` branch is seen, and each
item keeps its byte range, so the translator rewrites the source in place (comments and
layout survive). Local ``#include "x.cuh"`` files found next to the source are inlined
first, once each (their device code is needed; their host code is dropped like the file's).

Verified here: the kernels of tests/port/cuda/*.cu and karpathy/llm.c's dev/cuda parse.
Not verified: the parser's error recovery on macro-heavy code (CUTLASS-style); a kernel
whose text tree-sitter could not parse gets the verdict ``unsupported`` with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import branches

__all__ = ["Param", "Function", "Launch", "Unit", "parse_file", "parse_source", "ParseError",
           "node_text", "walk", "split_template_args"]


class ParseError(ValueError):
    """The file cannot be read or is not CUDA/C++ at all."""


_parser = []


def _get_parser():
    if not _parser:
        try:
            import tree_sitter
            import tree_sitter_cuda
        except ImportError as e:  # the xpu extra brings both
            raise ImportError("xvendor port needs tree-sitter and tree-sitter-cuda "
                              "(pip install 'xvendor[xpu]')") from e
        _parser.append(tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language())))
    return _parser[0]


def node_text(src: bytes, node) -> str:
    return src[node.start_byte:node.end_byte].decode(errors="replace")


def walk(node):
    """Every node under ``node`` (pre-order), ``node`` included."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def split_template_args(text: str) -> list[str]:
    """``"float, Pair<int, 2>, 128"`` -> ``["float", "Pair<int, 2>", "128"]``; comments
    dropped (``k</*norm=*/true>`` is ``k<true>``)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


@dataclass
class Param:
    name: str
    type: str  # the declaration without the name, e.g. "const float *"
    text: str  # the declaration as written
    pointer: bool
    const_pointee: bool
    base: str  # the type with qualifiers, pointers and references removed, e.g. "float"
    reference: bool = False


@dataclass
class Function:
    name: str
    kind: str  # "kernel" | "device" | "host"
    node: object  # the function_definition node
    outer: object  # the node to delete/replace as a whole (template_declaration or itself)
    line: int
    template_params: list = field(default_factory=list)  # [(kind "type"|"value", name)]
    params: list = field(default_factory=list)
    calls: set = field(default_factory=set)  # names of functions called in the body
    has_error: bool = False
    member: bool = False  # a member function of a class (its host ones are dropped)
    template_defaults: dict = field(default_factory=dict)  # template parameter -> default text


@dataclass
class Launch:
    kernel: str
    template_args: list | None
    config: list  # texts of grid, block[, shared bytes[, stream]]
    args: list  # texts of the arguments
    host: str  # the enclosing host function's name
    line: int
    node: object = None


@dataclass
class Unit:
    path: str
    source: bytes
    tree: object
    functions: list  # every Function, in source order
    launches: list
    macros: dict  # object-like #define name -> replacement text
    origin: list = field(default_factory=list)  # (file, line) of each line, includes inlined
    # (start, end) byte ranges of file-scope declarations the parser could not read: hidden
    # from it (blanked in the text it parsed) so that the error stays inside them; their
    # bytes are still ``source``'s (see ``_contain_errors``)
    opaque: list = field(default_factory=list)

    def where(self, line: int) -> str:
        """``line N`` of the parsed text as the user's file and line (``common.h:12``)."""
        if 1 <= line <= len(self.origin):
            f, n = self.origin[line - 1]
            return f"line {n}" if f == Path(self.path).name else f"{f}:{n}"
        return f"line {line}"

    @property
    def kernels(self) -> list:
        return [f for f in self.functions if f.kind == "kernel"]

    def function(self, name: str, kind: str | None = None):
        for f in self.functions:
            if f.name == name and (kind is None or f.kind == kind):
                return f
        return None


_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*(?:"([^"]+)"|<([^>]+)>)[^\n]*$', re.M)
_ALIGN = re.compile(rb"__align__(\s*)\(")


def _find_include(name: str, here, include_dirs) -> Path | None:
    for d in ([here] if here is not None else []) + list(include_dirs):
        p = (Path(d) / name)
        if p.is_file():
            return p.resolve()
    return None


_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(\w+)[ \t]*(\w*)")


def _strip_include_guard(src: bytes) -> bytes:
    """The ``#ifndef X / #define X ... #endif`` around a whole file blanked (lines kept):
    every file is inlined once anyway, and tree-sitter's error recovery then stops at the
    declaration it cannot read instead of swallowing the whole guarded file."""
    lines = src.split(b"\n")
    code = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith((b"//", b"/*", b"*"))]
    if len(code) < 3:
        return src
    first, second, last = _DIRECTIVE.match(lines[code[0]]), _DIRECTIVE.match(lines[code[1]]), _DIRECTIVE.match(lines[code[-1]])
    if not (first and second and last and first.group(1) == b"ifndef" and second.group(1) == b"define"
            and first.group(2) and first.group(2) == second.group(2) and last.group(1) == b"endif"):
        return src
    depth = 0  # the last #endif must close the first #ifndef
    for i in code[1:-1]:
        d = _DIRECTIVE.match(lines[i])
        if d and d.group(1) in (b"if", b"ifdef", b"ifndef"):
            depth += 1
        elif d and d.group(1) == b"endif":
            depth -= 1
            if depth < 0:
                return src
    if depth:
        return src
    for i in (code[0], code[1], code[-1]):
        lines[i] = b""
    return b"\n".join(lines)


# NOTE [standard headers]: ``<math.h>``, ``<cmath>`` are the C/C++ library's: never inlined
# from an -I folder that happens to hold a file of that name (a sub-project's own
# ``include/math.h`` of operators would be pasted into every unit using <math.h>)
_C_HEADERS = {"assert.h", "complex.h", "ctype.h", "errno.h", "fenv.h", "float.h", "inttypes.h",
              "iso646.h", "limits.h", "locale.h", "math.h", "setjmp.h", "signal.h", "stdalign.h",
              "stdarg.h", "stdatomic.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h",
              "stdlib.h", "string.h", "tgmath.h", "time.h", "uchar.h", "wchar.h", "wctype.h"}


def _standard_header(name: str) -> bool:
    return name in _C_HEADERS or re.fullmatch(r"[a-z_]+", name) is not None  # <cmath>, <vector>


def _inline_local_includes(src: bytes, path: Path, seen: set, origin: list,
                           include_dirs=()) -> bytes:
    """``src`` with local includes (next to the file, or in ``include_dirs``) inlined, once
    each (include guards blanked); ``origin`` gets (file, line) per output line."""
    src = _strip_include_guard(src)
    out = []
    for i, line in enumerate(src.split(b"\n"), 1):
        m = _LOCAL_INCLUDE.match(line)
        p = None
        if m and m.group(1):  # "x.h": next to the file, then -I
            p = _find_include(m.group(1).decode(), path.parent, include_dirs)
        elif m and include_dirs and not _standard_header(m.group(2).decode()):
            # <x.h>: only -I (system and CUDA headers stay out)
            p = _find_include(m.group(2).decode(), None, include_dirs)
        if p is not None:
            if p not in seen:
                seen.add(p)
                out.append(_inline_local_includes(p.read_bytes(), p, seen, origin, include_dirs))
            else:
                out.append(b"")
                origin.append((str(path.name), i))
            continue
        out.append(line)
        origin.append((str(path.name), i))
    return b"\n".join(out)


def parse_file(path, *, inline_includes: bool = True, include_dirs=()) -> Unit:
    p = Path(path)
    try:
        src = p.read_bytes()
    except OSError as e:
        raise ParseError(f"cannot read {p}: {e.strerror}") from e
    origin: list = []
    if inline_includes:
        src = _inline_local_includes(src, p.resolve(), {p.resolve()}, origin, include_dirs)
    unit = parse_source(src, str(p))
    unit.origin = origin
    return unit


def parse_source(src: bytes | str, path: str = "<source>") -> Unit:
    if isinstance(src, str):
        src = src.encode()
    # `struct __align__(16) X` does not parse; alignas(16) does (same length: offsets hold)
    src = _ALIGN.sub(lambda m: b"alignas  " + m.group(1) + b"(", src)
    src = _blank_extern_c_guards(src)
    src = branches.resolve_split_branches(src)  # NOTE [split braces]
    src = _expand_qualifier_macros(_resolve_cudacc_qualifiers(_blank_extension_macros(src)))
    tree, opaque = _contain_errors(src)
    root = tree.root_node
    if root.child_count and all(c.type == "ERROR" for c in root.children):
        raise ParseError(f"{path}: tree-sitter-cuda could not parse any of the file")
    functions, macros = [], {}
    _collect(src, root, functions, macros, None)
    launches = []
    for f in functions:
        for n in walk(f.node):
            if n.type == "call_expression" and any(c.type == "kernel_call_syntax" for c in n.children):
                launches.append(_launch(src, n, f.name))
    return Unit(path, src, tree, functions, launches, macros, opaque=opaque)


_MAX_CONTAINED = 400  # parse rounds at most: a file that is mostly not C++ stays as it parsed


def _macro_effects(src: bytes) -> dict:
    """Macro name -> the braces and semicolons its replacement holds (``b"{"``, ``b"};"``),
    for the macros whose replacement holds any (the first definition of each name)."""
    out, bodies = {}, {}
    for m in _MACRO_DEF.finditer(src):
        body = m.group(2)
        if body.startswith(b"("):  # function-like: the replacement follows the parameters
            body = body[body.find(b")") + 1:] if b")" in body else b""
        body = re.sub(rb'"(?:[^"\\\n]|\\.)*"|' + rb"'(?:[^'\\\n]|\\.)*'|//[^\n]*|/\*.*?\*/", b"", body, flags=re.S)
        bodies.setdefault(m.group(1), body)
    # a macro whose replacement uses another macro has its effects too (``#define BOTH(N)
    # DECLARE(N, a * b)``), in the order written; a few rounds reach nested uses
    for _ in range(4):
        new = {}
        for name, body in bodies.items():
            eff = b"".join(out.get(t, b"") if t[:1] not in b"{};" else t
                           for t in re.findall(rb"[A-Za-z_]\w*|[{};]", body) if t != name)
            if eff:
                new[name] = eff
        if new == out:
            break
        out = new
    return out


_IDENT = re.compile(rb"[A-Za-z_]\w*")


def _declaration_end(src: bytes, start: int, effects=None) -> int:
    """The end of the top-level declaration that starts at ``start``, read lexically: the
    first ``;`` outside (), [] and {}, or the ``}`` that closes the first brace block at
    depth 0 (with a ``;`` right after it). Comments, strings and character literals are
    skipped; a preprocessor line at depth 0 ends the declaration before it (a declaration
    does not span ``#endif``). Returns ``start`` when nothing can be read."""
    n, i, depth, line_start = len(src), start, 0, True
    while i < n:
        c = src[i:i + 1]
        if line_start and c == b"#" and depth == 0 and i > start:
            return i
        if c in (b" ", b"\t", b"\r"):
            i += 1
            continue
        if c == b"\n":
            line_start = True
            i += 1
            continue
        if line_start and c == b"#":  # a directive inside the declaration: skip its lines
            while i < n:
                j = src.find(b"\n", i)
                j = n if j < 0 else j
                if src[j - 1:j] != b"\\":
                    i = j
                    break
                i = j + 1
            continue
        line_start = False
        two = src[i:i + 2]
        m = _IDENT.match(src, i) if effects and (c.isalpha() or c == b"_") else None
        if m is not None and m.group(0) in effects:  # a macro that opens or closes a block
            j = m.end()
            k = j
            while k < n and src[k:k + 1] in (b" ", b"\t"):
                k += 1
            if src[k:k + 1] == b"(":  # its arguments
                d = 0
                while k < n:
                    d += {b"(": 1, b")": -1}.get(src[k:k + 1], 0)
                    k += 1
                    if d == 0:
                        break
                j = k
            for e in effects[m.group(0)]:
                e = bytes([e])
                if e == b"{":
                    depth += 1
                elif e == b"}":
                    depth -= 1
                    if depth < 0:
                        return i
                elif depth == 0:  # ;
                    return j
            i = j
            if depth == 0 and effects[m.group(0)].rstrip(b";").endswith(b"}"):
                return j
            continue
        if m is not None:
            i = m.end()
            continue
        if two == b"//":
            j = src.find(b"\n", i)
            i = n if j < 0 else j
        elif two == b"/*":
            j = src.find(b"*/", i + 2)
            i = n if j < 0 else j + 2
        elif c in (b'"', b"'"):
            j = i + 1
            while j < n and src[j:j + 1] != c and src[j:j + 1] != b"\n":
                j += 2 if src[j:j + 1] == b"\\" else 1
            i = j + 1
        elif c in (b"(", b"[", b"{"):
            depth += 1
            i += 1
        elif c in (b")", b"]", b"}"):
            depth -= 1
            i += 1
            if depth < 0:  # closes a block the declaration is in: it ends here
                return i - 1
            if c == b"}" and depth == 0:
                j = i
                while j < n and src[j:j + 1] in (b" ", b"\t"):
                    j += 1
                return j + 1 if src[j:j + 1] == b";" else i
        elif c == b";" and depth == 0:
            return i + 1
        else:
            i += 1
    return n


_MACRO_DEF = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_DEVICE_WORDS = (b"__device__", b"__global__", b"__constant__")


def device_words(src: bytes):
    """A regex finding device code in ``src``'s text: the qualifiers, or a macro whose
    replacement spells one (``#define TABLE_BEGIN(t, n, s) static const __device__ t n[s] = {``),
    transitively; a macro defined once per ``#if`` branch (per compiler or backend) counts
    when any of its definitions does."""
    defs: dict = {}
    for m in _MACRO_DEF.finditer(src):
        defs[m.group(1)] = defs.get(m.group(1), b"") + b"\n" + m.group(2)
    words = set(_DEVICE_WORDS)
    grew = True
    while grew:
        rx = re.compile(rb"\b(" + b"|".join(re.escape(w) for w in sorted(words)) + rb")\b")
        new = {n for n, body in defs.items() if n not in words and rx.search(body)}
        grew = bool(new)
        words |= new
    return rx


def _blank(src: bytes, a: int, b: int) -> bytes:
    return src[:a] + re.sub(rb"[^\n]", b" ", src[a:b]) + src[b:]


def _contain_errors(src: bytes):
    """(tree, opaque ranges): ``src`` parsed so that a declaration tree-sitter cannot read
    costs that declaration only. tree-sitter's error recovery can turn one unreadable
    file-scope declaration (a prototype wrapped in a macro, ``M(void f(int), "hint");``) into
    an ERROR node that swallows the rest of the file, and with it every kernel after it.
    Each file-scope ERROR node that reaches past the declaration it starts (found lexically,
    ``_declaration_end``) has that declaration blanked in the text given to the parser (same
    bytes, same lines) and the file is parsed again, until no ERROR node reaches past its
    declaration; a file-scope ERROR node inside its declaration has it blanked too when the
    declaration holds no device code (its rest would parse as stray host declarations). The
    blanked ranges are returned: their bytes stay in the unit's source, and the closure drops
    them unless they hold device code (as it does with ERROR nodes)."""
    parser, text, opaque = _get_parser(), src, []
    device_rx, effects = device_words(src), _macro_effects(src)
    for a, b in _instantiation_macro_uses(src):  # NOTE [runs of instantiation macro uses]
        opaque.append((a, b))
        text = _blank(text, a, b)
    tree = parser.parse(text)
    for _ in range(_MAX_CONTAINED):
        bad = None
        stack = [tree.root_node]
        while stack and bad is None:
            node = stack.pop()
            for c in node.children:
                if c.type in _CONTAINERS or c.type == "linkage_specification":
                    stack.append(c)
                elif c.has_error:
                    end = _declaration_end(text, c.start_byte, effects)
                    if c.start_byte < end < c.end_byte or (
                            c.type == "ERROR" and c.start_byte < end
                            and not device_rx.search(text, c.start_byte, end)):
                        bad = (c.start_byte, end)
                        break
        if bad is None:
            break
        opaque.append(bad)
        text = _blank(text, *bad)
        tree = parser.parse(text)
    return tree, sorted(opaque)


# NOTE [runs of instantiation macro uses]: a library instantiates its kernels with a run of
# file-scope uses of a macro and no semicolons between them (``MAKE_K(ADAM, float, 256, 1)``
# on each of a dozen lines; the macro's body is ``template __global__ void k<...>(...);``).
# tree-sitter reads such a run as one broken declaration whose pieces (the macro's name, each
# argument) the closure then deleted one by one, leaving ``(, , `` lines that broke the SYCL
# build of every kernel of the file. A line that is one whole use of a function-like macro
# whose body is explicit instantiations (directly or through such macros) is blanked for the
# parser from the start (an opaque range: instantiate.py expands it for the instantiations it
# makes, the closure drops it: NOTE [instantiations through a macro]).
_FN_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
_USE_LINE = re.compile(rb"^[ \t]*(\w+)[ \t]*\(([^()\n]|\([^()\n]*\))*\)[ \t]*;?[ \t]*(//[^\n]*)?$", re.M)


def _instantiation_macro_uses(src: bytes) -> list:
    bodies = {}
    for m in _FN_DEFINE.finditer(src):
        bodies.setdefault(m.group(1), m.group(3).replace(b"\\\n", b" ").strip())
    if not bodies:
        return []

    def instantiates(name, depth=0):
        body = bodies.get(name)
        if body is None or depth > 4:
            return False
        if re.match(rb"(extern[ \t]+)?template[ \t]+(?!<)", body):
            return b"{" not in body
        first = re.match(rb"(\w+)[ \t]*\(", body)
        return bool(first) and instantiates(first.group(1), depth + 1)
    return [(m.start(), m.end()) for m in _USE_LINE.finditer(src) if instantiates(m.group(1))]


_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*?)[ \t]*$", re.M)
_QUALIFIER_WORDS = re.compile(rb"\b(__device__|__global__|__host__|__forceinline__)\b")


_CUDACC_IF = re.compile(rb"^[ \t]*#[ \t]*(?:ifdef[ \t]+__CUDACC__|if[ \t]+defined[ \t]*\(?[ \t]*__CUDACC__[ \t]*\)?)[ \t]*(//.*)?$")
_QUALIFIER_LINE = re.compile(rb"^[ \t]*((__host__|__device__|__forceinline__|inline|static|__inline__)[ \t]*)*$")


_EXTERN_C_OPEN = re.compile(rb"^([ \t]*#[ \t]*if(?:def[ \t]+__cplusplus|[ \t]+defined[ \t]*\(?[ \t]*__cplusplus[ \t]*\)?)[^\n]*\n"
                            rb"[ \t]*extern[ \t]+\"C\"[ \t]*\{[^\n]*\n[ \t]*#[ \t]*endif[^\n]*)$", re.M)
_EXTERN_C_CLOSE = re.compile(rb"^([ \t]*#[ \t]*if(?:def[ \t]+__cplusplus|[ \t]+defined[ \t]*\(?[ \t]*__cplusplus[ \t]*\)?)[^\n]*\n"
                             rb"[ \t]*\}[^\n]*\n[ \t]*#[ \t]*endif[^\n]*)$", re.M)


def _blank_extern_c_guards(src: bytes) -> bytes:
    """``#ifdef __cplusplus / extern "C" { / #endif`` and its closing ``}`` block blanked
    (lines kept): tree-sitter cannot pair braces split across #if blocks, and C linkage
    means nothing to the kernels (their wrappers are extern "C" anyway)."""
    if len(_EXTERN_C_OPEN.findall(src)) != len(_EXTERN_C_CLOSE.findall(src)):
        return src
    blank = lambda m: re.sub(rb"[^\n]", b" ", m.group(1))  # noqa: E731
    return _EXTERN_C_CLOSE.sub(blank, _EXTERN_C_OPEN.sub(blank, src))


def _resolve_cudacc_qualifiers(src: bytes) -> bytes:
    """``#ifdef __CUDACC__ / __host__ __device__ / #endif`` before a declaration: the
    qualifiers kept (this is CUDA compilation: __CUDACC__ is defined), the directives and
    any #else branch of qualifiers blanked, so the parser sees one declaration."""
    lines = src.split(b"\n")
    i = 0
    while i < len(lines):
        if _CUDACC_IF.match(lines[i]):
            j, els = i + 1, None
            while j < len(lines) and j - i < 6 and _QUALIFIER_LINE.match(lines[j]):
                j += 1
            if j < len(lines) and re.match(rb"^[ \t]*#[ \t]*else\b", lines[j]):
                els, j = j, j + 1
                while j < len(lines) and j - els < 6 and _QUALIFIER_LINE.match(lines[j]):
                    j += 1
            if j < len(lines) and re.match(rb"^[ \t]*#[ \t]*endif\b", lines[j]) and j > i + 1:
                lines[i] = lines[j] = b""
                if els is not None:
                    for k in range(els, j):
                        lines[k] = b""
                i = j
        i += 1
    return b"\n".join(lines)


_ANY_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)(?![\w(])[ \t]*([^\n]*?)[ \t]*$", re.M)


def _blank_extension_macros(src: bytes) -> bytes:
    """``__extension__`` and the object-like macros that are only it or nothing
    (``#define EXT __extension__`` / ``#define EXT`` per compiler) blanked outside
    preprocessor lines: ``EXT union { ... } u;`` inside a struct does not parse, and the
    word changes nothing but warnings. Lines and offsets stay."""
    defs: dict = {}
    for m in _ANY_DEFINE.finditer(src):
        defs.setdefault(m.group(1), set()).add(m.group(2))
    names = [n for n, vals in defs.items() if b"__extension__" in vals and vals <= {b"", b"__extension__"}]
    rx = re.compile(rb"\b(" + b"|".join(re.escape(n) for n in names + [b"__extension__"]) + rb")\b")
    if not rx.search(src):
        return src
    lines = src.split(b"\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(b"#") and rx.search(line):
            lines[i] = rx.sub(lambda m: b" " * len(m.group(0)), line)
    return b"\n".join(lines)


def _expand_qualifier_macros(src: bytes) -> bytes:
    """``#define HD __host__ __device__ inline``: uses of HD outside preprocessor lines are
    replaced by the qualifiers (the parser must see ``__device__``). Lines stay lines."""
    defs = [(m.group(1), m.group(2)) for m in _DEFINE.finditer(src) if not m.group(2).endswith(b"\\")]
    names = {n: v for n, v in defs if _QUALIFIER_WORDS.search(v)}
    if not names:
        return src
    # through other macros too (``#define IHD INLINE HOST DEVICE`` over ``#define DEVICE
    # __device__``): a macro made of qualifier macros gets their expansion
    for _ in range(4):
        rx = re.compile(rb"\b(" + b"|".join(re.escape(n) for n in names) + rb")\b")
        more = {n: rx.sub(lambda m: names[m.group(1)], v) for n, v in defs
                if n not in names and rx.search(v) and re.fullmatch(rb"[\w\s]+", v)}
        if not more:
            break
        names.update(more)
    rx = re.compile(rb"\b(" + b"|".join(re.escape(n) for n in names) + rb")\b")
    lines = src.split(b"\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(b"#") and rx.search(line):
            lines[i] = rx.sub(lambda m: names[m.group(1)], line)
    return b"\n".join(lines)


_CONTAINERS = {"translation_unit", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
               "preproc_elifdef", "namespace_definition", "declaration_list",
               "linkage_specification"}


def _collect(src, node, functions, macros, template):
    for c in node.children:
        if c.type in _CONTAINERS:
            _collect(src, c, functions, macros, None)
        elif c.type == "template_declaration":
            _collect(src, c, functions, macros, c)
        elif c.type == "function_definition":
            functions.append(_function(src, c, template or c, template))
        elif c.type in ("declaration", "type_definition", "struct_specifier", "class_specifier",
                        "union_specifier", "field_declaration_list"):
            _collect_members(src, c, functions)
        elif c.type == "preproc_def":
            name, value = c.child_by_field_name("name"), c.child_by_field_name("value")
            if name is not None:
                macros[node_text(src, name)] = node_text(src, value).strip() if value else ""


def _collect_members(src, node, functions):
    """Member functions of the classes declared in ``node`` (device ones are device code)."""
    for c in node.children:
        if c.type in ("struct_specifier", "class_specifier", "union_specifier"):
            _collect_members(src, c, functions)
        elif c.type == "field_declaration_list":
            for m in c.children:
                if m.type == "function_definition":
                    functions.append(_function(src, m, m, None, member=True))
                elif m.type == "template_declaration":
                    fd = [x for x in m.named_children if x.type == "function_definition"]
                    if fd:
                        functions.append(_function(src, fd[0], m, m, member=True))
                elif m.type in ("field_declaration", "declaration", "struct_specifier",
                                "class_specifier"):
                    _collect_members(src, m, functions)
        elif c.type in ("declaration", "type_definition", "field_declaration"):
            _collect_members(src, c, functions)


def _function(src, node, outer, template, member=False) -> Function:
    quals = {c.type for c in node.children}
    kind = "kernel" if "__global__" in quals else "device" if "__device__" in quals else "host"
    if kind == "host" and any(c.type == "type_qualifier" and node_text(src, c) == "constexpr"
                              for c in node.children):
        kind = "device"  # callable from device code (nvcc's relaxed constexpr)
    decl = node.child_by_field_name("declarator")
    decl = function_declarator(decl)
    name, params = "?", []
    if decl is not None:
        name_node = decl.child_by_field_name("declarator")
        name = node_text(src, name_node) if name_node is not None else "?"
        plist = decl.child_by_field_name("parameters")
        params = [_param(src, p, i) for i, p in enumerate(plist.named_children)
                  if p.type == "parameter_declaration"] if plist is not None else []
        if len(params) == 1 and params[0].text.strip() == "void":
            params = []  # C's `k(void)`: no parameters, not one unnamed `void`
    tparams, defaults = [], {}
    if template is not None:
        for p in template.child_by_field_name("parameters").named_children:
            ident = [n for n in walk(p) if n.type in ("type_identifier", "identifier")]
            kind_t = "type" if p.type.startswith(("type_parameter", "optional_type")) else "value"
            named = _declarator_name(p) if kind_t == "value" else None
            if named is not None:  # void (*f)(const float *, T *): f, not the last word
                tparams.append((kind_t, node_text(src, named)))
                dflt = p.child_by_field_name("default_value")
                if dflt is not None:
                    defaults[tparams[-1][1]] = node_text(src, dflt)
            elif ident:
                tparams.append((kind_t, node_text(src, ident[-1] if kind_t == "value" else ident[0])))
                dflt = p.child_by_field_name("default_type") or p.child_by_field_name("default_value")
                if dflt is not None:
                    ident = [n for n in walk(p) if n.type in ("type_identifier", "identifier")
                             and n.end_byte <= dflt.start_byte]
                    if ident:
                        tparams[-1] = (kind_t, node_text(src, ident[-1] if kind_t == "value" else ident[0]))
                    defaults[tparams[-1][1]] = node_text(src, dflt)
    body = node.child_by_field_name("body")
    calls = set()
    if body is not None:
        for n in walk(body):
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                if fn is not None and fn.type in ("identifier", "template_function"):
                    calls.add(node_text(src, fn).split("<")[0].strip())
    return Function(name, kind, node, outer, node.start_point[0] + 1, tparams, params, calls,
                    node.has_error, member, defaults)


def function_declarator(d):
    """The function_declarator under declarator ``d``, through pointer, parenthesized and
    reference declarators (``T const &C<T>::f() const``: a reference declarator names its
    inner declarator by position, not by field); None if there is none."""
    while d is not None and d.type != "function_declarator":
        nxt = d.child_by_field_name("declarator")
        if nxt is None and d.type in ("reference_declarator", "parenthesized_declarator"):
            nxt = next((c for c in d.named_children if c.type != "comment"), None)
        d = nxt
    return d


def _declarator_name(p):
    """The identifier a parameter declaration declares, following its declarator chain
    (pointer, reference, array, function and parenthesized declarators); None if none."""
    d = p.child_by_field_name("declarator")
    for _ in range(16):
        if d is None:
            return None
        if d.type == "identifier":
            return d
        nxt = d.child_by_field_name("declarator")
        if nxt is None and d.type in ("parenthesized_declarator", "reference_declarator"):
            nxt = next((c for c in d.named_children if c.type != "comment"), None)
        d = nxt
    return None


_QUALS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|unsigned(?=\s+\w))\b")


def _param(src, p, index) -> Param:
    text = node_text(src, p)
    ident = None
    d = p.child_by_field_name("declarator")
    while d is not None:
        if d.type == "identifier":
            ident = d
            break
        d = d.child_by_field_name("declarator")
    name = node_text(src, ident) if ident is not None else f"__xv_arg{index}"
    if ident is not None:
        a, b = ident.start_byte - p.start_byte, ident.end_byte - p.start_byte
        raw = src[p.start_byte:p.end_byte]
        type_text = (raw[:a] + raw[b:]).decode(errors="replace").strip()
    else:
        type_text = text.strip()
    pointer = "*" in type_text or "[" in type_text
    reference = "&" in type_text
    head = type_text.split("*")[0]
    const_pointee = pointer and bool(re.search(r"\bconst\b", head))
    base = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", "", head)
    base = " ".join(base.replace("&", " ").replace("[", " ").replace("]", " ").split())
    return Param(name, type_text, text, pointer, const_pointee, base, reference)


def _launch(src, call, host) -> Launch:
    fn = call.child_by_field_name("function")
    targs = None
    if fn.type == "template_function":
        name = node_text(src, fn.child_by_field_name("name"))
        ta = fn.child_by_field_name("arguments")
        targs = split_template_args(node_text(src, ta)[1:-1])
    else:
        name = node_text(src, fn)
    cfg = next(c for c in call.children if c.type == "kernel_call_syntax")
    config = [node_text(src, c) for c in cfg.named_children]
    args_node = call.child_by_field_name("arguments")
    args = [node_text(src, a) for a in args_node.named_children
            if a.type != "comment"] if args_node is not None else []
    return Launch(name.split("::")[-1].strip(), targs, config, args, host,
                  call.start_point[0] + 1, call)


def at_file_scope(n) -> bool:
    """At namespace scope: its parents up to the first that is not an #if branch are the
    file, a namespace or an extern "C" block (a declaration under an #if inside a function
    is not)."""
    p = n.parent
    while p is not None and p.type in ("preproc_if", "preproc_ifdef", "preproc_else",
                                       "preproc_elif", "preproc_elifdef"):
        p = p.parent
    return p is not None and p.type in ("translation_unit", "declaration_list",
                                        "linkage_specification")
