"""PyTorch CUDA extensions -> ``torch.library`` ops over the ported kernels.

``xvendor port ext.cu --torch-ops NS`` writes ``<stem>_ops.py``: importing it registers one
op ``NS::name`` per host function the file binds (``TORCH_LIBRARY_IMPL(..., CUDA, m)
{ m.impl("name", &fn); }``, ``PYBIND11_MODULE(...) { m.def("name", &fn); }``), or, when it
binds none, per host function taking or returning tensors that launches a kernel (itself
or through another host function of the file). Each op's implementation, for CPU tensors
(kernels on the OpenCL CPU SYCL device) and XPU tensors, is the host function translated
to Python (``host_to_python``): allocations and the other ATen calls it makes become the
same torch calls, ``TORCH_CHECK`` raises, ``AT_DISPATCH_*`` picks the instantiation for the
tensor's dtype, launches go through ``xvendor.port.load(ext.cu)``. Stream, guard and
launch-check calls have nothing to do here and are dropped. The schema comes from the C++
signature (a non-const ``Tensor&`` is ``Tensor(a!)``). ``register_fake`` is the same
Python with launches skipped, registered when the function never reads tensor data on the
host (``.item()``, ``.cpu()``), so shapes follow from shapes alone.

What is refused, with the reason (the op is left out; the others still register): host
functions that manage raw device memory (``cudaMalloc``/``cudaMemcpy``), call a library
(cuBLAS, CUB, thrust), call a function the translator does not know, or use a statement it
does not translate. Verified here: tests/port/test_torch_ops.py (extension-style files) and
real extensions (bench/port_torch_ext.py). Not verified: XPU tensors (l2).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

from .parse import node_text, parse_source, split_template_args, walk

__all__ = ["HEADER", "uses_torch", "accessor_type", "Op", "find_ops", "ops_module",
           "NotTranslated"]

HEADER = "xvendor_torch_compat.h"

_TORCH = re.compile(rb"#\s*include\s*[<\"](torch|ATen|c10)/|\b(at|c10|torch)::")


def uses_torch(source: bytes) -> bool:
    """The source uses ATen/c10/torch names (its kernels may take accessors, at::Half)."""
    return bool(_TORCH.search(source))


_ACCESSOR = re.compile(r"^(?:(?:at|torch)::)?(PackedTensorAccessor32|PackedTensorAccessor64|"
                       r"GenericPackedTensorAccessor|PackedTensorAccessor)\s*<(.*)>$")
# ATen's element types -> the compat names (their dtypes are in constructs.POINTEES)
ELEMENTS = {"at::Half": "__half", "c10::Half": "__half", "Half": "__half",
            "at::BFloat16": "__nv_bfloat16", "c10::BFloat16": "__nv_bfloat16",
            "BFloat16": "__nv_bfloat16", "scalar_t": None}


def accessor_type(text: str, typedefs=None):
    """``at::PackedTensorAccessor32<float, 3, at::RestrictPtrTraits>`` -> ("float", 3, 32);
    None for any other type. NOTE [accessor arguments] in launch.py."""
    m = _ACCESSOR.match(" ".join(text.split()))
    if not m:
        return None
    args = split_template_args(m.group(2))
    if len(args) < 2 or not args[1].isdigit():
        return None
    elem = " ".join(re.sub(r"\b(const|volatile)\b", "", args[0]).split())
    for _ in range(8):
        if typedefs and typedefs.get(elem):
            elem = " ".join(re.sub(r"\b(const|volatile)\b", "", typedefs[elem]).split())
        else:
            break
    elem = ELEMENTS.get(elem) or elem
    bits = {"PackedTensorAccessor32": 32, "PackedTensorAccessor64": 64}.get(m.group(1))
    if bits is None:  # the index type is the 4th argument (default int64_t)
        idx = args[3].replace("std::", "") if len(args) > 3 else "int64_t"
        bits = 32 if idx in ("int32_t", "int", "unsigned", "uint32_t") else 64
    return elem, int(args[1]), bits


class NotTranslated(Exception):
    """A host function (or one of its statements) has no honest Python translation."""


@dataclass
class Op:
    name: str  # the op's name in the namespace
    function: str  # the C++ host function
    line: int
    schema: str = ""  # "name(Tensor a, ...) -> Tensor"
    python: list = field(default_factory=list)  # Python sources: the function, the ones it calls
    fake: bool = False  # register_fake with the same Python (launches skipped)
    reason: str = ""  # why it is not translated ("" when it is)
    kernels: list = field(default_factory=list)  # the kernels it launches


# ----------------------------------------------------------------------------- bindings
_BLOCK = re.compile(r"\b(TORCH_LIBRARY_IMPL|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY|PYBIND11_MODULE)"
                    r"\s*\(([^)]*)\)\s*\{")
_BIND = re.compile(r"\.\s*(def|impl)\s*\(\s*(?:TORCH_SELECTIVE_NAME\s*\()?\s*\"([^\"]+)\"\s*\)?"
                   r"\s*(?:,\s*(?:&\s*|TORCH_FN\s*\(\s*)?([\w:]+))?")


def bindings(source: str) -> tuple:
    """({op name: C++ function}, {op name: schema}) from the file's TORCH_LIBRARY(_IMPL) and
    PYBIND11_MODULE blocks (TORCH_LIBRARY_IMPL blocks of other keys than CUDA are ignored)."""
    fns, schemas = {}, {}
    for m in _BLOCK.finditer(source):
        kind, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if kind == "TORCH_LIBRARY_IMPL" and (len(args) < 2 or args[1] not in ("CUDA", "c10::DispatchKey::CUDA")):
            continue
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        for b in _BIND.finditer(source[m.end():i]):
            text, fn = b.group(2), b.group(3)
            name = text.split("(")[0].split(".")[0].split("::")[-1].strip()
            if "(" in text:
                schemas[name] = text.split("::")[-1]
            if fn and re.fullmatch(r"[\w:]+", fn) and not fn.startswith("py::"):
                fns[name] = fn.split("::")[-1]
    return fns, schemas


# ----------------------------------------------------------------------------- schema
_SCALAR_SCHEMA = {"double": "float", "float": "float", "bool": "bool", "int": "int", "int64_t": "int",
                  "int32_t": "int", "long": "int", "long long": "int", "size_t": "int",
                  "unsigned": "int", "unsigned int": "int", "uint32_t": "int", "uint64_t": "int",
                  "std::string": "str", "c10::string_view": "str", "std::string_view": "str",
                  "at::ScalarType": "ScalarType", "c10::ScalarType": "ScalarType",
                  "at::Scalar": "Scalar", "c10::Scalar": "Scalar",
                  "at::IntArrayRef": "int[]", "c10::IntArrayRef": "int[]",
                  "at::TensorList": "Tensor[]", "c10::TensorList": "Tensor[]"}
_TENSOR = re.compile(r"^(?:(?:at|torch)::)?Tensor$")
_OPTIONAL = re.compile(r"^(?:c10|std|at|torch)::optional\s*<(.*)>$")
_VECTOR = re.compile(r"^std::vector\s*<(.*)>$")
_TUPLE = re.compile(r"^std::tuple\s*<(.*)>$")


def _norm_type(text: str) -> str:
    t = re.sub(r"\b(const|volatile|struct)\b", "", text).replace("&", " ")
    return " ".join(t.split()).replace(" <", "<").replace("< ", "<").replace(" >", ">")


def schema_type(text: str, ret: bool = False) -> str:
    t = _norm_type(text)
    if _TENSOR.match(t):
        return "Tensor"
    m = _OPTIONAL.match(t)
    if m:
        return schema_type(m.group(1)) + "?"
    m = _VECTOR.match(t)
    if m:
        inner = schema_type(m.group(1))
        return inner + "[]"
    m = _TUPLE.match(t)
    if m and ret:
        return "(" + ", ".join(schema_type(a) for a in split_template_args(m.group(1))) + ")"
    if m:  # a tuple argument of one scalar type: a list in the schema (std::get<i> indexes it)
        kinds = {schema_type(a) for a in split_template_args(m.group(1))}
        if len(kinds) == 1 and kinds <= {"int", "float", "bool"}:
            return kinds.pop() + "[]"
    if t == "void" and ret:
        return "()"
    if t in _SCALAR_SCHEMA:
        return _SCALAR_SCHEMA[t]
    raise NotTranslated(f"a parameter or result of type {text.strip()!r} has no op schema type")


def _return_type(unit, fn) -> str:
    s = unit.source
    t = fn.node.child_by_field_name("type")
    text = node_text(s, t) if t is not None else "void"
    decl = fn.node.child_by_field_name("declarator")
    if decl is not None and decl.type == "reference_declarator":
        text += "&"
    return text


def params_of(fn) -> list:
    """[(name, type text, default text or None)] of a host function, the parameters with
    a default value too (``const int64_t k = -1``)."""
    decl = fn.node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    out = []
    for i, p in enumerate(plist.named_children if plist is not None else []):
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        text = p.text.decode(errors="replace")
        default = p.child_by_field_name("default_value")
        if default is not None:
            text = text[:default.start_byte - p.start_byte].rstrip().rstrip("=").rstrip()
        m = re.fullmatch(r"(.*?[\s&*>])(\w+)\s*(\[\s*\w*\s*\])?", " ".join(text.split()), re.S)
        name, ty = (m.group(2), m.group(1) + (m.group(3) or "")) if m else (f"arg{i}", text)
        out.append((name, ty, default.text.decode(errors="replace") if default is not None else None))
    return out


def _default(text: str) -> str:
    """A C++ default argument as schema / Python text."""
    t = text.strip()
    if t in ("true", "false"):
        return t.capitalize()
    if t in ("nullptr", "c10::nullopt", "std::nullopt", "at::nullopt", "{}"):
        return "None"
    t = re.sub(r"(?<=\d)[uUlLfF]+$", "", t)
    if re.fullmatch(r"-?\d+(\.\d*)?([eE][-+]?\d+)?", t):
        return t
    raise NotTranslated(f"the default argument {text!r}")


def schema_of(unit, fn, name, written=()) -> str:
    """The op schema of ``fn``; ``written``: parameters its kernels write (a tensor is a
    handle in C++: ``Tensor out`` by value is written in place, so it is ``Tensor(a!)``)."""
    params, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
    for pname, ptype, default in params_of(fn):
        st = schema_type(ptype)
        if st == "Tensor" and (("&" in ptype and not re.search(r"\bconst\b", ptype)) or pname in written):
            st = f"Tensor({next(alias)}!)"  # written in place
        params.append(f"{st} {_py_name(pname)}" + (f"={_default(default)}" if default is not None else ""))
    ret = schema_type(_return_type(unit, fn), ret=True)
    return f"{name}({', '.join(params)}) -> {ret}"


def _py_name(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name in _RESERVED else name


# names the generated code uses itself (builtins it calls, its module names)
_RESERVED = {"mod", "torch", "_rt", "math", "len", "min", "max", "float", "int", "bool", "list", "range",
             "abs", "round", "print"}


# ----------------------------------------------------------------------------- host -> Python
_DTYPES = {"Float": "torch.float32", "Double": "torch.float64", "Half": "torch.float16",
           "BFloat16": "torch.bfloat16", "Int": "torch.int32", "Long": "torch.int64",
           "Short": "torch.int16", "Char": "torch.int8", "Byte": "torch.uint8", "Bool": "torch.bool",
           "Float32": "torch.float32", "Float64": "torch.float64", "Float16": "torch.float16",
           "Int32": "torch.int32", "Int64": "torch.int64", "Int16": "torch.int16",
           "Int8": "torch.int8", "UInt8": "torch.uint8"}
_DROP_TYPES = re.compile(r"\b(cudaStream_t|CUDAStream|CUDAGuard|OptionalCUDAGuard|CUDAStreamGuard|"
                         r"DeviceGuard|OptionalDeviceGuard|cudaEvent_t|NoGradGuard|"
                         r"AutoDispatchBelowAutograd)\b")
_DROP_CALLS = re.compile(r"^(C10_CUDA_KERNEL_LAUNCH_CHECK|C10_CUDA_CHECK|AT_CUDA_CHECK|CUDA_CHECK|"
                         r"cudaCheck|checkCudaErrors|gpuErrchk|CUDA_KERNEL_CHECK|"
                         r"cudaGetLastError|cudaDeviceSynchronize|cudaPeekAtLastError|"
                         r"cudaFuncSetAttribute|cudaStreamSynchronize|"
                         r"(at::|c10::)?cuda::getCurrentCUDAStream|(at::)?cuda::stream_synchronize)$")
_CHECK_WRAP = re.compile(r"^(C10_CUDA_CHECK|AT_CUDA_CHECK|CUDA_CHECK|cudaCheck|checkCudaErrors|gpuErrchk)$")
_CHECKS = re.compile(r"^(TORCH_CHECK|TORCH_INTERNAL_ASSERT|AT_ASSERTM|AT_ASSERT|TORCH_CHECK_VALUE|"
                     r"TORCH_CHECK_INDEX|TORCH_CHECK_TYPE|AT_CHECK|TORCH_DCHECK|"
                     r"TORCH_INTERNAL_ASSERT_DEBUG_ONLY)$")
_CMP_CHECKS = {"TORCH_CHECK_EQ": "==", "TORCH_CHECK_NE": "!=", "TORCH_CHECK_LT": "<",
               "TORCH_CHECK_LE": "<=", "TORCH_CHECK_GT": ">", "TORCH_CHECK_GE": ">="}
_REFUSED_CALLS = [
    (re.compile(r"^cuda(Malloc|Free|Memcpy(?!ToSymbol|FromSymbol)\w*|Memset\w*|HostAlloc|MallocHost)"),
     "manages raw device memory ({name}): allocate tensors instead"),
    (re.compile(r"^(cublas|cusparse|cusolver|cudnn|curand|cufft)\w*|^(at::cuda::blas|cub|thrust|cutlass)::|"
                r"^at::cuda::getCurrentCUDA(Blas|Sparse|Solver)\w*Handle"),
     "calls a vendor library on the host ({name}): no SYCL translation"),
    (re.compile(r"^cuda(Event|Stream)\w*"), "uses CUDA streams/events explicitly ({name})"),
    (re.compile(r"^(cudaLaunchKernel|cudaLaunchCooperativeKernel|cudaOccupancy\w*|cudaGetDevice\w*|"
                r"cudaDeviceGetAttribute|at::cuda::getCurrentDeviceProperties|at::cuda::getDeviceProperties)$"),
     "queries or launches through the CUDA runtime ({name})"),
]
_FACTORIES = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
              "arange", "rand", "randn", "randint", "empty_strided", "tensor", "linspace", "eye",
              "rand_like", "randn_like"}
_MATH = {"ceil": "math.ceil", "floor": "math.floor", "sqrt": "math.sqrt", "log2": "math.log2",
         "log": "math.log", "exp": "math.exp", "pow": "math.pow", "abs": "abs", "fabs": "abs",
         "ceilf": "math.ceil", "floorf": "math.floor", "sqrtf": "math.sqrt", "round": "round"}
_CEIL_DIV = re.compile(r"^((at::)?(cuda::)?(ATenCeilDiv|ceil_div|THCCeilDiv|div_up|divUp|DIVUP|"
                       r"CEIL_DIV|div_round_up|ceildiv|cdiv|iDivUp|DIV_UP|CeilDiv))$")
_INT_TYPES = re.compile(r"^(unsigned |signed )?(int|long|long long|short|char|size_t|int64_t|int32_t|"
                        r"int16_t|int8_t|uint64_t|uint32_t|uint16_t|uint8_t|uint|unsigned|index_t|"
                        r"ptrdiff_t|long int|unsigned long|unsigned int)$")
_FLOAT_TYPES = {"float", "double"}


class _Host:
    """One host function's body as Python (NOTE [host functions as Python])."""

    def __init__(self, unit, fn, kernels, hosts):
        self.unit, self.fn, self.src = unit, fn, unit.source
        self.kernels = kernels  # name -> Function (every kernel of the unit)
        self.hosts = hosts  # host functions of the unit, name -> Function
        self.ptrs = set()  # Python names that are C++ pointers (tensors passed as pointers)
        self.types = set()  # Python names bound to C++ type names (AT_DISPATCH aliases, using)
        self.launched = []
        self.data_dependent = False
        self.calls = set()
        self.ret = _norm_type(_return_type(unit, fn))
        self.streams = set()  # std::stringstream locals
        self.written = set()  # C++ names of the tensors the launched kernels write
        self.alias = {}  # pointer name -> the tensor it points into (T *p = x.data_ptr<T>())

    def text(self, n) -> str:
        return node_text(self.src, n)

    def where(self, n) -> str:
        return f"line {n.start_point[0] + 1}"

    # statements ------------------------------------------------------------
    def body(self) -> list:
        b = self.fn.node.child_by_field_name("body")
        return self.block(b)

    def block(self, n) -> list:
        out = []
        for st in n.named_children:
            out += self.statement(st)
        return out

    def statement(self, st) -> list:
        t = st.type
        if t == "comment":
            return []
        if t == "compound_statement":
            return self.block(st)
        if t == "declaration":
            return self.declaration(st)
        if t == "alias_declaration" or t == "type_definition":
            return self.alias(st)
        if t == "return_statement":
            vals = st.named_children
            vals = [v for v in vals if v.type != "comment"]
            if not vals:
                return ["return"]
            v = vals[0]
            if v.type == "initializer_list":
                items = [self.expr(x) for x in v.named_children if x.type != "comment"]
                if _TUPLE.match(self.ret):
                    return [f"return ({', '.join(items)}{',' if len(items) == 1 else ''})"]
                return [f"return [{', '.join(items)}]"]
            return [f"return {self.expr(v)}"]
        if t == "expression_statement":
            if not st.named_children:
                return []
            return self.expression_statement(st.named_children[0])
        if t == "if_statement":
            cond = st.child_by_field_name("condition")
            c = cond.named_children[0] if cond.type == "condition_clause" else cond
            out = [f"if {self.expr(c)}:"] + _indent(self.statement(st.child_by_field_name("consequence")))
            alt = st.child_by_field_name("alternative")
            if alt is not None:
                alt = alt.named_children[0] if alt.type == "else_clause" else alt
                if alt.type == "if_statement":
                    rest = self.statement(alt)
                    out += ["el" + rest[0]] + rest[1:]
                else:
                    out += ["else:"] + _indent(self.statement(alt))
            return out
        if t == "for_statement":
            return self.for_loop(st)
        raise NotTranslated(f"{t.replace('_', ' ')} at {self.where(st)}")

    def alias(self, st) -> list:
        if st.type == "alias_declaration":
            name, ty = st.child_by_field_name("name"), st.child_by_field_name("type")
        else:
            ty, name = st.child_by_field_name("type"), st.child_by_field_name("declarator")
        py = _py_name(self.text(name))
        self.types.add(py)
        return [f"{py} = {self.type_value(self.text(ty))}"]

    def type_value(self, text: str) -> str:
        """A C++ type as a Python string expression (aliases bound in Python interpolated)."""
        text = " ".join(text.split())
        m = re.fullmatch(r"(?:at::)?(acc_type|opmath_type)\s*<\s*(\w+)\s*(?:,\s*\w+\s*)?>", text)
        if m and m.group(2) in self.types:
            return f"_rt.acc_type({m.group(2)})"
        if text in self.types:
            return text
        return repr(text)

    def declaration(self, st) -> list:
        ty = st.child_by_field_name("type")
        tytext = " ".join(self.text(ty).split()) if ty is not None else ""
        if _DROP_TYPES.search(tytext):
            return []  # streams and device guards: one queue, one device per op here
        out = []
        for d in st.children_by_field_name("declarator"):
            is_ptr = d.type == "pointer_declarator" or (d.type == "init_declarator" and
                                                        d.child_by_field_name("declarator").type == "pointer_declarator")
            name_node = d
            while name_node.type not in ("identifier",) and name_node.child_by_field_name("declarator") is not None:
                name_node = name_node.child_by_field_name("declarator")
            if name_node.type == "function_declarator":  # dim3 g(a, b) parses as a prototype
                name_node = name_node.child_by_field_name("declarator")
            name = _py_name(self.text(name_node))
            if d.type == "function_declarator":
                args = d.child_by_field_name("parameters").named_children
                vals = [self.expr(a.named_children[0] if a.type == "parameter_declaration" and a.named_children else a)
                        if a.type != "parameter_declaration" else _py_name(self.text(a)) for a in args]
                out.append(self.bind(name, tytext, None, vals))
                continue
            if d.type != "init_declarator":
                if re.search(r"\bTensor\b", tytext):
                    out.append(f"{name} = None")  # an undefined tensor, assigned later
                    continue
                if "vector" in tytext:
                    out.append(f"{name} = []")
                    continue
                base = re.sub(r"\b(const|static|volatile)\b", "", tytext).strip().replace("std::", "")
                if base in ("stringstream", "ostringstream"):
                    self.streams.add(name)
                    out.append(f"{name} = _rt.StringStream()")
                    continue
                if d.type == "identifier" and (_INT_TYPES.match(base) or base in _FLOAT_TYPES or base == "bool"):
                    # C++ leaves it indeterminate until assigned; any value is a faithful start
                    out.append(f"{name} = {'False' if base == 'bool' else '0.0' if base in _FLOAT_TYPES else '0'}")
                    continue
                raise NotTranslated(f"declaration of {name} without a value at {self.where(st)}")
            val = d.child_by_field_name("value")
            if is_ptr or self.is_pointer(val):
                self.ptrs.add(name)
                root = re.match(r"\s*(\w+)\s*\.", self.text(val))
                if root:
                    self.alias[self.text(name_node)] = self.alias.get(root.group(1), root.group(1))
            if val.type == "argument_list":
                vals = [self.expr(a) for a in val.named_children if a.type != "comment"]
                out.append(self.bind(name, tytext, None, vals))
            elif val.type == "initializer_list":
                vals = [self.expr(a) for a in val.named_children if a.type != "comment"]
                out.append(self.bind(name, tytext, None, vals))
            else:
                out.append(self.bind(name, tytext, self.expr(val), None))
        return out

    def bind(self, name, tytext, value, args) -> str:
        base = re.sub(r"\b(const|constexpr|static|volatile|unsigned(?=\s))\b", "", tytext).strip()
        if base in ("dim3", "::dim3"):
            return f"{name} = ({', '.join(args or [value])},)" if args is not None else f"{name} = _rt.dim3({value})"
        if re.fullmatch(r"(at::|c10::)?TensorArg", base) and args is not None:
            return f"{name} = _rt.TensorArg({', '.join(args)})"
        if re.search(r"\bTensorOptions\b", base):
            return f"{name} = _rt.Options({', '.join(args or [value])})" if (args or value) else f"{name} = _rt.Options()"
        if args is not None:
            if "vector" in base or re.fullmatch(r"(at::|c10::)?IntArrayRef", base):
                return f"{name} = [{', '.join(args)}]"
            if len(args) == 1:
                value = args[0]
            else:
                raise NotTranslated(f"constructing a {tytext} from {len(args)} values")
        t = base.replace("std::", "")
        if _INT_TYPES.match(t) and value is not None and name not in self.ptrs:
            return f"{name} = _rt.to_int({value})"
        if t in _FLOAT_TYPES and name not in self.ptrs:
            return f"{name} = float({value})"
        if t == "bool":
            return f"{name} = bool({value})"
        return f"{name} = {value}"

    def for_loop(self, st) -> list:
        init, cond, upd = (st.child_by_field_name(k) for k in ("initializer", "condition", "update"))
        body = st.child_by_field_name("body")
        m = None
        if init is not None and init.type == "declaration" and cond is not None and upd is not None:
            d = init.children_by_field_name("declarator")
            if len(d) == 1 and d[0].type == "init_declarator":
                var = self.text(d[0].child_by_field_name("declarator"))
                start = self.expr(d[0].child_by_field_name("value"))
                ctext, utext = " ".join(self.text(cond).split()), " ".join(self.text(upd).split())
                m = re.fullmatch(rf"{re.escape(var)}\s*(<|<=)\s*(.+)", ctext)
                step = {f"++{var}": "1", f"{var}++": "1"}.get(utext.replace(" ", ""))
                sm = re.fullmatch(rf"{re.escape(var)}\s*\+=\s*(.+)", utext)
                if sm and re.fullmatch(r"\w+", sm.group(1)):
                    step = _py_name(sm.group(1)) if not sm.group(1).isdigit() else sm.group(1)
        if not m or step is None:
            raise NotTranslated(f"a for loop that is not `for (T i = a; i < b; ++i / i += s)` at {self.where(st)}")
        stop = self.expr(cond.child_by_field_name("right"))
        if m.group(1) == "<=":
            stop = f"({stop}) + 1"
        return ([f"for {_py_name(var)} in range({start}, {stop}, {step}):"]
                + _indent(self.statement(body) or ["pass"]))

    def expression_statement(self, e) -> list:
        if e.type == "call_expression":
            f = e.child_by_field_name("function")
            name = " ".join(self.text(f).split()) if f is not None else ""
            if any(c.type == "kernel_call_syntax" for c in e.children):
                return [self.launch(e)]
            args = [a for a in e.child_by_field_name("arguments").named_children if a.type != "comment"]
            if _CHECK_WRAP.match(name) and len(args) == 1 and args[0].type == "call_expression":
                return self.expression_statement(args[0])  # AT_CUDA_CHECK(cudaMemcpyToSymbol(...))
            if _DROP_CALLS.match(name.split("<")[0]):
                return []
            if _CHECKS.match(name):
                return [f"_rt.check({', '.join(self.expr(a) for a in args)})"]
            if name in ("AT_ERROR", "TORCH_CHECK_NOT_IMPLEMENTED"):
                return [f"_rt.check(False, {', '.join(self.expr(a) for a in args)})"]
            if name in ("TORCH_WARN", "TORCH_WARN_ONCE"):
                return [f"_rt.message({', '.join(f'str({self.expr(a)})' for a in args)}, '\\n')"]
            if name in _CMP_CHECKS and len(args) == 2:
                return [f"_rt.check({self.expr(args[0])} {_CMP_CHECKS[name]} {self.expr(args[1])}, "
                        f"{self.text(args[0])!r} ' {_CMP_CHECKS[name]} ' {self.text(args[1])!r})"]
            if name.startswith("AT_DISPATCH_"):
                return self.dispatch(name, args)
            if re.match(r"^cudaMemcpy(To|From)Symbol(Async)?$", name):
                from .pylaunch import symbol_copy
                return [symbol_copy(name, [self.expr(a) for a in args], self.text(args[0]))]
            if name in self.unit.macros_fn:
                return self.macro(name, args)
        if e.type == "assignment_expression":
            op = self.text(e.child_by_field_name("operator"))
            left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
            if op in ("=", "+=", "-=", "*=", "|=", "&=", "^=", "<<=", ">>="):
                lhs = self.expr(left)
                if op == "=" and right.type == "initializer_list":
                    return [f"{lhs} = [{', '.join(self.expr(x) for x in right.named_children)}]"]
                return [f"{lhs} {op} {self.expr(right)}"]
            if op in ("/=", "%="):
                lhs = self.expr(left)
                return [f"{lhs} = _rt.{'div' if op == '/=' else 'rem'}({lhs}, {self.expr(right)})"]
        head = re.match(r"\s*(std::cout|std::cerr|\w+)\s*<<", self.text(e)) if e.type == "binary_expression" else None
        if head and (head.group(1).startswith("std::") or head.group(1) in self.streams):
            parts, n = [], e  # std::cerr << a << b << std::endl: a message on stderr
            while n.type == "binary_expression" and self.text(n.child_by_field_name("operator")) == "<<":
                parts.append(n.child_by_field_name("right"))
                n = n.child_by_field_name("left")
            items = ['"\\n"' if self.text(p) in ("std::endl", '"\\n"') else f"str({self.expr(p)})" for p in reversed(parts)]
            if head.group(1).startswith("std::"):
                return [f"_rt.message({', '.join(items)})"]
            return [f"{head.group(1)}.add({', '.join(items)})"]  # a std::stringstream
        if e.type == "update_expression":
            arg = self.expr(e.child_by_field_name("argument"))
            return [f"{arg} {'+' if '++' in self.text(e) else '-'}= 1"]
        return [self.expr(e)]

    def macro(self, name, args) -> list:
        """A function-like macro of the file used as a statement (``CHECK_INPUT(x)``):
        expanded as the preprocessor would, then translated."""
        params, body = self.unit.macros_fn[name]
        texts = [self.text(a) for a in args]
        if len(texts) != len(params):
            raise NotTranslated(f"macro {name} called with {len(texts)} arguments")
        for p, a in zip(params, texts):
            body = re.sub(rf"#\s*{p}\b", '"' + a.replace('"', '\\"') + '"', body)
            body = re.sub(rf"\b{p}\b", a, body)
        sub = parse_source(f"void __xv_macro() {{ {body}; }}".encode())
        inner = _Host(sub, sub.functions[0], self.kernels, self.hosts)
        inner.ptrs, inner.types = self.ptrs, self.types
        inner.unit.macros_fn = self.unit.macros_fn
        out = inner.body()
        self.launched += inner.launched
        self.data_dependent |= inner.data_dependent
        return out

    def dispatch(self, name, args) -> list:
        """AT_DISPATCH_*(type, "name", [&] { ... }): the alias takes the C++ type of the
        tensor's dtype (the instantiation load() compiled from the same macro)."""
        lam = args[-1]
        while lam.type == "parenthesized_expression":
            lam = lam.named_children[0]
        if lam.type != "lambda_expression" or len(args) < 3:
            raise NotTranslated(f"{name} without a lambda body")
        types = dispatch_types(name, " ".join(self.text(a) for a in args[:-3]))
        alias = "index_t" if "INDEX_TYPES" in name else "scalar_t"
        if not types:
            raise NotTranslated(f"{name}: its dispatched types are not known")
        body = lam.child_by_field_name("body")
        if any(n.type == "return_statement" for n in walk(body)):
            raise NotTranslated(f"{name}: the lambda returns a value")
        self.types.add(alias)
        head = f"{alias} = _rt.dispatch({self.expr(args[-3])}, {tuple(types)!r}, {self.expr(args[-2])})"
        return [head] + self.block(body)

    def launch(self, call) -> str:
        f = call.child_by_field_name("function")
        cfg = next(c for c in call.children if c.type == "kernel_call_syntax")
        targs = None
        if f.type == "template_function":
            kname = self.text(f.child_by_field_name("name")).split("::")[-1]
            targs = split_template_args(self.text(f.child_by_field_name("arguments"))[1:-1])
        else:
            kname = self.text(f).split("::")[-1].strip()
        kernel = self.kernels.get(kname)
        if kernel is None:
            raise NotTranslated(f"launches {kname}, which is not a kernel of this file")
        args = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
        if kernel.template_params and targs is None:
            targs = self.deduce(kernel, args)
        conf = [self.expr(c) for c in cfg.named_children if c.type != "comment"][:3]
        if len(conf) == 3 and conf[2] in ("0", "0u", "0U"):
            conf = conf[:2]
        target = f"mod.{kname}" if targs is None else f"mod[{self.spec(kname, targs)}]"
        self.launched.append(kname)
        for p, a in zip(kernel.params, args):  # which tensors the kernel writes
            writable = (p.pointer and not p.const_pointee) or (
                accessor_type(_norm_type(p.type)) is not None and not re.search(r"\bconst\b", p.type))
            root = re.match(r"\s*(\w+)", self.text(a))
            if writable and root:
                self.written.add(self.alias.get(root.group(1), root.group(1)))
        return f"{target}[{', '.join(conf)}]({', '.join(self.expr(a) for a in args)})"

    def spec(self, kname, targs) -> str:
        parts = []
        for a in targs:
            ids = set(re.findall(r"[A-Za-z_]\w*", a))
            if a.strip() in self.types:
                parts.append("{" + a.strip() + "}")
            elif ids and all(_py_name(i) in self.bound for i in ids):
                expr = parse_source(f"void f() {{ __xv({a}); }}".encode())
                node = expr.functions[0].node.child_by_field_name("body").named_children[0].named_children[0]
                sub = _Host(expr, expr.functions[0], self.kernels, self.hosts)
                sub.types = self.types
                parts.append("{_rt.targ(" + sub.expr(node.child_by_field_name("arguments").named_children[0]) + ")}")
            else:
                parts.append(a.strip().replace("{", "{{").replace("}", "}}"))
        return "f" + repr(f"{kname}<{', '.join(parts)}>")

    @property
    def bound(self) -> set:
        """Names the Python function has bound so far (parameters and locals)."""
        names = {_py_name(n) for n, _, _ in params_of(self.fn)} | self.types | self.ptrs
        for n in walk(self.fn.node):
            if n.type == "init_declarator":
                d = n.child_by_field_name("declarator")
                while d is not None and d.type != "identifier":
                    d = d.child_by_field_name("declarator")
                if d is not None:
                    names.add(_py_name(self.text(d)))
        return names

    def deduce(self, kernel, args) -> list:
        """Template arguments of a launch without them, from ``x.data_ptr<T>()`` /
        ``x.packed_accessor32<T, N>()`` arguments against the kernel's ``T`` parameters."""
        got = {}
        for p, a in zip(kernel.params, args):
            m = re.search(r"\.\s*(?:data_ptr|data|mutable_data_ptr|const_data_ptr|packed_accessor(?:32|64)?)"
                          r"\s*<\s*([\w:]+)", self.text(a))
            for kind, t in kernel.template_params:
                if kind == "type" and m and re.search(rf"\b{t}\b", p.type):
                    got.setdefault(t, m.group(1))
        names = [t for _, t in kernel.template_params]
        if not all(t in got for t in names):
            raise NotTranslated(f"cannot tell the template arguments of {kernel.name} at its launch")
        return [got[t] for t in names]

    # expressions -----------------------------------------------------------
    def is_pointer(self, n) -> bool:
        t = self.text(n)
        if re.search(r"\.\s*(data_ptr|data|mutable_data_ptr|const_data_ptr)\s*(<[^>]*>)?\s*\(\s*\)\s*$", t):
            return True
        if n.type == "binary_expression":
            return any(self.is_pointer(c) for c in (n.child_by_field_name("left"), n.child_by_field_name("right")))
        return n.type == "identifier" and _py_name(t) in self.ptrs

    def expr(self, n) -> str:
        t, s = n.type, self.text(n)
        if t == "comment":
            return ""
        if t == "number_literal":
            v = s.replace("'", "")
            if v.lower().startswith("0x"):
                return v.rstrip("uUlL")
            v = v.rstrip("uUlL") if not re.search(r"[.eE]", v) else v.rstrip("fFlL")
            return v
        if t in ("string_literal", "raw_string_literal"):
            return s if t == "string_literal" else repr(s)
        if t == "concatenated_string":
            return " ".join(self.expr(c) for c in n.named_children)
        if t == "char_literal":
            return f"ord({s})"
        if t in ("true", "false"):
            return "True" if t == "true" else "False"
        if t in ("null", "nullptr") or s == "NULL":
            return "None"
        if t == "identifier":
            return _py_name(s)
        if t == "qualified_identifier":
            return self.qualified(s)
        if t == "parenthesized_expression":
            return f"({self.expr(n.named_children[0])})"
        if t == "comma_expression":
            raise NotTranslated(f"a comma expression at {self.where(n)}")
        if t == "binary_expression":
            op = self.text(n.child_by_field_name("operator"))
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            a, b = self.expr(left), self.expr(right)
            if op in ("+", "-") and (self.is_pointer(left) or self.is_pointer(right)):
                if self.is_pointer(left) and not self.is_pointer(right):
                    return f"_rt.offset({a}, {b if op == '+' else '-(' + b + ')'})"
                raise NotTranslated(f"pointer arithmetic at {self.where(n)}")
            if op == "/":
                return f"_rt.div({a}, {b})"
            if op == "%":
                return f"_rt.rem({a}, {b})"
            op = {"&&": "and", "||": "or"}.get(op, op)
            return f"{a} {op} {b}"
        if t == "unary_expression":
            op = self.text(n.child_by_field_name("operator"))
            arg = self.expr(n.child_by_field_name("argument"))
            return f"(not {arg})" if op == "!" else f"{op}{arg}"
        if t == "pointer_expression":
            raise NotTranslated(f"a pointer dereference or address on the host at {self.where(n)}")
        if t == "conditional_expression":
            c, a, b = (self.expr(n.child_by_field_name(k)) for k in ("condition", "consequence", "alternative"))
            return f"({a} if {c} else {b})"
        if t == "cast_expression":
            return self.cast(self.text(n.child_by_field_name("type")), self.expr(n.child_by_field_name("value")))
        if t == "sizeof_expression":
            inner = s[len("sizeof"):].strip()
            inner = inner[1:-1].strip() if inner.startswith("(") else inner
            return f"_rt.sizeof({self.type_value(inner)})"
        if t == "initializer_list":
            return "[" + ", ".join(self.expr(c) for c in n.named_children if c.type != "comment") + "]"
        if t == "subscript_expression":
            arg = n.child_by_field_name("argument")
            idx = n.child_by_field_name("indices") or n.child_by_field_name("index")
            inner = [c for c in idx.named_children] if idx.type == "subscript_argument_list" else [idx]
            return f"{self.expr(arg)}[{', '.join(self.expr(c) for c in inner)}]"
        if t == "field_expression":
            f = self.text(n.child_by_field_name("field"))
            base = self.expr(n.child_by_field_name("argument"))
            if f in ("x", "y", "z"):
                return f"_rt.dim3({base})[{'xyz'.index(f)}]"
            raise NotTranslated(f"field {f!r} at {self.where(n)}")
        if t == "call_expression":
            return self.call(n)
        if t == "template_function":
            raise NotTranslated(f"template {s!r} used as a value")
        if t == "lambda_expression":
            raise NotTranslated(f"a lambda at {self.where(n)}")
        raise NotTranslated(f"expression {s[:60]!r} at {self.where(n)}")

    def cast(self, ty, v) -> str:
        ty = " ".join(re.sub(r"\bconst\b", "", ty).split())
        if "*" in ty:
            return v
        if _INT_TYPES.match(ty.replace("std::", "")):
            return f"_rt.to_int({v})"
        if ty in _FLOAT_TYPES:
            return f"float({v})"
        if ty == "bool":
            return f"bool({v})"
        if ty in self.types:
            return v
        raise NotTranslated(f"a cast to {ty}")

    def qualified(self, s) -> str:
        s = " ".join(s.split())
        m = re.fullmatch(r"(?:(?:at|torch|c10)::)?(?:ScalarType::|k)(\w+)", s)
        if m and m.group(1) in _DTYPES:
            return _DTYPES[m.group(1)]
        m = re.fullmatch(r"(?:(?:at|torch|c10)::)?(?:DeviceType::|k)(CUDA|CPU|XPU|HIP)", s)
        if m:
            return "_rt.KERNEL_DEVICE" if m.group(1) in ("CUDA", "HIP") else repr(m.group(1).lower())
        m = re.fullmatch(r"std::numeric_limits<(\w+)>::(max|min|lowest|infinity)\(\)", s)
        if m:
            return f"_rt.limits({m.group(1)!r}, {m.group(2)!r})"
        raise NotTranslated(f"the name {s!r}")

    def call(self, n) -> str:
        f = n.child_by_field_name("function")
        args = [a for a in n.child_by_field_name("arguments").named_children if a.type != "comment"]
        pa = lambda: ", ".join(self.expr(a) for a in args)  # noqa: E731
        if f.type == "field_expression":
            return self.method(f, args)
        name = " ".join(self.text(f).split())
        plain = re.sub(r"<.*>$", "", name)
        targ = re.search(r"<(.*)>$", name)
        short = plain.split("::")[-1]
        for rx, reason in _REFUSED_CALLS:
            if rx.match(plain):
                raise NotTranslated(reason.format(name=plain))
        if (_INT_TYPES.match(plain.replace("std::", "")) or plain in _FLOAT_TYPES or plain == "bool") and len(args) == 1:
            return self.cast(plain, self.expr(args[0]))  # int64_t(x): a functional cast
        if plain in ("static_cast", "reinterpret_cast") and targ:
            return self.cast(targ.group(1), self.expr(args[0]))
        if plain in ("std::min", "std::max", "min", "max", "fmin", "fmax", "std::fmin", "std::fmax",
                     "fminf", "fmaxf"):
            return f"{'min' if 'min' in short else 'max'}({pa()})"
        if _CEIL_DIV.match(plain) and len(args) == 2:
            return f"_rt.ceil_div({pa()})"
        if plain.replace("std::", "") in _MATH:
            return f"{_MATH[plain.replace('std::', '')]}({pa()})"
        if plain in ("std::get", "get") and targ and targ.group(1).strip().isdigit() and len(args) == 1:
            return f"{self.expr(args[0])}[{targ.group(1).strip()}]"
        if plain in ("std::make_tuple", "std::tuple", "std::forward_as_tuple"):
            return f"({pa()},)"
        if plain in ("std::vector", "at::IntArrayRef", "c10::IntArrayRef"):
            return f"[{pa()}]"
        if plain in ("dim3", "::dim3"):
            return f"({pa()},)"
        if plain in ("torch::TensorOptions", "at::TensorOptions", "c10::TensorOptions"):
            return f"_rt.Options({pa()})"
        if plain in ("torch::dtype", "at::dtype", "torch::device", "at::device"):
            return f"_rt.Options().{short}_({pa()})"
        if re.fullmatch(r"(at|c10)::(checkAllSameGPU|checkAllSameType|checkSameGPU|checkSameType|"
                        r"checkContiguous|checkAllContiguous|checkDim|checkSize|checkNumel|"
                        r"checkScalarType|checkDeviceType|checkAllDefined|checkDimRange)", plain):
            return f"_rt.{short}({pa()})"
        if plain.startswith(("at::", "torch::")) and "::cuda::" not in plain:
            if plain.startswith(("at::native::", "at::detail::")):
                raise NotTranslated(f"calls {plain} (ATen internals)")
            self.calls.add(plain)
            return f"_rt.aten({short!r}, {pa()})" if args else f"_rt.aten({short!r})"
        if _CHECKS.match(plain):
            return f"_rt.check({pa()})"
        if plain in self.hosts and plain != self.fn.name:
            self.calls.add(plain)
            return f"{plain}(mod, {pa()})"
        if plain in self.kernels:
            raise NotTranslated(f"calls kernel {plain} without a launch")
        raise NotTranslated(f"calls {plain}, which has no translation")

    def method(self, f, args) -> str:
        obj_node = f.child_by_field_name("argument")
        field_node = f.child_by_field_name("field")
        op = self.text(f)[len(self.text(obj_node)):].lstrip()[:2]
        if op.startswith("->"):
            raise NotTranslated(f"a call through a pointer ({self.text(f)!r})")
        meth = self.text(field_node)
        targ = None
        if field_node.type == "template_method":
            meth = self.text(field_node.child_by_field_name("name"))
            targ = self.text(field_node.child_by_field_name("arguments"))[1:-1]
        obj = self.expr(obj_node)
        pa = ", ".join(self.expr(a) for a in args)
        if meth in ("data_ptr", "data", "mutable_data_ptr", "const_data_ptr", "packed_accessor32",
                    "packed_accessor64", "packed_accessor", "generic_packed_accessor"):
            return obj  # the launch takes the tensor (its dtype and shape checked there)
        if meth in ("accessor",):
            raise NotTranslated("a host-side TensorAccessor (reads tensor data on the host)")
        if meth == "item":
            self.data_dependent = True
            cast = "_rt.to_int" if targ and _INT_TYPES.match(targ.replace("std::", "")) else "float" if targ else ""
            return f"{cast}({obj}.item())" if cast else f"{obj}.item()"
        if meth in ("cpu", "tolist"):
            self.data_dependent = True
        simple = {"sizes": f"list({obj}.shape)", "strides": f"list({obj}.stride())",
                  "options": f"_rt.Options({obj})", "scalar_type": f"{obj}.dtype",
                  "dtype": f"{obj}.dtype", "device": f"{obj}.device",
                  "is_cuda": f"_rt.on_kernel_device({obj})", "defined": f"({obj} is not None)",
                  "has_value": f"({obj} is not None)", "value": obj, "vec": f"list({obj})",
                  "get_device": f"_rt.device_index({obj})", "type": f"_rt.type_of({obj})",
                  "is_floating_point": f"{obj}.is_floating_point()"}
        if meth in simple and not args:
            return simple[meth]
        if meth in ("ndimension",):
            return f"{obj}.dim()"
        if meth == "size" and obj_node.type == "identifier" and _py_name(self.text(obj_node)) in self.types:
            raise NotTranslated("size() of a type")
        if meth in ("toType", "to", "type_as") and args:
            return f"_rt.to({obj}, {pa})"
        if meth == "dtype" and args:  # TensorOptions().dtype(x)
            return f"{obj}.dtype_({pa})"
        if meth in ("device", "layout", "requires_grad") and args:
            return f"{obj}.{meth}_({pa})"
        if meth in ("push_back", "emplace_back"):
            return f"{obj}.append({pa})"
        if meth == "size" and not args:
            return f"len({obj})"
        if meth in ("is_contiguous", "contiguous", "size", "stride", "numel", "dim", "element_size"):
            return f"{obj}.{meth}({pa})"
        self.calls.add(f"Tensor.{meth}")
        return f"_rt.method({obj}, {meth!r}{', ' if pa else ''}{pa})"


