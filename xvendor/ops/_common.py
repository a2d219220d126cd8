"""What every op shares: the op description, the argument error, dtype rules, and the
eager fast path.

NOTE [one op, described once]: an op module defines its ``torch.library`` op (schema, fake,
autograd), its argument checks, and one ``OpSpec`` naming everything the rest of the
package needs to know about it: the checks (``explain``), the shape class (tuning), the
fp64 oracle and the self-check cases (``xvendor check``). ``define(spec)`` registers it
with the registry and in ``SPECS``. Adding an op is one new module here, a ``reference``
kernel in ``xvendor.reference`` and the backend kernels that accelerate it.

NOTE [eager fast path]: going through torch's dispatcher costs microseconds per call (a
plain ``custom_op`` wrapper adds ~7 µs to a 64x64 fp32 ``torch.mm`` on a 2-core CPU:
``python bench/dispatch_overhead.py``, bench/RESULTS.md). The public functions
(``xvendor.gemm`` ...) therefore call their op's ``registry.dispatcher`` closure directly
when nothing needs torch's dispatcher: plain tensors (or Parameters), none requiring grad,
not being traced by torch.compile, no torch-function or dispatch mode, no functorch
transform, no profiler (``fast_path_open``). Otherwise they call
``torch.ops.xvendor.<op>``, whose implementation runs the same checks and the same
closure, so both paths compute the same thing (tested). ``set_fast_path(False)`` sends
every call through torch's dispatcher (debugging, profiling).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
import torch.compiler

from .. import registry, shapes

__all__ = ["ArgumentError", "Case", "OpSpec", "SPECS", "define", "eager_autograd",
           "fast_path_open", "set_fast_path", "check_float", "check_same_device",
           "traced_torch", "traced"]


class ArgumentError(ValueError):
    """Bad input to an xvendor op; the message names the argument and the rule."""

    def __init__(self, op: str, arg: str, rule: str):
        self.op, self.arg = op, arg
        super().__init__(f"xvendor.{op}: {arg} {rule}")


@dataclass(frozen=True)
class Case:
    """One self-check call: a name saying which code path it covers, the args, kwargs."""

    name: str
    args: tuple
    kwargs: dict


@dataclass(frozen=True)
class OpSpec:
    """Everything outside its own module needs to know about an op (NOTE [one op...]).

    ``check(*args, **kwargs)`` raises ``ArgumentError`` (metadata rules; the op's own
    signature without ``backend``); ``shape_class(*args)`` keys tuned winners (``None``:
    never tuned); ``oracle(*args, **kwargs)`` is the fp64 answer; ``error(out, expected,
    args, kwargs)`` the normwise error of an output against it, when the op needs its own
    comparison (it then owns all of it: dtypes and shapes too; inf for a mismatch); ``cases(rand, device)`` the
    self-check calls, where ``rand(*shape)`` gives a fresh random tensor of the dtype
    under test.
    """

    name: str
    function: Callable
    check: Callable
    oracle: Callable
    cases: Callable
    shape_class: Callable | None = None
    error: Callable | None = None
    # The dtype a call is dispatched (decided) on, from its positional arguments (see
    # ``positional``); default: the first argument's. The scaled GEMMs decide on their
    # output dtype (their operands are fp8/fp4, which no backend record lists).
    dispatch_dtype: Callable | None = None


    def decision_dtype(self, args: tuple, kwargs: dict):
        """The dtype ``args``/``kwargs`` would be dispatched on."""
        if self.dispatch_dtype is None:
            return args[0].dtype
        return self.dispatch_dtype(self.positional(args, kwargs))

    def positional(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments as kernels receive them: every parameter but ``backend``,
        in order, defaults filled in."""
        bound = inspect.signature(self.function).bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(v for k, v in bound.arguments.items() if k != "backend")


SPECS: dict[str, OpSpec] = {}


