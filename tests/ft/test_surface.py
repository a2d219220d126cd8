"""The torchft module surface of ``xvendor.ft`` beyond ``Manager`` (l0 in process; l1 with
real processes): ``compat.install`` (``import torchft`` resolves to xvendor.ft, refused after
a real torchft import), ``process_group.ManagedProcessGroup``, ``local_sgd`` (``LocalSGD`` on
2 replicas under ``xvendor run``: parameters averaged every ``sync_every`` steps, identical
afterwards; ``DiLoCo`` refuses, naming why), and the DTensor-free state tree helpers."""

import json
import os
import subprocess
import sys

import pytest
import torch

import xvendor.ft as xft
from xvendor.ft import local_sgd, manager as ft_manager


@pytest.fixture
def clean_torchft_names():
    """Leave ``sys.modules`` as it was: the tests below alias or import torchft's names."""
    saved = {k: v for k, v in sys.modules.items() if k == "torchft" or k.startswith("torchft.")}
    for k in saved:
        del sys.modules[k]
    yield
    for k in [k for k in sys.modules if k == "torchft" or k.startswith("torchft.")]:
        del sys.modules[k]
    sys.modules.update(saved)


@pytest.mark.l0
def test_install_aliases_torchft_names(clean_torchft_names):
    import importlib.util

    from xvendor.ft import compat
    compat.install()
    import torchft
    import torchft.local_sgd as ls
    import torchft.process_group as pg
    from torchft.optim import OptimizerWrapper
    assert importlib.util.find_spec("torchft") is not None  # torchtitan's guard
    assert torchft.Manager is xft.Manager and OptimizerWrapper is xft.OptimizerWrapper
    assert pg.ManagedProcessGroup is xft.process_group.ManagedProcessGroup
    assert torchft.process_group is pg and ls.LocalSGD is local_sgd.LocalSGD
    compat.install()  # idempotent


@pytest.mark.l0
def test_install_refuses_after_real_torchft(clean_torchft_names):
    pytest.importorskip("torchft")
    from xvendor.ft import compat
    with pytest.raises(RuntimeError, match="must run before torchft is imported"):
        compat.install()


@pytest.mark.l0
def test_managed_process_group_and_bad_arguments():
    with pytest.raises(TypeError, match="manager must be an xvendor.ft.Manager"):
        xft.process_group.ManagedProcessGroup(object())
    m = xft.Manager()
    pg = xft.process_group.ManagedProcessGroup(m)
    assert isinstance(pg, torch.distributed.ProcessGroup)
    with pytest.raises(ValueError, match="one tensor per call"):
        pg.allreduce([torch.ones(1), torch.ones(1)], None)
    with pytest.raises(ValueError, match="reduce_op must be AVG or SUM"):
        m.allreduce(torch.ones(1), reduce_op=torch.distributed.ReduceOp.MAX)
    with pytest.raises(ValueError, match="sync_every must be an int >= 1"):
        local_sgd.LocalSGD(m, torch.nn.Linear(2, 2), torch.optim.SGD([torch.ones(1)]), 0)
    with pytest.raises(NotImplementedError, match="streaming DiLoCo"):
        local_sgd.DiLoCo(m)
    with pytest.raises(RuntimeError, match="no step is open"):
        m.commit_action(lambda: None)


@pytest.mark.l0
def test_state_tree_helpers_keep_structure():
    tree = {"a": torch.ones(2), "b": [torch.zeros(1), 3], "c": {"d": "x"}}
    out = ft_manager._like(ft_manager._to_local(tree), tree)
    assert out["a"].equal(tree["a"]) and out["b"][1] == 3 and out["c"] == {"d": "x"}


SCRIPT = r'''
import json, os, torch
import xvendor.ft as torchft
from xvendor.ft.local_sgd import LocalSGD
torch.manual_seed(0)
model = torch.nn.Linear(4, 2, dtype=torch.float64)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
manager = torchft.Manager(pg=torchft.ProcessGroupGloo(), min_replica_size=2,
                          load_state_dict=lambda s: model.load_state_dict(s),
                          state_dict=lambda: model.state_dict())
torchft.Optimizer(manager, opt)  # registers it, as torchtitan's container does
seen = []
with LocalSGD(manager, model, opt, sync_every=3) as sgd:
    for i in range(9):
        g = torch.Generator().manual_seed(100 * i + int(os.environ["XV_MEMBER"]))
        opt.zero_grad()
        model(torch.randn(5, 4, dtype=torch.float64, generator=g)).square().mean().backward()
        opt.step()
        seen.append([p.detach().flatten().tolist() for p in model.parameters()])
out = {"w": seen, "step": manager.current_step()}
manager.shutdown()
with open(os.path.join(os.environ["OUT"], f"r{os.environ['XV_MEMBER']}.json"), "w") as f:
    json.dump(out, f)
os._exit(0)
'''


@pytest.mark.l1
@pytest.mark.timeout(180)
def test_local_sgd_averages_every_sync_every_steps(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, "-m", "xvendor.distributed.cli", "run", "--nproc", "2",
                        str(script)], env=dict(os.environ, OUT=str(tmp_path)),
                       capture_output=True, text=True, timeout=170, start_new_session=True)
    assert p.returncode == 0, p.stderr[-3000:]
    r0, r1 = (json.load(open(tmp_path / f"r{m}.json")) for m in (0, 1))
    assert r0["step"] == r1["step"] == 3  # 9 local steps, a sync every 3: 3 manager steps
    for i in range(9):
        if i % 3 == 2:  # right after a sync: identical
            assert r0["w"][i] == r1["w"][i], i
        else:  # local steps on different data: apart
            assert r0["w"][i] != r1["w"][i], i