def _indent(lines: list) -> list:
    return ["    " + ln for ln in lines]


_INTS = ["int64_t", "int32_t", "int16_t", "int8_t", "uint8_t"]
_SCALAR_TYPES = {"Half": "c10::Half", "BFloat16": "__nv_bfloat16", "Float": "float", "Double": "double",
                 "Int": "int32_t", "Long": "int64_t", "Short": "int16_t", "Char": "int8_t",
                 "Byte": "uint8_t", "Bool": "bool"}


def dispatch_types(name: str, extra: str) -> list:
    """The C++ types an ``AT_DISPATCH_*`` macro binds (as instantiate.py instantiates them);
    ``extra``: the macro's leading arguments (the ``_AND``/``_AND2`` types)."""
    if "INDEX_TYPES" in name:
        return ["int32_t", "int64_t"]
    types = []
    if "FLOATING" in name or "ALL_TYPES" in name:
        types += ["float", "double"]
    if "INTEGRAL" in name or "ALL_TYPES" in name:
        types += _INTS
    if "HALF" in name:
        types.append("c10::Half")  # ATen's own Half (NOTE [c10::Half] in the torch compat header)
    for m in re.finditer(r"\b(?:k|ScalarType::)(Half|BFloat16|Float|Double|Int|Long|Short|Char|Byte|Bool)\b", extra):
        types.append(_SCALAR_TYPES[m.group(1)])
    if "REDUCED_FLOATING" in name:
        types = ["c10::Half", "__nv_bfloat16"]
    return list(dict.fromkeys(types))


