"""The replicated coordinator on a real etcd (l1): Debian's ``etcd-server`` on 127.0.0.1.

- election and fencing between two replicas' ``Replica`` objects: a leader that stops
  renewing loses the key, the standby takes it, and the old leader's write, guarded by its
  fencing token, is refused by etcd itself (the key absent, etcd's revision unchanged);
- ``xvendor coordinator --store etcd://`` replicas as separate processes: one leads, the
  other stands by with its ports closed; the leader SIGSTOPped past its lease, the standby
  leads, and the old one, resumed, answers nothing and writes nothing (etcd's revision
  unchanged), steps down and stands by;
- kill -9 of the leading replica while two replica groups train (gloo, DDP under the step
  guard, ``ddp_drill``): the standby leads, the workers follow it through the address list
  (the standby listed first), no epoch is lost or added, no step lost or applied twice.
"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

ETCD = shutil.which("etcd")
pytestmark = [pytest.mark.timeout(240)]
needs_etcd = pytest.mark.skipif(ETCD is None, reason="no etcd binary: apt-get install "
                                "etcd-server (scripts/apt-packages.txt)")

TOKEN = "etcd-test-token"


@pytest.mark.l0
def test_bad_addresses_name_the_argument_and_the_rule(monkeypatch):
    from xvendor.distributed.env import link_from_env
    from xvendor.distributed.etcdstore import parse_url
    assert parse_url("etcd://a:1,[::1]:2/") == [("a", 1), ("::1", 2)]
    with pytest.raises(ValueError, match="--store must be 'embedded' or etcd://"):
        parse_url("http://a:1")
    with pytest.raises(ValueError, match="each endpoint must be host:port, got 'b'"):
        parse_url("etcd://a:1,b")
    monkeypatch.setenv("XVENDOR_COORDINATOR", "h:1,h2")
    monkeypatch.setenv("XVENDOR_TOKEN", "t")
    with pytest.raises(ValueError, match=r"XVENDOR_COORDINATOR must be host:port\[,host"):
        link_from_env()


@pytest.fixture
def etcd():
    from xvendor.distributed.etcdstore import LocalEtcd
    e = LocalEtcd(ETCD)
    yield e
    e.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.l1
@needs_etcd
def test_election_and_fencing_on_etcd_revisions(etcd):
    from xvendor.distributed import etcdstore as es
    from xvendor.distributed.authstore import CAS, GET, SET
    client = es.Etcd(es.parse_url(etcd.url))
    try:
        root = es.job_root(TOKEN)
        a = es.Replica(client, root, {"name": "a"}, 1, lambda m: None)
        b = es.Replica(client, root, {"name": "b"}, 1, lambda m: None)
        ta = a.campaign()
        assert a.leader() == {"name": "a"} and a.valid()
        kv = es.EtcdKV(a)
        kv.load()
        assert kv.apply(CAS, [b"k", b"", b"first"]) == (0, [b"first"])
        assert kv.apply(CAS, [b"k", b"", b"second"]) == (0, [b"first"])  # first wins
        assert client.get(root + b"kv/k").value == b"first"       # committed to etcd
        got = {}
        th = threading.Thread(target=lambda: got.update(tb=b.campaign()), daemon=True)
        th.start()
        time.sleep(0.3)
        assert "tb" not in got, "the standby led while the leader held its lease"
        a._stop.set()  # a freezes: no more keep-alives
        th.join(10)
        assert got["tb"] > ta and b.leader() == {"name": "b"}
        # a, woken up, believes it still leads (its local window forced open): etcd refuses
        a._valid_until, a.token = time.monotonic() + 10, ta
        a.lost.clear()
        rev = client.revision()
        with pytest.raises(es.Fenced, match="create revision is no longer"):
            kv.apply(SET, [b"k", b"stale"])
        assert client.revision() == rev                        # nothing written anywhere
        assert client.get(root + b"kv/k").value == b"first"
        with pytest.raises(es.Fenced):                          # and it serves no reads
            kv.apply(GET, [b"k"])
        # the new leader adopts the state and writes under its own token
        kb = es.EtcdKV(b)
        assert kb.load() == 1 and kb.apply(GET, [b"k"]) == (0, [b"first"])
        kb.apply(SET, [b"k2", b"v"])
        meta = client.get(root + b"kv/k2")
        assert meta.mod_revision > rev and client.get(root + b"leader").create_revision == got["tb"]
        b.step_down()
        assert client.get(root + b"leader") is None  # revoked: the next leader need not wait
    finally:
        client.close()


class Replica:
    """``xvendor coordinator --store etcd://...`` in its own process."""

    def __init__(self, tmp_path, etcd, name, *extra, wait_for):
        self.wait_for = wait_for  # conftest's
        self.port, self.store_port, self.name = free_port(), free_port(), name
        self.log = tmp_path / f"{name}.log"
        env = dict(os.environ, XVENDOR_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
             "--port", str(self.port), "--store-port", str(self.store_port), "--store",
             etcd.url, "--lease-ttl", "1", "--name", name, "--straggler-factor", "0", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
            start_new_session=True)

    def text(self) -> str:
        return self.log.read_text()

    def wait(self, what: str, timeout_s=60, count=1) -> None:
        self.wait_for(lambda: self.text().count(what) >= count or self.proc.poll() is not None,
                 timeout_s, f"{self.name}: {what!r}")
        assert self.text().count(what) >= count, self.text()

    def led_at(self, n=1) -> float:
        return float(self.text().split(" leading at ")[n].split()[0])

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def replicas(tmp_path, etcd, wait_for):
    """Two replicas started at once (one interpreter start paid, not two): returns
    (leader, standby) once one listens and the other campaigns."""
    made = []

    def make(*extra):
        made.extend(Replica(tmp_path, etcd, name, *extra, wait_for=wait_for)
                    for name in ("a", "b"))
        for r in made:
            r.wait("standby, campaigning")
        wait_for(lambda: any("listening on" in r.text() for r in made), 60, "a leader")
        lead = next(r for r in made if "listening on" in r.text())
        return lead, next(r for r in made if r is not lead)
    yield make
    for r in made:
        r.close()


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