def define(spec: OpSpec) -> OpSpec:
    SPECS[spec.name] = spec
    registry.define_op(spec.name, spec.shape_class)
    return spec


# NOTE [the CPU device object]: ``t.device`` builds a new ``torch.device`` on every read
# (~0.5 us on the project's 2-core CPU; ``t.is_cpu`` ~0.1 us). The eager fast paths key
# their decision on the device, so for a CPU tensor they pass this one, equal to (and
# hashing as) the tensor's own: ``CPU if t.is_cpu else t.device``.
CPU = torch.device("cpu")

_compiling = torch.compiler.is_compiling
_fn_mode = torch._C._is_torch_function_mode_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch = torch._C._are_functorch_transforms_active
_profiling = torch.autograd._profiler_enabled
_fast_path = [True]


def set_fast_path(enabled: bool) -> None:
    """Route eager calls straight to the kernel (default) or always through the dispatcher."""
    _fast_path[0] = bool(enabled)


def traced_torch(op: str, device, dtype, args: tuple, backend):
    """Under ``torch.compile``, torch's own kernel for this call when its decision is the
    ``torch`` backend (the graph then holds torch's op, which Inductor lowers, fuses and
    autotunes), else ``None`` (the xvendor op stays in the graph). Eager: ``None``."""
    if not _compiling():
        return None
    return registry.traced_floor(op, device, dtype, args, backend)


def traced(op: str) -> None:
    """Called from each op's fake implementation: while a graph is being traced (Dynamo
    runs fake implementations, never traces them), register the op with Inductor's
    max-autotune choices once (NOTE [max-autotune choices] in ``xvendor.dispatch.autotune``)."""
    if op not in _autotune_registered and torch._guards.TracingContext.try_get() is not None:
        _autotune_registered.add(op)
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        from ..dispatch import autotune
        with unset_fake_temporarily():  # Inductor's modules import outside the fake mode
            autotune.ensure_registered(op)


_autotune_registered: set = set()


def fast_path_open() -> bool:
    """The process-wide half of the fast-path guard: no mode, transform, trace, profiler.

    The per-tensor half (plain type, no ``requires_grad``) is inlined in each op's public
    function: it is cheaper there than a call. A tensor that requires grad takes the
    dispatcher even under ``no_grad`` (a correct, slower path), which saves a call per op.
    """
    return _fast_path[0] and not (_compiling() or _fn_mode() or _dispatch_modes()
                                  or _functorch() or _profiling())


def eager_autograd(name: str, forward: Callable, setup: Callable, backward: Callable) -> Callable:
    """The op's own autograd (the ``setup``/``backward`` its custom op registers) as a plain
    ``torch.autograd.Function``, for eager training calls: its ``apply``.

    NOTE [eager training path]: a call through the custom op pays torch.library's Python
    autograd wrapper and dispatch (~0.4 ms per forward + backward of a small grouped_mm
    here, 3.4x torch's own op), which an MoE layer pays on every expert GEMM of every step.
    Where the fast-path guard holds (plain tensors; no mode, transform, trace or profiler:
    ``fast_path_open``) a call that needs gradients runs this Function instead: the same
    forward (the dispatcher), the same saved tensors and the same backward, so the results
    are the custom op's bit for bit. Everywhere else (torch.compile, vmap, dispatch modes,
    opcheck) the custom op stays, with its registered autograd. Where the decision is the
    floor, the op module does not even come here: NOTE [eager training on the floor].
    """
    def forward_and_setup(ctx, *inputs):
        # (not a ``setup_context`` staticmethod: with one, ``Function.apply`` binds the
        # arguments through ``inspect.signature`` on every call, ~20 us)
        output = forward(*inputs)
        setup(ctx, inputs, output)
        return output

    cls = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward_and_setup),
        "backward": staticmethod(backward),
    })
    return cls.apply


INPUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
FAST_DTYPES = frozenset(INPUT_DTYPES)
_DTYPE_NAMES = "float32, float16, bfloat16 or float64"