# ----------------------------------------------------------------------------- the module
_FN_MACRO = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)[ \t]*((?:[^\n]*\\\n)*[^\n]*)$", re.M)


def _function_macros(source: bytes) -> dict:
    out = {}
    for m in _FN_MACRO.finditer(source):
        params = [p.strip() for p in m.group(2).decode().split(",") if p.strip()]
        out[m.group(1).decode()] = (params, m.group(3).decode().replace("\\\n", " "))
    return out


def _launches_kernels(fn, hosts, kernels, seen=None) -> bool:
    seen = seen or set()
    if fn.name in seen:
        return False
    seen.add(fn.name)
    if any(n.type == "kernel_call_syntax" for n in walk(fn.node)):
        return True
    return any(_launches_kernels(hosts[c], hosts, kernels, seen) for c in fn.calls if c in hosts)


_BINDING_BLOCKS = {"TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT", "PYBIND11_MODULE"}


def find_ops(unit) -> list:
    """The ops of ``unit`` (one per bound host function, or per tensor host function that
    launches kernels when nothing is bound), each translated or refused with its reason."""
    unit.macros_fn = _function_macros(unit.source)
    hosts = {f.name: f for f in unit.functions if f.kind == "host" and f.name not in _BINDING_BLOCKS
             and f.node.child_by_field_name("body") is not None and not f.member}
    kernels = {f.name: f for f in unit.functions if f.kind == "kernel"}
    bound, schemas = bindings(unit.source.decode(errors="replace"))
    if bound:
        chosen = [(op, hosts.get(fn), fn) for op, fn in bound.items()]
    else:
        chosen = [(f.name, f, f.name) for f in hosts.values()
                  if not f.template_params and _launches_kernels(f, hosts, kernels)
                  and (re.search(r"\bTensor\b", " ".join(p.type for p in f.params))
                       or re.search(r"\bTensor\b", _return_type(unit, f)))]
    ops = []
    for op_name, fn, cname in chosen:
        if fn is None:
            ops.append(Op(op_name, cname, 0, reason=f"{cname} is not defined in this file"))
            continue
        op = Op(op_name, fn.name, fn.line)
        try:
            if fn.template_params:
                raise NotTranslated("a template host function")
            schema_of(unit, fn, op_name)  # refuse unknown parameter types first
            op.python, h = _python(unit, fn, kernels, hosts)
            op.schema = schemas.get(op_name) or schema_of(unit, fn, op_name, h.written)
            op.kernels = list(dict.fromkeys(h.launched))
            op.fake = not h.data_dependent
        except NotTranslated as e:
            op.reason = str(e)
        ops.append(op)
    # host functions the ops call are emitted too (translated once each)
    return ops


