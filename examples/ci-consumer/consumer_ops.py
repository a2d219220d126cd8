"""One custom op, as an outside project would write it: out = x * alpha + y."""

import torch


@torch.library.custom_op("consumer::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    if x.shape != y.shape:
        raise ValueError(f"scale_add: x {tuple(x.shape)} and y {tuple(y.shape)} must match")
    return x * alpha + y


@scale_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)
