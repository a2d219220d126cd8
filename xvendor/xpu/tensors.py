"""torch tensors as kernel arguments: USM pointers, element strides, extent checks.

``Launch(device)`` collects one kernel call's tensors:

- XPU tensors (l2, unverified here) are passed in place: ``data_ptr()`` is a USM pointer on
  torch's queue, any strides are passed through, and the launch is asynchronous on that queue.
- CPU tensors go through the CPU SYCL device: each input is copied into USM device memory
  (a contiguous tensor, or one whose last two dimensions are transposed — an nn.Linear
  weight's ``w.t()`` — keeps its strides and so exercises the kernels' stride handling; any
  other layout is made contiguous first), outputs are allocated on the device and copied
  back after the (blocking) launch.

Every pointer handed to a kernel is checked first: the furthest element its shape and
strides reach must lie inside the memory behind it.
"""

from __future__ import annotations

import torch

from . import runtime

__all__ = ["Launch", "TAGS", "POISON"]

TAGS = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

# Tests set POISON[0] = True: outputs are filled with NaN (integers with -1) on the device
# before the kernel runs, so an element the kernel forgets to write shows up as a failure.
POISON = [False]


def _reach(shape, strides) -> int:
    """Index of the furthest element (in elements) a view touches; -1 when empty."""
    if any(s == 0 for s in shape):
        return -1
    return sum((n - 1) * abs(st) for n, st in zip(shape, strides))


def _layout_kept(t: torch.Tensor) -> bool:
    """Contiguous, or contiguous after swapping the last two dims (a transposed matrix)."""
    return t.is_contiguous() or (t.dim() >= 2 and t.transpose(-2, -1).is_contiguous())


def _poison(t: torch.Tensor) -> None:
    t.fill_(float("nan") if t.is_floating_point() else -1)


class Launch:
    """The tensors of one kernel call on ``device`` (cpu: via the CPU SYCL device)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.on_cpu = device.type == "cpu"
        self.queue = runtime.cpu_queue() if self.on_cpu else runtime.xpu_queue(device)
        self._keep: list = []
        self._outputs: list = []

    def input(self, name: str, t: torch.Tensor | None, *, any_strides: bool = False):
        """(pointer, element strides) for reading ``t`` in a kernel; (0, ()) for None.

        ``any_strides``: the kernel honours arbitrary strides (else it assumes contiguous).
        """
        if t is None:
            return 0, ()
        if not (any_strides and _layout_kept(t)) and not t.is_contiguous():
            t = t.contiguous()
        if not self.on_cpu:
            self._check(name, t, t.untyped_storage().nbytes() - t.storage_offset() * t.element_size())
            self._keep.append(t)
            return t.data_ptr(), t.stride()
        nbytes = t.numel() * t.element_size()
        buf = runtime.DeviceBuffer(self.queue, nbytes)
        if nbytes:
            buf.write(t.data_ptr(), nbytes)  # dense layouts: storage span == numel elements
        self._check(name, t, buf.nbytes)
        self._keep += [t, buf]
        return buf.ptr, t.stride()

    def output(self, name: str, t: torch.Tensor) -> int:
        """Pointer the kernel writes ``t`` (contiguous, freshly allocated) through."""
        if POISON[0]:
            _poison(t)
        if not self.on_cpu:
            self._check(name, t, t.numel() * t.element_size())
            return t.data_ptr()
        nbytes = t.numel() * t.element_size()
        buf = runtime.DeviceBuffer(self.queue, nbytes)
        if POISON[0] and nbytes:
            buf.write(t.data_ptr(), nbytes)
        self._check(name, t, buf.nbytes)
        self._outputs.append((t, buf))
        return buf.ptr

    @staticmethod
    def _check(name: str, t: torch.Tensor, available_bytes: int) -> None:
        need = (_reach(t.shape, t.stride()) + 1) * t.element_size()
        if need > available_bytes:
            raise ValueError(f"{name}: shape {tuple(t.shape)} with strides {t.stride()} reaches "
                             f"{need} bytes, but only {available_bytes} are behind the pointer")

    def run(self, program: str, kernel: str, global_size: tuple, local_size: tuple,
            args: list, options: tuple = ()) -> None:
        """Compile (cached) ``sycl_kernels/<program>.cpp``, launch ``kernel``, copy back.

        ``options`` are extra build options (``-D`` tile parameters of a tuned config).
        """
        prog = runtime.program(program, self.queue, options)
        runtime.launch(self.queue, prog.kernel(kernel), global_size, local_size, args,
                       wait=self.on_cpu)
        for t, buf in self._outputs:
            if t.numel():
                buf.read(t.data_ptr(), t.numel() * t.element_size())