def _python(unit, fn, kernels, hosts, done=None):
    """([Python function sources], _Host): ``fn`` and the host functions it calls."""
    h = _Host(unit, fn, kernels, hosts)
    for n in walk(fn.node):  # what is refused outright, before any statement is looked at
        f = n.child_by_field_name("function") if n.type == "call_expression" else None
        name = re.sub(r"<.*>$", "", " ".join(node_text(unit.source, f).split())) if f is not None else ""
        for rx, reason in _REFUSED_CALLS:
            if rx.match(name):
                raise NotTranslated(reason.format(name=name))
    params = ", ".join(["mod"] + [_py_name(n) + (f"={_default(d)}" if d is not None else "")
                                  for n, _, d in params_of(fn)])
    lines = h.body()
    chunks = []
    done = {fn.name} if done is None else done | {fn.name}
    for callee in sorted(c for c in h.calls if c in hosts and c not in done):
        sub, hs = _python(unit, hosts[callee], kernels, hosts, done)
        chunks += sub
        h.launched += hs.launched
        h.data_dependent |= hs.data_dependent
        done |= {callee}
    chunks.append(f"def {fn.name}({params}):\n" + "\n".join(_indent(lines or ["pass"])) + "\n")
    return chunks, h


def ops_module(unit, namespace: str, source_path: str, include_dirs=(), defines=(), warp="32",
               refused=None) -> tuple:
    """(Python source registering the ops, [Op]) for ``unit``; ``source_path`` is what the
    module hands to ``xvendor.port.load`` (an absolute path); ``refused``: op name -> reason
    for ops to leave out (their kernels did not port)."""
    if not re.fullmatch(r"[A-Za-z_]\w*", namespace or ""):
        raise ValueError(f"--torch-ops {namespace!r}: a namespace is a C++/Python identifier")
    ops = find_ops(unit)
    for op in ops:
        if (refused or {}).get(op.name):
            op.reason = refused[op.name]
    out = [f'"""torch.library ops {namespace}::* over the kernels of {source_path}, '
           'translated by `xvendor port --torch-ops`.', "",
           "Importing this module registers them (CPU tensors run on the OpenCL CPU SYCL device, "
           "XPU tensors on torch's queue)."]
    for op in ops:
        out.append(f"  {namespace}::{op.name}: " + ("registered" if not op.reason else f"NOT registered: {op.reason}"))
    out += ['"""', "", "import math  # noqa: F401", "", "import torch", "",
            "from xvendor.port import torch_ops as _rt", "",
            f"SOURCE = {source_path!r}",
            f"OPTIONS = {{'include_dirs': {list(include_dirs)!r}, 'defines': {list(defines)!r}, 'warp': {warp!r}}}",
            f"NAMESPACE = {namespace!r}",
            f"_lib = torch.library.Library(NAMESPACE, 'FRAGMENT')", ""]
    emitted = set()
    for op in ops:
        if op.reason:
            out.append(f"# {op.name} ({op.function}, line {op.line}): not registered: {op.reason}\n")
            continue
        for chunk in op.python:
            head = chunk.split("(", 1)[0]
            if head not in emitted:
                emitted.add(head)
                out.append(chunk.rstrip() + "\n\n")
        out.append(f"_rt.register(_lib, {op.name!r}, {op.schema!r}, {op.function}, SOURCE, OPTIONS, "
                   f"fake={op.fake})\n\n")
    return "\n".join(out).rstrip() + "\n", ops