def check_tensor(op: str, name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise ArgumentError(op, name, f"must be a torch.Tensor, got {type(t).__name__}")


def check_float(op: str, name: str, t: torch.Tensor) -> None:
    if t.dtype not in INPUT_DTYPES:
        raise ArgumentError(op, name, f"must be {_DTYPE_NAMES}, got {t.dtype}")


def check_out_dtype(op: str, in_dtype: torch.dtype, out_dtype) -> None:
    if out_dtype is None:
        return
    if not isinstance(out_dtype, torch.dtype) or out_dtype not in INPUT_DTYPES:
        raise ArgumentError(op, "out_dtype", f"must be None or {_DTYPE_NAMES}, got {out_dtype}")
    if (out_dtype == torch.float64) != (in_dtype == torch.float64):
        raise ArgumentError(op, "out_dtype", f"may be float64 only for float64 inputs "
                                             f"(inputs are {in_dtype}, out_dtype {out_dtype})")


def check_same_device(op: str, ref_name: str, ref: torch.Tensor, **others) -> None:
    cpu = ref.is_cpu  # (two CPU tensors: ``is_cpu`` is a tenth of the cost of ``device``)
    for name, t in others.items():
        if t is not None and not (cpu and t.is_cpu) and t.device != ref.device:
            raise ArgumentError(op, name, f"must be on the same device as {ref_name} "
                                          f"({ref.device}), got {t.device}")


def check_int(op: str, name: str, value, rule: str) -> None:
    """``value`` must be a Python int and not a bool (torch refuses bools for sizes/dims)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(op, name, f"must be an int {rule}, got {value!r}")


def check_bias(op: str, bias, shape: tuple, in_dtype, out_dtype, ref: torch.Tensor,
               shape_rule: str) -> None:
    if bias is None:
        return
    check_tensor(op, "bias", bias)
    if tuple(bias.shape) != tuple(shape):
        raise ArgumentError(op, "bias", f"must have shape {shape_rule} = {tuple(shape)}, "
                                        f"got {tuple(bias.shape)}")
    if bias.dtype not in (in_dtype, out_dtype or in_dtype):
        raise ArgumentError(op, "bias", f"dtype must be the input dtype ({in_dtype}) or "
                                        f"out_dtype, got {bias.dtype}")
    check_same_device(op, "a", ref, bias=bias)


def check_group_ends(op: str, offs, extent: int, where: str, start_multiple: int = 0,
                     why_multiple: str = "", *, traced: bool = False) -> None:
    """Data rules on ``offs``, int32 cumulative group ends: non-negative, non-decreasing, the
    last at most ``extent`` (the ``where`` dimension); with ``start_multiple``, every group
    start (0 and ``offs[:-1]``) a multiple of it.

    On the CPU they are checked here with a precise message. On an accelerator they become
    one ``torch._assert_async`` (a device-side assert, no host sync in the hot loop).

    NOTE [offs in a traced graph]: with ``traced`` (an op's public function under
    torch.compile, about to trace into torch's own op) the rules become that same device
    assert on every device, CPU included, and on every call: a host read of offs would break
    the graph, and the once-per-offs memo would hold the trace's tensors. The compiled graph
    then refuses bad offs at run time as eager does, with ``torch._assert_async``'s
    RuntimeError (the rule in its message) where eager on the CPU raises ArgumentError.
    """
    if offs is None:
        return
    if traced:
        if offs.numel():
            check_group_ends_on_device(op, offs, extent, where, start_multiple)
        return
    if not offs.is_cpu:  # (``is_cpu``: a tenth of the cost of ``device.type``)
        # NOTE [offs checked once]: an MoE layer passes the same offs to two or three
        # grouped GEMMs (gate, up, down); the assert of the first covers the others, unless
        # offs was written in place since (its version) or the rules differ
        seen, rules = _CHECKED[0], (extent, start_multiple)
        if offs.numel() and (seen is None or seen[0] is not offs or seen[1] != offs._version
                             or seen[2] != rules):
            check_group_ends_on_device(op, offs, extent, where, start_multiple)
            _CHECKED[0] = (offs, offs._version, rules)
        return
    ends = offs.tolist()
    if not ends:
        return
    shapes.note_last_end(offs, ends[-1])
    # The common case, all rules met, in C-level builtins (a Python loop over 128 experts
    # costs ~5 us per call; ``all(map(le, ...))`` 4 us, the sort, which finds one run in
    # sorted input, 1.3 us); the loop below only finds the first broken rule to name it.
    if ends[0] >= 0 and ends[-1] <= extent and ends == sorted(ends) \
            and not (start_multiple and any(s % start_multiple for s in ends[:-1])):
        return
    if ends[0] < 0:
        raise ArgumentError(op, "offs", f"must be non-negative, got offs[0] = {ends[0]}")
    for i in range(1, len(ends)):
        if ends[i] < ends[i - 1]:
            raise ArgumentError(op, "offs", f"must be non-decreasing (cumulative group ends), "
                                            f"got offs[{i}] = {ends[i]} < offs[{i - 1}] = "
                                            f"{ends[i - 1]}")
    if ends[-1] > extent:
        raise ArgumentError(op, "offs", f"last entry must be at most the {where} ({extent}), "
                                        f"got offs[-1] = {ends[-1]}")
    for i, start in enumerate(ends[:-1] if start_multiple else ()):
        if start % start_multiple:
            raise ArgumentError(op, "offs", f"group starts must be multiples of "
                                            f"{start_multiple}{why_multiple}, got offs[{i}] = "
                                            f"{start}")


def check_group_ends_on_device(op: str, offs, extent: int, where: str,
                               start_multiple: int = 0) -> None:
    """``check_group_ends``'s rules as one device-side assert: nothing waits for the
    device (an accelerator reports a violation at its next synchronization).

    The three rules are one: ``[0, *offs, extent]`` is non-decreasing. So the check is a
    concatenation, one comparison of neighbours, a reduction and the assert: four kernel
    launches on the hot path of every accelerator grouped GEMM, where the rules one by one
    took seven (torch's own op is one or two)."""
    bounds = _bounds(extent, offs)
    ends = torch.cat((bounds[:1], offs, bounds[1:]))
    ok = (ends[1:] >= ends[:-1]).all()
    rule = f"non-negative, non-decreasing and end at most at {extent} ({where})"
    if start_multiple:
        ok = ok & (offs[:-1] % start_multiple == 0).all()
        rule += f", with group starts multiples of {start_multiple}"
    torch._assert_async(ok, f"xvendor.{op}: offs must be {rule}")


_BOUNDS: dict = {}
_CHECKED: list = [None]  # (offs, its version, (extent, start_multiple)) last asserted


def _bounds(extent: int, like: torch.Tensor) -> torch.Tensor:
    """``[0, extent]`` as ``like``'s dtype on its device, kept per (extent, device, dtype)
    in eager mode. Written by two fills, never copied from the host (a copy from pageable
    memory waits for the stream, and a CUDA graph capture refuses it)."""
    if _compiling():
        return torch.cat((like.new_zeros(1), like.new_full((1,), extent)))
    key = (extent, like.device, like.dtype)
    found = _BOUNDS.get(key)
    if found is None:
        if len(_BOUNDS) > 64:  # a run has few sizes; a sweep must not grow this forever
            _BOUNDS.clear()
        found = like.new_full((2,), extent)
        found[:1].zero_()
        _BOUNDS[key] = found
    return found


def needs_grad(ctx, n: int) -> tuple:
    """``ctx.needs_input_grad`` padded to ``n``: traced calls may pass fewer than all args."""
    flags = tuple(ctx.needs_input_grad)
    return (flags + (False,) * n)[:n]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype for ``dtype``: fp32 for half types, else itself."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