@pytest.mark.l1
@needs_etcd
def test_frozen_leader_wakes_up_and_cannot_write(replicas, etcd, wait_for):
    from xvendor.distributed import etcdstore as es
    from xvendor.distributed.authstore import AuthStore
    a, b = replicas()
    assert refused(b.port) and refused(b.store_port)  # a standby serves nothing
    store = AuthStore("127.0.0.1", a.store_port, TOKEN, timeout_s=30)
    store.set("before", "1")
    client = es.Etcd(es.parse_url(etcd.url))
    try:
        root = es.job_root(TOKEN)
        assert client.get(root + b"kv/before").value == b"1"
        token_a = client.get(root + b"leader").create_revision
        os.kill(a.proc.pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        b.wait("listening on", 30)
        took = time.monotonic() - t_stop
        token_b = client.get(root + b"leader").create_revision
        assert token_b > token_a
        assert json.loads(client.get(root + b"leader").value)["name"] == b.name
        rev = client.revision()
        box = {}

        def late_write():  # sent to the frozen leader: it reads it when it wakes up
            try:
                store.set("late", "stale")
                box["ok"] = True
            except Exception as e:
                box["err"] = e
        th = threading.Thread(target=late_write, daemon=True)
        th.start()
        time.sleep(0.2)
        os.kill(a.proc.pid, signal.SIGCONT)
        th.join(30)
        assert "err" in box, "the woken leader acknowledged a write"
        a.wait("no longer leads", 30)
        a.wait("standby, campaigning", 30, count=1)
        assert client.get(root + b"kv/late") is None
        assert client.revision() == rev, "the old leader changed etcd after it lost the lead"
        assert client.get(root + b"leader").create_revision == token_b
        wait_for(lambda: refused(a.port), 10, "the old leader closed its ports")
        print(f"SIGSTOP -> standby listening {took:.2f} s")
    finally:
        client.close()


def launch(tmp_path, addrs: str, spec: dict, n: int) -> list[subprocess.Popen]:
    spec = dict(spec, out_dir=str(tmp_path))
    procs = []
    for i in range(n):
        env = dict(os.environ, XVENDOR_COORDINATOR=addrs, XVENDOR_TOKEN=TOKEN,
                   XVENDOR_REPLICA_ID=f"r{i}", XV_DRILL=json.dumps(spec), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-m", "drills.ddp_drill"],
                                      env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL,
                                      stderr=open(tmp_path / f"stderr_{i}.txt", "w")))
    return procs