# ----------------------------------------------------------------------------- run time
# NOTE [host functions as Python]: what the generated modules call. C++ semantics where
# Python's differ: integer `/` and `%` truncate toward zero; a pointer into a tensor plus an
# offset is a flat view starting there; `x.options()` carries dtype and device into the
# factory calls; the dispatch alias is the C++ type the ported kernel was instantiated for.
_modules: dict = {}

KERNEL_DTYPES = {"torch.float32": "float", "torch.float64": "double", "torch.float16": "c10::Half",
                 "torch.bfloat16": "__nv_bfloat16", "torch.int32": "int32_t",
                 "torch.int64": "int64_t", "torch.int16": "int16_t", "torch.int8": "int8_t",
                 "torch.uint8": "uint8_t", "torch.bool": "bool"}
_SIZEOF = {"float": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2, "at::Half": 2, "c10::Half": 2,
           "at::BFloat16": 2, "c10::BFloat16": 2, "int": 4, "int32_t": 4, "int64_t": 8, "long": 8,
           "int16_t": 2, "short": 2, "int8_t": 1, "uint8_t": 1, "char": 1, "bool": 1,
           "unsigned": 4, "unsigned int": 4, "size_t": 8, "float2": 8, "float4": 16}


def module(source, options):
    """The ported kernels (``xvendor.port.load``), once per process and source."""
    key = (source, repr(options))
    if key not in _modules:
        import xvendor.port
        _modules[key] = xvendor.port.load(source, warp=options.get("warp", "32"),
                                          include_dirs=options.get("include_dirs", ()),
                                          defines=options.get("defines", ()))
    return _modules[key]


