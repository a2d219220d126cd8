"""``load(path)``: a translated, compiled CUDA file whose kernels launch like CUDA's.

    mod = xvendor.port.load("kernels.cu", warp=32)
    mod.saxpy[grid, block](a, x, y, n)            # grid/block: int or (x, y, z), CUDA order
    mod.softmax[grid, block, shared_bytes](x, y, n)
    mod["scale<float, 4>"][grid, block](...)      # an instantiation (compiled on first use)

Arguments: torch tensors for pointer parameters (CPU tensors are copied to the OpenCL CPU
SYCL device and back — only those behind non-const pointers; XPU tensors are passed in
place on torch's queue: l2, not verified here), Python numbers for scalars, typed by the
kernel's parameters (ranges checked). Modules are cached by the translated source's hash,
the warp setting and the instantiations, so a second ``load`` of the same file is free.
Dynamic shared memory (``shared_bytes``) is real work-group local memory: a trailing
``work_group_memory<char[]>`` kernel parameter sized at launch (NOTE [dynamic shared memory]).
"""

from __future__ import annotations

import hashlib
import struct
import threading

from xvendor.ops._common import ArgumentError

from . import build, constructs, parse

__all__ = ["load", "Module", "Kernel", "PortError", "nd_range"]

PortError = ArgumentError  # bad launches and arguments name the argument and the rule

# NOTE [dynamic shared memory]: a kernel that uses `extern __shared__` gets a trailing
# work_group_memory<char[]> parameter (translate.py); the launch passes it as the runtime's
# LOCAL argument kind, whose value is the byte count, and the SYCL runtime allocates that
# much local memory per work-group, as CUDA's third launch parameter does. A request of 0
# bytes passes 1 (SYCL refuses an empty local allocation). The base is at least 16-byte
# aligned on the OpenCL CPU device (tests/port/test_dynamic_shared.py). Requests over the
# device's local memory are refused before launch; the kernel's static __shared__ counts
# against the same memory, and a launch that needs more than the device has fails there.
# NOTE [by-value arguments]: a kernel parameter of a struct or vector type (trivially
# copyable, as CUDA requires) reaches the wrapper as a pointer to a device copy of its bytes,
# and the wrapper passes `*p` to the kernel body: the launch runtime passes pointers and
# 32/64-bit scalars only. The caller gives the bytes with the C layout (ctypes.Structure);
# their size is not checked against the C++ type. Pointers inside the struct must be
# device pointers (XPU tensors), as in CUDA.
_modules: dict = {}
_lock = threading.Lock()


def load(path, warp=32, instantiate=(), kernels=None, include_dirs=(), defines=()) -> "Module":
    """Translate and compile ``path`` (cached by source hash); see the module docstring.
    ``include_dirs``: where else ``#include "x.h"`` is looked for; ``defines``: NAME[=V]."""
    warp = str(warp)
    if warp not in ("32", "native"):
        raise ArgumentError("port.load", "warp", f"must be 32 or 'native', got {warp!r}")
    unit = parse.parse_file(path, include_dirs=include_dirs)
    inst = tuple(instantiate)
    key = (hashlib.sha256(unit.source).hexdigest(), warp, inst, tuple(kernels or ()),
           tuple(defines))
    with _lock:
        mod = _modules.get(key)
        if mod is None:
            res = build.compile_translation(path, warp=warp, instantiate=list(inst), kernels=kernels,
                                            include_dirs=include_dirs, defines=defines)
            mod = _modules[key] = Module(path, res, warp, inst, kernels)
            mod._opts = {"include_dirs": tuple(include_dirs), "defines": tuple(defines)}
        return mod