def progress(tmp_path) -> int:
    vals = []
    for p in glob.glob(str(tmp_path / "progress_*")):
        for _ in range(100):  # the worker rewrites it: an empty read is a torn one
            try:
                text = open(p).read()
            except OSError:
                text = ""
            if text.strip().isdigit():
                vals.append(int(text))
                break
        else:
            vals.append(0)
    return min(vals, default=0)


@pytest.mark.l1
@needs_etcd
def test_kill9_of_the_leading_replica_mid_training(replicas, tmp_path, wait_for):
    a, b = replicas("--min-replicas", "2")
    addrs = f"127.0.0.1:{b.port},127.0.0.1:{a.port}"  # the standby first: workers skip it
    procs = launch(tmp_path, addrs, {"steps": 40, "progress": True, "step_sleep": 0.05}, 2)
    try:
        wait_for(lambda: len(glob.glob(str(tmp_path / "progress_*"))) == 2
                 and progress(tmp_path) >= 10, 120, "training progress")
        at_kill = progress(tmp_path)
        os.killpg(a.proc.pid, signal.SIGKILL)
        t_kill = time.time()
        b.wait("listening on", 30)
        lead_s = b.led_at() - t_kill
        wait_for(lambda: progress(tmp_path) > at_kill + 1, 60, "training after the failover")
        resumed_s = time.time() - t_kill
        for p in procs:
            p.wait(120)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    rs = [json.load(open(p)) for p in sorted(glob.glob(str(tmp_path / "result_*.json")))]
    fin = [r for r in rs if r.get("finished")]
    assert len(fin) == 2, (rs, [open(tmp_path / f"stderr_{i}.txt").read()[-3000:]
                                for i in range(2)])
    for r in fin:
        assert r["errors"] == [] and r["applied_ok"] and r["w_ok"], r  # none lost or twice
        assert r["step"] == 40 and r["size"] == 2, r
        assert r["epoch"] == 0 and r["reconnects"] == 0, r  # no epoch lost, none re-formed
    assert len({r["digest"] for r in fin}) == 1
    text = b.text()
    assert text.count("resumed its link") == 2, text       # both followed the new leader
    assert "epoch 0 =" not in text, text                    # it adopted epoch 0, kept it
    assert "adopted" in text and "declared dead" not in text, text
    assert lead_s < 2.5, f"the standby led {lead_s:.2f} s after the kill"
    print(f"kill -9 -> standby leads {lead_s:.2f} s; -> 2 more committed steps {resumed_s:.2f} s")


_FORKS = """
import os, subprocess, sys, threading
from xvendor.distributed import etcdstore as es
client = es.Etcd(es.parse_url(sys.argv[1]))
stop = threading.Event()
def busy():  # a call in flight whenever the parent forks
    while not stop.is_set():
        client.get(b"/xv-fork-probe")
threading.Thread(target=busy, daemon=True).start()
codes = [subprocess.run([sys.executable, "-c", "pass"], capture_output=True,
                        preexec_fn=lambda: None).returncode  # a real fork(), not vfork
         for _ in range(40)]
stop.set()
print(codes)
"""