class _NoLaunch:
    """The ``mod`` of a fake (meta) run: every kernel launch does nothing."""

    def __getattr__(self, name):
        return self

    def __getitem__(self, key):
        return self

    def __call__(self, *args):
        return None


NO_LAUNCH = _NoLaunch()


def register(lib, name, schema, fn, source, options, fake=True):
    """``lib.define(schema)``; CPU and XPU implementations run ``fn`` with the ported kernels;
    the fake implementation runs it with launches skipped (shapes from the host code)."""
    import torch
    lib.define(schema)

    def impl(*args):
        return fn(module(source, options), *args)

    impl.__name__ = fn.__name__
    for key in ("CPU", "XPU"):
        lib.impl(name, impl, key)
    if fake:
        torch.library.register_fake(f"{lib.ns}::{name}", lambda *args: fn(NO_LAUNCH, *args), lib=lib)


def dispatch(dtype, types, name):
    """AT_DISPATCH_*: the C++ type for ``dtype`` among ``types`` (else ATen's error)."""
    t = KERNEL_DTYPES.get(str(dtype))
    if t not in types:
        aten = {v: k for k, v in _DTYPES.items() if not k[-1].isdigit()}.get(str(dtype), str(dtype))
        raise NotImplementedError(f'"{name}" not implemented for \'{aten}\'')  # ATen's message
    return t


