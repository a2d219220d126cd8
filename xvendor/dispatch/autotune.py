"""Our backends as Inductor autotuning choices under ``torch.compile(mode="max-autotune")``.

NOTE [max-autotune choices]: where a traced call's decision is torch's own op, the graph
holds torch's op (``engine.traced_floor``) and Inductor tunes it as its own. Where the
decision is a kernel of ours, the ``xvendor::`` op stays in the graph; this module
registers each such op with ``torch._inductor.kernel.custom_op.register_custom_op_autotuning``
(the first time a graph traces it), so that under max-autotune Inductor benchmarks, on
random inputs of the traced shapes:

- the op as decided (Inductor's "fallback" choice: the extern call of the custom op);
- every other backend the registry would run automatically for (op, device, dtype), as
  the same op with ``backend=`` that name (still behind the correctness gate, which wraps
  every decision of a gated backend, explicit ones included);
- torch's own kernel (the ``torch`` backend's), inlined as a decomposition, where its
  rules take the call, so Inductor may lower and fuse it.

and compiles the winner into the graph. Without max-autotune, and for a call that names
its backend (``backend=``, ``use_backend``, ``XVENDOR_BACKEND``: an explicit request is
never overridden), the lowering declines and the op stays an extern call as before.

Benchmark inputs: random values of the traced shapes and dtypes (fp8 / fp4 / E8M0 drawn
in fp32 and converted), and ``offs`` as evenly split groups over the ragged extent (a
valid cumulative-ends vector; the real routing is not known at compile time).
``topk`` is not registered: Inductor's custom-op autotuning takes single-output ops only.
"""

from __future__ import annotations

import torch

from . import engine

__all__ = ["AUTOTUNED_OPS", "ensure_registered", "registered", "choices_for"]

# ops whose custom op has one output (Inductor's custom-op autotuning supports no more)
AUTOTUNED_OPS = ("gemm", "grouped_mm", "rms_norm", "scaled_mm", "scaled_grouped_mm")
_REGISTERED: set = set()
# The call being lowered: its (args, kwargs), and its ragged extent for the offs generator.
# Inductor hands the config generator only the tensors and asks for benchmark inputs one
# tensor at a time; lowering runs on one thread, one call at a time.
_CALL: list = [((), {})]
_EXTENT = [0]


def registered() -> frozenset:
    """The ops registered with Inductor's autotuning so far in this process."""
    return frozenset(_REGISTERED)


def ensure_registered(op: str) -> None:
    """Register ``op`` with Inductor's custom-op autotuning, once per process (called from
    the op's fake implementation while a graph is traced: Dynamo runs it, never traces it)."""
    if op in _REGISTERED or op not in AUTOTUNED_OPS:
        return
    _REGISTERED.add(op)
    from torch._inductor.kernel.custom_op import register_custom_op_autotuning
    from torch._inductor.lowering import user_lowerings

    overload = getattr(torch.ops.xvendor, op).default
    # every schema name gets the generator: Inductor maps a name to its schema position but
    # applies it to that position among the tensors present (optional ones shift them)
    register_custom_op_autotuning(overload, config_generator=lambda fakes: _configs(op, fakes),
                                  name=f"xvendor_{op}",
                                  input_gen_fns={n: _random_like for n in _schema(op)[:-1]})
    tuned = user_lowerings[overload]

    def lowering(*args, **kwargs):
        from torch._inductor import config
        if not config.max_autotune or _value(op, "backend", args, kwargs) \
                or engine.requested_backend(None):
            return None  # Inductor's normal lowering: the extern custom op
        _CALL[0] = (args, kwargs)
        return tuned(*args, **kwargs)

    user_lowerings[overload] = lowering


def choices_for(op: str, device: torch.device, dtype: torch.dtype) -> list[str]:
    """The backends Inductor may benchmark for (op, device, dtype): the decision first,
    then every other backend of kernels or the floor the registry would run automatically
    (probes, earlier failures and rules consulted; the reference never)."""
    dec = engine.decide(op, device, dtype)
    dev = engine.device_info(device)
    out = [dec.backend]
    for name, b in engine.backends().items():
        if name in out or b.role not in ("kernels", "floor"):
            continue
        if b.why_not(op, dev, dtype, False) is None and engine.never_reason(b, op, dev) is None \
                and engine.failed_reason(name, op, dev, dtype) is None:
            out.append(name)
    return out