class Module:
    def __init__(self, path, result, warp, instantiate, kernels):
        self.path, self.result, self.warp = path, result, warp
        self._instantiate, self._select = instantiate, kernels
        self.translation = result.translation
        self.reports = {k.name: k for k in self.translation.kernels}
        self._kernels = {}
        for rep in self.translation.kernels:
            for inst in rep.instantiations if rep.status == "ok" else []:
                k = Kernel(self, rep, inst)
                self._kernels[inst.sycl_name] = k
                if inst.args:
                    self._kernels[f"{rep.name}<{', '.join(inst.args)}>"] = k

    def report(self) -> dict:
        return self.translation.as_json()

    @property
    def symbols(self) -> "Symbols":
        """The file's ``__constant__``/``__device__`` variables: ``mod.symbols["c"] = t``
        writes them (``cudaMemcpyToSymbol``), ``mod.symbols["c"]`` reads them back as a
        uint8 tensor (``.view(torch.float32)`` etc.)."""
        if "_symbols" not in self.__dict__:
            self.__dict__["_symbols"] = Symbols(self)
        return self.__dict__["_symbols"]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __getitem__(self, spec: str) -> "Kernel":
        norm = spec.replace(" ", "")
        for key, k in self._kernels.items():
            if key.replace(" ", "") == norm:
                return k
        for key, k in self._kernels.items():  # the same kernel spelled otherwise: k<3, (true)>
            if "<" in key and "<" in norm and _wrapper_name(key) == _wrapper_name(norm):
                return k
        name = norm.split("<")[0]
        rep = self.reports.get(name)
        if rep is None:
            raise KeyError(f"{self.path} has no kernel {name!r}; kernels: {sorted(self.reports)}")
        if rep.status != "ok":
            raise KeyError(f"kernel {name!r} is {rep.status}: {rep.reason}")
        if "<" not in norm and rep.block_bound:
            return _BlockBound(self, name)
        if "<" not in norm:
            raise KeyError(f"kernel {name!r} is a template: use mod['{name}<...>'] with its "
                           f"arguments; compiled: {[', '.join(i.args) for i in rep.instantiations]}")
        mod = load(self.path, self.warp, self._instantiate + (spec,), self._select,
                   **getattr(self, "_opts", {}))
        return mod[spec]

    def __dir__(self):
        return sorted(set(super().__dir__()) | {k for k in self._kernels if "<" not in k})