@pytest.mark.l1
@needs_etcd
def test_a_process_holding_an_etcd_client_forks_healthy_children(etcd):
    """grpcio's fork handlers, left on, kill children forked while a call is in flight
    (SIGABRT/SIGSEGV before exec, about 1 in 10 here); the client turns them off."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    proc = subprocess.run([sys.executable, "-c", _FORKS, etcd.url], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert codes == [0] * 40, (codes, proc.stderr[-2000:])


@pytest.mark.l0
def test_tls_options_name_the_argument_and_the_rule(tmp_path):
    from argparse import Namespace

    from xvendor.distributed.etcdstore import TLS, tls_from_args
    pem = tmp_path / "ca.pem"
    pem.write_text("x")
    store = "etcd://127.0.0.1:1"

    def args(**kw):
        return Namespace(**{"store": store, "etcd_cacert": None, "etcd_cert": None,
                            "etcd_key": None, "etcd_server_name": None, **kw})
    assert tls_from_args(args()) is None
    assert tls_from_args(args(etcd_cacert=str(pem))) == TLS(str(pem))
    with pytest.raises(ValueError, match="--etcd-cert needs --etcd-cacert"):
        tls_from_args(args(etcd_cert=str(pem), etcd_key=str(pem)))
    with pytest.raises(ValueError, match="--etcd-cert and --etcd-key go together.*only "
                                         "--etcd-key"):
        tls_from_args(args(etcd_cacert=str(pem), etcd_key=str(pem)))
    with pytest.raises(ValueError, match="--etcd-cacert .*missing.pem: not a readable file"):
        tls_from_args(args(etcd_cacert=str(tmp_path / "missing.pem")))
    with pytest.raises(ValueError, match="--etcd-cacert is for --store etcd://"):
        tls_from_args(args(store="embedded", etcd_cacert=str(pem)))


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl binary "
                                   "to make the test certificates: apt-get install openssl "
                                   "(scripts/apt-packages.txt)")


@pytest.mark.l1
@needs_etcd
@needs_openssl
def test_tls_etcd_takes_only_clients_with_a_certificate(tmp_path, wait_for):
    """etcd serving TLS with client-certificate authentication: a replica given the CA and
    its certificate leads; a plaintext client and a TLS client without a certificate are
    refused and change nothing."""
    from xvendor.distributed import etcdstore as es
    with es.LocalEtcd(ETCD, tls=True) as etcd:
        good = es.Etcd(es.parse_url(etcd.url), tls=etcd.tls)
        try:
            good.run(good.client.put(b"/xv-tls", b"kept"))
            rev = good.revision()
            for tls in (None, es.TLS(etcd.tls.cacert)):
                bad = es.Etcd(es.parse_url(etcd.url), tls=tls, timeout_s=2)
                try:
                    with pytest.raises(Exception, match="failed to connect|UNAVAILABLE"):
                        bad.run(bad.client.put(b"/xv-tls", b"overwritten"))
                finally:
                    bad.close()
            assert good.get(b"/xv-tls").value == b"kept" and good.revision() == rev
        finally:
            good.close()
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
             "--port", str(port), "--store-port", str(free_port()), "--store", etcd.url,
             "--etcd-cacert", etcd.tls.cacert, "--etcd-cert", etcd.tls.cert,
             "--etcd-key", etcd.tls.key], env=dict(os.environ, XVENDOR_TOKEN=TOKEN),
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "replica.log", "w"),
            start_new_session=True)
        try:
            wait_for(lambda: "listening on" in (tmp_path / "replica.log").read_text()
                     or proc.poll() is not None, 60, "the TLS replica to lead")
            text = (tmp_path / "replica.log").read_text()
            assert "leading at" in text and "listening on" in text, text
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
