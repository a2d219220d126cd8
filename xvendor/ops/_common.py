"""What every op shares: the argument error, dtype rules, and the eager fast path.

NOTE [eager fast path]: a ``torch.library`` op costs ~4-10 µs of dispatcher and Python
overhead per call on this machine (``custom_op`` ~19 µs vs aten ~9 µs at 64x64 mm). The
public functions (``xvendor.gemm`` ...) therefore call the chosen kernel directly when
nothing needs the dispatcher: plain tensors (or Parameters), no autograd needed, not being
traced by torch.compile, no torch-function or dispatch mode, no functorch transform, no
profiler. Otherwise they call ``torch.ops.xvendor.<op>``, whose implementation runs the same
checks and the same registry decision, so both paths compute the same thing (tested).
``set_fast_path(False)`` sends every call through the dispatcher (debugging, profiling).
"""

from __future__ import annotations

import torch

from .. import registry

__all__ = ["ArgumentError", "eager_fast", "set_fast_path", "check_float", "check_same_device"]


class ArgumentError(ValueError):
    """Bad input to an xvendor op; the message names the argument and the rule."""

    def __init__(self, op: str, arg: str, rule: str):
        self.op, self.arg = op, arg
        super().__init__(f"xvendor.{op}: {arg} {rule}")


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_grad_enabled = torch.is_grad_enabled
_compiling = torch.compiler.is_compiling
_fn_mode = torch._C._is_torch_function_mode_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch = torch._C._are_functorch_transforms_active
_profiling = torch.autograd._profiler_enabled
_fast_path = [True]


def set_fast_path(enabled: bool) -> None:
    """Route eager calls straight to the kernel (default) or always through the dispatcher."""
    _fast_path[0] = bool(enabled)


def eager_fast(a, b=None, c=None) -> bool:
    """True when calling the kernel directly is indistinguishable from the dispatcher op."""
    if _compiling() or not _fast_path[0]:
        return False
    if type(a) not in _PLAIN or (b is not None and type(b) not in _PLAIN) \
            or (c is not None and type(c) not in _PLAIN):
        return False
    if _grad_enabled() and (a.requires_grad or (b is not None and b.requires_grad)
                            or (c is not None and c.requires_grad)):
        return False
    return not (_fn_mode() or _dispatch_modes() or _functorch() or _profiling())


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
    for name, t in others.items():
        if t is not None and t.device != ref.device:
            raise ArgumentError(op, name, f"must be on the same device as {ref_name} "
                                          f"({ref.device}), got {t.device}")


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


def needs_grad(ctx, n: int) -> tuple:
    """``ctx.needs_input_grad`` padded to ``n``: traced calls may pass fewer than all args."""
    flags = tuple(ctx.needs_input_grad)
    return (flags + (False,) * n)[:n]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype for ``dtype``: fp32 for half types, else itself."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def pow2_bucket(n: int) -> int:
    """``n`` rounded up to a power of two (0 stays 0): the bucket for group counts."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def m_bucket(m: int) -> int:
    """M of a shape class: a power of two up to 256, then a multiple of 256 (NOTE [problem
    key v1] in ``xvendor.tuning.problem``: token counts vary, tile choice barely does)."""
    return pow2_bucket(m) if m <= 256 else -(-m // 256) * 256


def operand_layout(t) -> str:
    """"N" when the last dimension is contiguous, else "T" (a transposed view)."""
    return "N" if t.dim() == 0 or t.stride(-1) == 1 else "T"


def decide_and_run(op: str, ref: torch.Tensor, backend, args: tuple, shape_class_fn=None):
    """Choose the backend (cached) for ``ref``'s device and dtype and run it."""
    dec = registry.decide(op, ref.device, ref.dtype, backend, shape_class_fn, args)
    try:
        return dec.kernel(*args)
    except Exception as e:
        return registry.fall_back(dec, args, e)