class Symbols:
    """NOTE [module symbols]: each ``__constant__``/``__device__`` variable the host may
    write is a buffer the module owns (zero-filled, as CUDA's), passed to every kernel that
    uses it as a hidden trailing pointer parameter; the wrapper publishes the address in a
    work-group-static slot that the symbol's name reads through. Values persist between
    launches (copied back after each CPU-device launch). Its size comes from a generated
    ``sizeof`` kernel, so struct-typed symbols work too."""

    def __init__(self, module):
        from . import symbols as sym_mod
        self.module = module
        self.table = sym_mod.symbols(module.translation.unit)
        self.data = {}

    def __contains__(self, name):
        return name in self.table

    def __iter__(self):
        return iter(self.table)

    def buffer(self, name):
        """The host copy of ``name``'s bytes (a uint8 tensor), created zero-filled."""
        import torch

        from xvendor.xpu import runtime
        if name not in self.table:
            raise KeyError(f"{self.module.path} has no __constant__/__device__ symbol {name!r}; "
                           f"symbols: {sorted(self.table)}")
        if name not in self.data:
            prog = self.module.result.program
            if prog is None:
                raise KeyError(f"symbol {name!r}: nothing of {self.module.path} compiled")
            q = runtime.cpu_queue()
            out, buf = torch.zeros(1, dtype=torch.int64), runtime.DeviceBuffer(q, 8)
            runtime.launch(q, prog.kernel(f"__xv_sym_size__{name}"), (1, 1, 1), (1, 1, 1),
                           [(runtime.PTR, buf.ptr)], wait=True)
            buf.read(out.data_ptr(), 8)
            self.data[name] = torch.zeros(int(out), dtype=torch.uint8)
        return self.data[name]

    def __getitem__(self, name):
        return self.buffer(name).clone()

    def _span(self, op, name, count, offset):
        buf = self.buffer(name)
        for what, v in (("count", count), ("offset", offset)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ArgumentError(op, what, f"must be a non-negative int (bytes), got {v!r}")
        if offset + count > buf.numel():
            raise ArgumentError(op, "count", f"{offset} + {count} bytes exceed the symbol's "
                                f"{buf.numel()} bytes ({self.table[name][1]})")
        return buf[offset:offset + count]

    @staticmethod
    def _raw(op, what, t, count):
        import torch
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(op, what, f"must be a torch tensor, got {type(t).__name__}")
        if not t.is_contiguous():
            raise ArgumentError(op, what, "must be contiguous")
        raw = t.view(-1).view(torch.uint8) if t.numel() else t.new_empty(0, dtype=torch.uint8)
        if raw.numel() < count:
            raise ArgumentError(op, what, f"has {raw.numel()} bytes, fewer than the {count} copied")
        return raw

    def copy_to(self, name, src, count, offset=0):
        """``cudaMemcpyToSymbol(name, src, count, offset)``: ``count`` bytes of tensor ``src``."""
        op = f"port.cudaMemcpyToSymbol({name})"
        dst = self._span(op, name, count, offset)
        dst.copy_(self._raw(op, "src", src.detach().cpu(), count)[:count])

    def copy_from(self, dst, name, count, offset=0):
        """``cudaMemcpyFromSymbol(dst, name, count, offset)``: into tensor ``dst``."""
        op = f"port.cudaMemcpyFromSymbol({name})"
        src = self._span(op, name, count, offset)
        self._raw(op, "dst", dst, count)[:count].copy_(src)

    def __setitem__(self, name, value):
        import torch
        buf = self.buffer(name)
        if isinstance(value, torch.Tensor):
            raw = value.detach().cpu().contiguous().view(-1).view(torch.uint8)
        else:
            raw = torch.frombuffer(bytearray(memoryview(value).cast("B")), dtype=torch.uint8)
        if raw.numel() != buf.numel():
            raise ArgumentError(f"port.symbols[{name!r}]", "value",
                                f"must be {buf.numel()} bytes ({self.table[name][1]}), got {raw.numel()}")
        buf.copy_(raw)


class Kernel:
    """One compiled kernel (or instantiation); ``kernel[grid, block(, shared_bytes)]``."""

    def __init__(self, module, report, inst):
        self.module, self.report, self.inst = module, report, inst
        self.name = inst.sycl_name

    def __getitem__(self, cfg):
        if not isinstance(cfg, tuple) or len(cfg) not in (2, 3):
            raise ArgumentError(f"port.{self.name}", "launch configuration",
                                "must be [grid, block] or [grid, block, shared_bytes]")
        grid = _dims(self.name, "grid", cfg[0])
        block = _dims(self.name, "block", cfg[1])
        smem = cfg[2] if len(cfg) == 3 else 0
        if not isinstance(smem, int) or isinstance(smem, bool) or smem < 0:
            raise ArgumentError(f"port.{self.name}", "shared_bytes",
                                f"must be a non-negative int, got {smem!r}")
        return lambda *args: self.launch(grid, block, smem, args)

    def launch(self, grid, block, smem, args):
        import torch

        from xvendor.xpu import runtime
        op = f"port.{self.name}"
        params = self.inst.params
        if len(args) != len(params):
            raise ArgumentError(op, "arguments", f"take {len(params)} values "
                                f"({', '.join(p[0] for p in params)}), got {len(args)}")
        devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
        if len(devices) > 1:
            raise ArgumentError(op, "tensors", f"must all be on one device, got {sorted(devices)}")
        on_cpu = devices <= {"cpu"}
        queue = runtime.cpu_queue() if on_cpu else runtime.xpu_queue(
            next(a.device for a in args if isinstance(a, torch.Tensor)))
        prog = self.module.result.program
        kern = prog.kernel(self.name)
        threads = block[0] * block[1] * block[2]
        if threads > kern.max_work_group:
            raise ArgumentError(op, "block", f"{block} has {threads} threads, more than the "
                                f"{kern.max_work_group} this kernel can run per work-group here")
        local_mem = _local_mem(queue)
        if smem > local_mem:
            raise ArgumentError(op, "shared_bytes", f"{smem} exceeds the device's "
                                f"{local_mem} bytes of work-group local memory")
        kargs, keep, back = [], [], []
        for (name, kind, base, writable), a in zip(params, args):
            kargs.append(_argument(op, name, kind, base, a, queue, on_cpu, keep, back, writable))
        for sym in getattr(self.inst, "symbols", ()):  # NOTE [module symbols]
            t = self.module.symbols.buffer(sym)
            kargs.append(_argument(op, sym, "ptr", None, t if on_cpu else t.to(next(
                a.device for a in args if isinstance(a, torch.Tensor))), queue, on_cpu, keep, back, True))
        if self.report.dynamic_shared:
            kargs.append((runtime.LOCAL, max(smem, 1)))
        glob, local = nd_range(grid, block)
        try:
            runtime.launch(queue, kern, glob, local, kargs, wait=on_cpu)
        except runtime.LaunchError as e:
            if "OUT_OF_RESOURCES" in str(e) and self.report.dynamic_shared:
                raise ArgumentError(op, "shared_bytes", f"{smem} bytes plus the kernel's static "
                                    f"__shared__ do not fit the device's {local_mem} bytes of "
                                    f"work-group local memory ({e})") from e
            raise
        for t, buf in back:
            buf.read(t.data_ptr(), t.numel() * t.element_size())


class _BlockBound:
    """``k<bs><<<grid, bs>>>`` in CUDA: ``mod.k[grid, bs]`` launches ``k<bs>``, compiling it
    on the first launch with that block size."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __getitem__(self, cfg):
        if not isinstance(cfg, tuple) or len(cfg) not in (2, 3):
            raise ArgumentError(f"port.{self.name}", "launch configuration",
                                "must be [grid, block] or [grid, block, shared_bytes]")
        block = _dims(self.name, "block", cfg[1])
        return self.module[f"{self.name}<{block[0] * block[1] * block[2]}>"][cfg]


def nd_range(grid, block) -> tuple:
    """CUDA (grid, block), each (x, y, z) -> SYCL (global, local): dimensions reversed
    (CUDA's x, the fastest, is SYCL's last) and global = grid x block."""
    grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
    return tuple(g * b for g, b in zip(grid, block))[::-1], tuple(block)[::-1]


def _dims(name, what, v) -> tuple:
    vals = (v,) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else None
    if (not vals or len(vals) > 3 or
            any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in vals)):
        raise ArgumentError(f"port.{name}", what, f"must be a positive int or a tuple of 1-3 "
                            f"positive ints (x, y, z), got {v!r}")
    return vals + (1,) * (3 - len(vals))


def _local_mem(queue) -> int:
    dev = getattr(queue.owner, "sycl_device", None)
    return int(getattr(dev, "local_mem_size", 0) or 64 << 10)


_RANGES = {"i32": (-2**31, 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-2**63, 2**63 - 1),
           "u64": (0, 2**64 - 1), "bool": (0, 1)}


def _argument(op, name, kind, base, a, queue, on_cpu, keep, back, writable):
    import torch

    from xvendor.xpu import runtime
    if kind == "struct":  # NOTE [by-value arguments]
        try:
            raw = bytes(memoryview(a).cast("B"))
        except TypeError:
            raise ArgumentError(op, name, f"is a {base} passed by value: pass its bytes (a ctypes "
                                f"Structure, bytes, or a buffer), got {type(a).__name__}") from None
        buf = runtime.DeviceBuffer(queue, max(len(raw), 1))
        if raw:
            holder = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
            buf.write(holder.data_ptr(), len(raw))
            keep.append(holder)
        keep.append(buf)
        return runtime.PTR, buf.ptr
    if kind == "accessor":  # NOTE [accessor arguments]
        return _accessor(op, name, base, a, queue, on_cpu, keep, back, writable)
    if kind == "ptr":
        if a is None:
            return runtime.PTR, 0
        if not isinstance(a, torch.Tensor):
            raise ArgumentError(op, name, f"is a pointer ({base} *): pass a torch tensor, got "
                                f"{type(a).__name__}")
        want = constructs.POINTEES.get(base)
        if want is not None and str(a.dtype) != f"torch.{want}":
            raise ArgumentError(op, name, f"points to {base}: needs a torch.{want} tensor, got {a.dtype}")
        if not a.is_contiguous():
            raise ArgumentError(op, name, "must be contiguous (the kernel sees raw memory)")
        if not on_cpu:
            keep.append(a)
            return runtime.PTR, a.data_ptr()
        nbytes = a.numel() * a.element_size()
        buf = runtime.DeviceBuffer(queue, max(nbytes, 1))
        if nbytes:
            buf.write(a.data_ptr(), nbytes)
        keep.append(buf)
        if writable and nbytes:
            back.append((a, buf))
        return runtime.PTR, buf.ptr
    if isinstance(a, torch.Tensor):
        if a.numel() != 1:
            raise ArgumentError(op, name, f"is a scalar ({base}): got a tensor of shape {tuple(a.shape)}")
        a = a.item()
    if kind in ("f32", "f64"):
        if not isinstance(a, (int, float)) or isinstance(a, bool):
            raise ArgumentError(op, name, f"is a {base}: pass a Python number, got {type(a).__name__}")
        if kind == "f32":
            return runtime.F32, float(a)
        return runtime.I64, struct.unpack("<q", struct.pack("<d", float(a)))[0]
    if not isinstance(a, int):
        raise ArgumentError(op, name, f"is an integer ({base}): pass a Python int, got {type(a).__name__}")
    lo, hi = _RANGES[kind]
    if not lo <= a <= hi:
        raise ArgumentError(op, name, f"= {a} is outside {base}'s range [{lo}, {hi}]")
    if kind in ("i32", "bool"):
        return runtime.I32, int(a)
    if kind == "u32":
        return runtime.I32, a - 2**32 if a >= 2**31 else a
    return runtime.I64, a - 2**64 if a >= 2**63 else a


# NOTE [accessor arguments]: a kernel parameter ``at::PackedTensorAccessor32/64<T, N>`` (or
# GenericPackedTensorAccessor) takes a torch tensor of N dimensions and dtype T. The launch
# builds the accessor's bytes as ATen lays them out (xvendor_torch_compat.h): the data's
# device pointer, N sizes, N strides (in elements, int32 or int64), and passes them like any
# by-value struct. Strides are kept, so non-contiguous tensors work as in CUDA; on the CPU
# device the tensor's whole storage span (offset 0 to the last element it reaches) is
# copied in, and back after the launch unless the accessor is const.
def _accessor(op, name, meta, a, queue, on_cpu, keep, back, writable):
    import torch

    from xvendor.xpu import runtime
    elem, ndim, bits = meta
    if not isinstance(a, torch.Tensor):
        raise ArgumentError(op, name, f"is a PackedTensorAccessor{bits}<{elem}, {ndim}>: pass a "
                            f"torch tensor, got {type(a).__name__}")
    if a.dim() != ndim:
        raise ArgumentError(op, name, f"is an accessor of {ndim} dimensions: got a tensor of shape "
                            f"{tuple(a.shape)}")
    want = constructs.POINTEES.get(elem)
    if want is not None and str(a.dtype) != f"torch.{want}":
        raise ArgumentError(op, name, f"is an accessor of {elem}: needs a torch.{want} tensor, "
                            f"got {a.dtype}")
    if any(s < 0 for s in a.stride()):
        raise ArgumentError(op, name, f"has a negative stride {a.stride()} (not supported)")
    lo, hi = _RANGES["i32" if bits == 32 else "i64"]
    if any(not lo <= v <= hi for v in (*a.shape, *a.stride())):
        raise ArgumentError(op, name, f"sizes/strides {tuple(a.shape)}/{a.stride()} do not fit "
                            f"the accessor's {bits}-bit index type")
    span = 0 if a.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(a.shape, a.stride()))
    nbytes = span * a.element_size()
    if on_cpu:
        data = runtime.DeviceBuffer(queue, max(nbytes, 1))
        if nbytes:
            data.write(a.data_ptr(), nbytes)
        keep.append(data)
        if writable and nbytes:
            back.append((_Span(a, nbytes), data))
        ptr = data.ptr
    else:
        keep.append(a)
        ptr = a.data_ptr()
    fmt = "i" if bits == 32 else "q"
    raw = struct.pack(f"<Q{ndim}{fmt}{ndim}{fmt}", ptr, *a.shape, *a.stride())
    raw += b"\0" * (-len(raw) % 8)
    buf = runtime.DeviceBuffer(queue, len(raw))
    holder = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    buf.write(holder.data_ptr(), len(raw))
    keep += [holder, buf]
    return runtime.PTR, buf.ptr


class _Span:
    """What the copy-back after a launch needs of a tensor: where its span starts and how
    many bytes it has (``back`` reads ``numel() * element_size()`` bytes to ``data_ptr()``)."""

    def __init__(self, t, nbytes):
        self.t, self.nbytes = t, nbytes

    def data_ptr(self):
        return self.t.data_ptr()

    def numel(self):
        return self.nbytes

    def element_size(self):
        return 1


def _wrapper_name(spec: str) -> str:
    """The SYCL wrapper name of ``"k<3, (true)>"`` (``k<3, true>``'s: one compiled kernel)."""
    from .parse import split_template_args
    from .translate import sycl_name
    name, _, rest = spec.partition("<")
    return sycl_name(name.strip(), split_template_args(rest.rsplit(">", 1)[0]))
