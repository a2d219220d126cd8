"""A ``DeviceMesh`` over a ``ResilientProcessGroup`` (l1: a coordinator in this process, two
single-process replica groups as separate interpreters on 127.0.0.1, gloo). Checks that
torch's own ``DeviceMesh.from_group`` fails there for the reason NOTE [DeviceMesh.from_group]
gives, and that ``device_mesh`` works: the mesh's rank and group are the epoch's, and DTensor
collectives through it (an uneven ``Shard(0)`` gathered, a ``Partial`` summed) are exact."""

import json
import os
import subprocess
import sys
import threading

import pytest

from xvendor.distributed import Coordinator, StragglerPolicy

pytestmark = [pytest.mark.l1, pytest.mark.timeout(240)]

TOKEN = "test-token-mesh"

WORKER = r"""
import json, os, torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from xvendor.distributed import ResilientGroup, device_mesh
state = {"w": torch.zeros(1)}
rg = ResilientGroup.from_env(lambda: state, lambda s: state.update(s))
pg = rg.torch_group()
out = {"rank": rg.rank, "size": rg.size}
try:
    DeviceMesh.from_group(pg, "cpu")
    out["from_group"] = "ok"
except Exception as e:
    out["from_group"] = f"{type(e).__name__}: {e}"
mesh = device_mesh(pg, "cpu")
out["mesh_rank"], out["same_group"] = mesh.get_coordinate(), mesh.get_group() is pg
full = torch.randn(7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
local = full.tensor_split(rg.size)[rg.rank].clone()   # 7 rows over 2 ranks: 4 + 3
d = DTensor.from_local(local, mesh, [Shard(0)], shape=full.shape, stride=full.stride())
got = torch.full_like(full, float("nan"))
got.copy_(d.full_tensor())
out["gathered_exact"] = bool(torch.equal(got, full))
p = DTensor.from_local(torch.full((3,), float(rg.rank + 1), dtype=torch.float64), mesh,
                       [Partial()])
out["summed"] = p.redistribute(mesh, [Replicate()]).to_local().tolist()
out["latched"] = pg.error
rg.close()
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)
"""


def test_device_mesh_over_a_resilient_group(tmp_path):
    c = Coordinator(TOKEN, "127.0.0.1", 0, min_replicas=2, straggler=StragglerPolicy(0, 0),
                    log=lambda m: None)
    threading.Thread(target=c.serve, daemon=True).start()
    env = {**os.environ, "XVENDOR_COORDINATOR": f"127.0.0.1:{c.port}", "XVENDOR_TOKEN": TOKEN,
           "RANK": "0", "WORLD_SIZE": "1", "OMP_NUM_THREADS": "1"}
    try:
        procs = [subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**env, "XVENDOR_REPLICA_ID": f"r{i}"})
                 for i in range(2)]
        outs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        c.close()
    results = []
    for text in outs:
        line = [l for l in text.splitlines() if l.startswith("RESULT ")]
        assert line, text[-3000:]
        results.append(json.loads(line[0][len("RESULT "):]))
    assert sorted(r["rank"] for r in results) == [0, 1]
    for r in results:
        assert "Default process group has not been initialized" in r["from_group"], r
        assert r["mesh_rank"] == [r["rank"]] and r["same_group"], r
        assert r["gathered_exact"], r
        assert r["summed"] == [3.0, 3.0, 3.0], r     # 1 + 2 from the two ranks
        assert r["latched"] is None, r