def _configs(op: str, fakes: dict) -> list:
    """Inductor's choices for one traced call (NOTE [max-autotune choices]). The fake
    tensors come keyed by schema position of the tensors present, so they are re-read by
    kind here, not by the names Inductor gives them."""
    from torch._inductor.kernel.custom_op import CustomOpConfig

    tensors = list(fakes.values())
    first = tensors[0]
    if op in ("scaled_mm", "scaled_grouped_mm"):  # decided on the output dtype
        dtype = _value(op, "output_dtype", *_CALL[0]) or torch.bfloat16
    else:
        dtype = first.dtype
    names = choices_for(op, first.device, dtype)
    configs = [CustomOpConfig(backend=n) for n in names[1:] if n != engine.FLOOR]
    if engine.FLOOR in names[1:]:
        configs.append(CustomOpConfig(_floor_decomposition(op)))
    if op in ("grouped_mm", "scaled_grouped_mm"):
        _EXTENT[0] = _ragged_extent(op, tensors)
    return configs


def _floor_decomposition(op: str):
    """torch's own kernel for ``op`` as a decomposition Inductor traces and inlines; a call
    its rules refuse raises while tracing and the choice is dropped."""
    kernel = engine.floor_kernel(op)
    schema = _schema(op)

    def torch_floor(*tensors, **kwargs):
        it = iter(tensors)
        args = [kwargs[name] if name in kwargs else next(it) for name in schema[:-1]]
        args = [0 if v is None and n.startswith("swizzle") else v  # the ops' NO_SWIZZLE
                for n, v in zip(schema, args)]
        why = engine.floor_refuses(op, tensors[0].device, args)
        if why is not None:
            raise RuntimeError(f"torch's {op} refuses this call: {why}")
        return kernel(*args)
    torch_floor.__name__ = f"torch_{op}"
    return torch_floor


def _value(op: str, name: str, args: tuple, kwargs: dict):
    """The traced call's value of argument ``name`` (None when not given)."""
    if name in kwargs:
        return kwargs[name]
    i = _schema(op).index(name)
    return args[i] if i < len(args) else None


def _ragged_extent(op: str, tensors: list) -> int:
    a, b = tensors[0], tensors[1]
    if op == "scaled_grouped_mm":
        return a.shape[0] if b.dim() == 3 else a.shape[1] * (2 if a.dtype == torch.uint8 else 1)
    form = (a.dim(), b.dim())
    return {(2, 3): a.shape[0], (3, 2): b.shape[1]}.get(form, a.shape[-1])


def _random_like(fake: torch.Tensor) -> torch.Tensor:
    """A benchmark input of ``fake``'s shape and dtype (module docstring)."""
    shape, dtype, device = fake.shape, fake.dtype, fake.device
    if dtype == torch.int32 and fake.dim() == 1:  # offs: evenly split groups
        groups, extent = shape[0], _EXTENT[0]
        step = 32 if extent % 32 == 0 else 1  # E8M0 blocks of scaled 2Dx2D: starts on 32s
        ends = [(extent * (g + 1) // groups) // step * step for g in range(groups)]
        return torch.tensor(ends, dtype=dtype, device=device)
    if dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype == torch.float8_e8m0fnu:  # block scales: powers of two around 1
        return (2.0 ** torch.randint(-2, 3, shape, device=device).float()).to(dtype)
    if dtype.is_floating_point and dtype.itemsize == 1:  # fp8
        return torch.randn(shape, device=device).to(dtype)
    return torch.randint(0, 256, shape, dtype=torch.uint8, device=device).view(dtype)


def _schema(op: str) -> tuple:
    """``op``'s argument names in schema order (``backend`` last), read from the registered
    custom op itself, so a new argument can never leave this module out of step."""
    names = _NAMES.get(op)
    if names is None:
        names = _NAMES[op] = tuple(a.name for a in
                                   getattr(torch.ops.xvendor, op).default._schema.arguments)
    return names


_NAMES: dict = {}
