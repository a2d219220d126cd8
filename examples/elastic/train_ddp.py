"""DDP with resilient replica groups: a small MoE transformer (experts through
``xvendor.grouped_mm``) trained data-parallel across replica groups that may die, hang,
straggle or come back, without stopping the survivors.

Pure DDP: each replica group is ONE process (one GPU), launched by its own torchrun so a
failure restarts only that process; the xvendor coordinator lives outside all of them::

    export XVENDOR_TOKEN=$(openssl rand -hex 16)
    xvendor coordinator --port 29400 --min-replicas 3 &     # store on 29401
    for g in 0 1 2; do
      XVENDOR_COORDINATOR=127.0.0.1:29400 XVENDOR_REPLICA_ID=$g \\
        torchrun --standalone --nproc-per-node 1 --max-restarts 3 \\
                 examples/elastic/train_ddp.py --steps 200 &
    done

Kill one worker (``kill -9``): the others redo the interrupted step on a smaller epoch and
go on; torchrun restarts it, it rejoins as a newcomer (``TORCHELASTIC_RESTART_COUNT``),
receives model and optimizer state from the oldest survivor, and DDP is rebuilt on every
member. Replica groups of several processes: use ``train_hsdp.py``.

The code the user writes is the usual DDP loop plus three lines: ``from_env``,
``resilient_ddp`` and the ``with rg.step(optimizer):`` guard (the batch is chosen by the
committed step and the rank, so a redone step sees the same data).

Verified here on CPU/gloo (run it as above; the test drills use
``drills.ddp_drill``, whose model makes every mistake show exactly). On GPUs
pass ``--device cuda``: not verified here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import torch
import torch.nn.functional as F
from torch import nn

import xvendor
from xvendor.distributed import ResilientGroup, resilient_ddp


class MoE(nn.Module):
    """Top-1 routed experts: tokens sorted by expert, one ``grouped_mm`` per projection
    (an expert that gets no token still takes part, so DDP sees every parameter used)."""

    def __init__(self, dim: int, hidden: int, experts: int):
        super().__init__()
        self.router = nn.Linear(dim, experts, bias=False)
        self.w_up = nn.Parameter(torch.randn(experts, dim, hidden) * dim ** -0.5)
        self.w_down = nn.Parameter(torch.randn(experts, hidden, dim) * hidden ** -0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        gate = F.softmax(self.router(x), dim=-1)
        weight, expert = gate.max(dim=-1)
        order = torch.argsort(expert, stable=True)
        counts = torch.bincount(expert, minlength=self.w_up.shape[0])
        offs = torch.cumsum(counts, 0).to(torch.int32)  # cumulative ends, as grouped_mm wants
        h = F.gelu(xvendor.grouped_mm(x[order], self.w_up, offs=offs))
        y = xvendor.grouped_mm(h, self.w_down, offs=offs)
        out = torch.empty_like(y).index_copy_(0, order, y)
        return (out * weight[:, None]).reshape(shape)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, experts: int):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.moe = MoE(dim, hidden, experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.moe(self.norm2(x))


class TinyMoETransformer(nn.Module):
    def __init__(self, dim=64, heads=4, hidden=128, experts=4, layers=2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, experts) for _ in range(layers))
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def batch(step: int, rank: int, dim: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic in (step, rank): a redone step trains on the same data."""
    g = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(8, 16, dim, generator=g)
    teacher = torch.randn(dim, dim, generator=torch.Generator().manual_seed(42)) / dim ** 0.5
    return x.to(device), torch.tanh(x @ teacher).to(device)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="gloo", help="the resilient group's backend")
    p.add_argument("--until-size", type=int, default=0,
                   help="keep training past --steps until the job has this many replicas")
    p.add_argument("--out", default=None, help="write this replica's result JSON here")
    args = p.parse_args()
    if int(os.environ.get("WORLD_SIZE", "1")) != 1:
        raise SystemExit("train_ddp.py: one process per replica group (torchrun "
                         "--nproc-per-node 1); for replica groups of several processes use "
                         "train_hsdp.py")
    torch.manual_seed(0)  # every replica starts equal (the founders' state is synced anyway)
    device = torch.device(args.device)
    model = TinyMoETransformer().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    def get_state():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def set_state(s):
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["optim"])

    rg = ResilientGroup.from_env(get_state, set_state, model=model, backend=args.backend,
                                 device=device)
    ddp = resilient_ddp(model, rg)
    print(f"[replica {os.environ.get('XVENDOR_REPLICA_ID')}] member {rg.member}: rank "
          f"{rg.rank} of {rg.size} at step {int(rg.step)}", flush=True)
    loss = None  # a newcomer admitted at the last step may run none
    while rg.step < args.steps or (rg.size < args.until_size and rg.step < 20 * args.steps):
        with rg.step(opt):
            x, y = batch(int(rg.step), rg.rank, 64, device)
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(ddp(x), y)
            loss.backward()
        if rg.rank == 0 and rg.step % 20 == 0:
            print(f"step {int(rg.step):5d}  replicas {rg.size}  epoch {rg.epoch}  "
                  f"loss {loss.item():.5f}", flush=True)
    rg.close()
    digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()
    print(f"done: step {int(rg.step)}, {rg.size} replicas, params sha256 {digest[:16]}",
          flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"train_ddp_{rg.member}.json"), "w") as f:
            json.dump({"member": rg.member, "step": int(rg.step), "size": rg.size,
                       "loss": None if loss is None else loss.item(), "digest": digest}, f)


if __name__ == "__main__":
    main()