class CheckError(RuntimeError):
    """TORCH_CHECK failed (c10::Error in C++, RuntimeError in Python)."""


def check(cond, *msg):
    if not cond:
        raise CheckError("".join(str(m) for m in msg) or "Expected condition to hold")


def _is_int(v):
    import torch
    return isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool)


def to_int(v):
    """C++ conversion to an integer type: truncation toward zero."""
    import torch
    if isinstance(v, torch.Tensor):
        return v
    if _is_int(v):
        return v
    return int(v)


def div(a, b):
    """C++ ``/``: integers truncate toward zero; otherwise true division."""
    if _is_int(a) and _is_int(b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def rem(a, b):
    if _is_int(a) and _is_int(b):
        return a - div(a, b) * b
    import math
    return math.fmod(a, b) if not hasattr(a, "fmod") else a.fmod(b)


def ceil_div(a, b):
    return div(a + b - 1, b)


def dim3(v):
    if isinstance(v, tuple):
        return v + (1,) * (3 - len(v))
    return (v, 1, 1)


def offset(t, k):
    """``ptr + k`` for a tensor passed as a pointer: the flat view from element k on."""
    flat = t.reshape(-1)
    if k < 0 or k > flat.numel():
        raise IndexError(f"pointer offset {k} outside a tensor of {flat.numel()} elements")
    return flat[k:]


def targ(v):
    """A Python value as a C++ template argument."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def acc_type(t):
    return {"__half": "float", "c10::Half": "float", "__nv_bfloat16": "float", "float": "float", "double": "double"}.get(t, "int64_t")


def sizeof(t):
    if t not in _SIZEOF:
        raise NotImplementedError(f"sizeof({t}) is not known to the translation")
    return _SIZEOF[t]


def limits(t, what):
    import torch
    info = torch.finfo if t in ("float", "double") else torch.iinfo
    dt = {"float": torch.float32, "double": torch.float64, "int": torch.int32, "int64_t": torch.int64,
          "int32_t": torch.int32, "long": torch.int64}[t]
    if what == "infinity":
        return float("inf")
    i = info(dt)
    return i.max if what == "max" else (i.min if what == "lowest" or t not in ("float", "double") else i.tiny)


class _KernelDevice:
    """``at::kCUDA`` in a ported op: the device its kernels run on (CPU through the OpenCL
    device, or XPU)."""

    def __eq__(self, other):
        return str(getattr(other, "type", other)) in ("cpu", "xpu")

    def __ne__(self, other):
        return not self == other

    __hash__ = object.__hash__


KERNEL_DEVICE = _KernelDevice()


def on_kernel_device(t):
    return t.device.type in ("cpu", "xpu")


def device_index(t):
    return -1 if t.device.index is None else t.device.index


class Options:
    """at::TensorOptions: dtype / device (/ requires_grad) for the factory calls."""

    def __init__(self, like=None, **kw):
        import torch
        self.kw = {}
        if isinstance(like, torch.Tensor):
            self.kw = {"dtype": like.dtype, "device": like.device}
        elif isinstance(like, torch.dtype):
            self.kw = {"dtype": like}
        elif isinstance(like, Options):
            self.kw = dict(like.kw)
        self.kw.update(kw)

    def dtype_(self, d):
        return Options(self, dtype=d)

    def device_(self, d):
        import torch
        return Options(self, device=d.device if isinstance(d, torch.Tensor) else d)

    def layout_(self, layout):
        return Options(self, layout=layout)

    def requires_grad_(self, r=True):
        return Options(self, requires_grad=bool(r))

    @property
    def dtype(self):
        return self.kw.get("dtype")

    @property
    def device(self):
        return self.kw.get("device")


def _kwargs(args):
    import torch
    pos, kw = [], {}
    for a in args:
        if isinstance(a, Options):
            kw.update(a.kw)
        elif isinstance(a, torch.dtype):
            kw["dtype"] = a
        else:
            pos.append(a)
    return pos, kw


def aten(name, *args):
    """``at::name(...)`` / ``torch::name(...)``: the same op in Python (``torch.name``, else
    ``torch.ops.aten.name``), TensorOptions arguments as keywords."""
    import torch
    pos, kw = _kwargs(args)
    if name in ("zeros", "ones", "empty", "rand", "randn") and pos and isinstance(pos[0], int):
        pos = [list(pos)] if all(isinstance(p, int) for p in pos) else pos
    fn = getattr(torch, name, None)
    if fn is None:
        fn = getattr(torch.ops.aten, name)
    out = fn(*pos, **kw)
    if POISON and name in ("empty", "empty_like", "empty_strided") and out.device.type != "meta":
        out.fill_(float("nan") if out.is_floating_point() else -1)  # tests: an unwritten element shows
    return out


POISON = False  # fill at::empty outputs with NaN / -1 (tests set it; CUDA leaves them undefined)


def method(obj, name, *args):
    """``x.name(...)`` on a tensor: the Python method, else ``torch.ops.aten.name(x, ...)``."""
    import torch
    pos, kw = _kwargs(args)
    if isinstance(obj, torch.Tensor) and not hasattr(obj, name):
        return getattr(torch.ops.aten, name)(obj, *pos, **kw)
    return getattr(obj, name)(*pos, **kw)


def to(t, *args):
    pos, kw = _kwargs(args)
    return t.to(*pos, **kw)


class TensorArg:
    def __init__(self, tensor, name, pos):
        self.tensor, self.name, self.pos = tensor, name, pos


def checkAllSameGPU(c, args):  # noqa: N802 (ATen's names)
    devices = {str(a.tensor.device) for a in args if a.tensor is not None}
    check(len(devices) <= 1, f"{c}: expected all tensors on one device, got {sorted(devices)}")


def checkAllSameType(c, args):  # noqa: N802
    types = {str(a.tensor.dtype) for a in args if a.tensor is not None}
    check(len(types) <= 1, f"{c}: expected all tensors of one dtype, got {sorted(types)}")


def checkSameGPU(c, a, b):  # noqa: N802
    checkAllSameGPU(c, [a, b])


def checkSameType(c, a, b):  # noqa: N802
    checkAllSameType(c, [a, b])


def checkContiguous(c, a):  # noqa: N802
    check(a.tensor.is_contiguous(), f"{c}: expected {a.name} to be contiguous")


def checkAllContiguous(c, args):  # noqa: N802
    for a in args:
        checkContiguous(c, a)


def checkDim(c, a, dim):  # noqa: N802
    check(a.tensor.dim() == dim, f"{c}: expected {a.name} to have {dim} dimensions, got {a.tensor.dim()}")


def checkScalarType(c, a, dtype):  # noqa: N802
    check(a.tensor.dtype == dtype, f"{c}: expected {a.name} of dtype {dtype}, got {a.tensor.dtype}")


def type_of(obj):
    """``device.type()`` (a device's kind) or ``tensor.type()`` (its device's kind here)."""
    import torch
    return obj.type if isinstance(obj, torch.device) else obj.device.type


def message(*parts):
    """``std::cout << ...`` / ``std::cerr << ...`` in a host function: to stderr."""
    import sys
    sys.stderr.write("".join(parts))


class StringStream:
    """``std::stringstream``: ``ss << a << b`` appends, ``ss.str()`` reads."""

    def __init__(self):
        self.parts = []

    def add(self, *parts):
        self.parts += parts

    def str(self):
        return "".join(self.parts)
