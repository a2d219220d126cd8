"""The coordinator's state in etcd v3, and coordinator replicas that take turns leading.

``xvendor coordinator --store etcd://host:port[,host:port...]`` runs one replica. Two or
three replicas of one job (same token, same etcd, each on its own front/store ports) elect a
leader; only the leader binds its ports and serves workers, the others wait in ``campaign``.
Workers list every replica in ``XVENDOR_COORDINATOR`` (comma-separated) and follow whichever
leads (``env.Link.follow``).

What lives in etcd: every control-plane key the embedded store would hold (membership
epochs, abort flags, death notices, step votes and verdicts, admission: member ids, join
slots, queue, grow decisions, gloo rendezvous) under ``/xvendor/<job tag>/kv/``, plus the
leader key and the job's incarnation. Heartbeat counters stay in the leader's memory only
(soft state: a new leader learns them again within one beat).

NOTE [fencing]:
- Election: each replica holds a lease (``--lease-ttl``). The one whose transaction creates
  the leader key (``version(leader) == 0`` -> put with its lease) leads; the key's
  *create revision* is its fencing token. When its lease expires (kill -9, a SIGSTOP, a lost
  etcd link), etcd deletes the key and a standby's next attempt creates it anew, with a new
  create revision.
- Every state write of the leader is one etcd transaction guarded by
  ``create_revision(leader) == token``. An old leader that wakes up after its lease expired
  (SIGSTOP, then SIGCONT) finds its write refused by etcd itself, steps down (closes its
  ports and connections) and campaigns again as a standby. Its writes never land.
- Reads are served from the leader's mirror of the keys (loaded at takeover; only the
  leader writes, so it equals etcd while the leader holds the key). A leader serves reads and
  writes only while ``monotonic() < t_sent + ttl`` of its last acknowledged keep-alive: a
  frozen leader's clock runs on, so on waking it refuses every request before it has even
  heard from etcd (no stale read), and its keep-alive then finds the lease gone.
- A write is acknowledged to a worker only after etcd committed it: nothing acknowledged is
  lost at a failover. A worker whose request went unanswered repeats it on the new leader:
  every control-plane write is a put of a fixed value or a first-proposal-wins
  compare-and-set, so a repeat returns what the first attempt did (a repeated counter
  increment only skips a member id or a heartbeat count); nothing is applied twice.

Why a mirror and not etcd reads: workers poll abort flags every wait slice (tens of reads
per second each); serving them from memory costs no etcd round trip, and fencing plus the
lease-bounded serving window keep it exact.

Client: ``aetcd`` (asyncio, gRPC), driven from a private event-loop thread so the store
server and the coordinator loop call it synchronously. Securing etcd itself (TLS, users):
see docs/resilient-groups.md; ``--etcd-user`` / ``XVENDOR_ETCD_PASSWORD`` authenticate,
``--etcd-cacert`` (with ``--etcd-cert`` / ``--etcd-key`` for client certificates) makes
the link TLS (NOTE [etcd TLS]).

NOTE [etcd TLS]: aetcd 1.0.0 opens every channel with ``aetcd.rpc.insecure_channel`` and has
no TLS parameter. Each ``Etcd`` drives its client from its own event-loop thread; a TLS
client registers that thread with its gRPC credentials, and one wrapper installed over
``aetcd.rpc.insecure_channel`` opens a channel asked for on a registered thread with
``grpc.aio.secure_channel`` instead (a channel opened on any other thread, e.g. a plaintext
``Etcd`` or another library's client in the same process, passes through unchanged). Written here because no released etcd v3 client
for asyncio both supports TLS and runs on this Python (aetcd is the one that runs).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import NamedTuple

from . import authstore
from .authstore import ADD, CAS, DEL, MSET, OK, SET

WRITES = frozenset({SET, MSET, ADD, CAS, DEL})
VOLATILE = (b"/xv/hb/",)  # heartbeat counters: the leader's memory only


class Fenced(RuntimeError):
    """This replica no longer leads: etcd refused a write guarded by its fencing token, or
    its lease lapsed. It must stop serving."""


def parse_url(url: str) -> list[tuple[str, int]]:
    """``etcd://host:port[,host:port...]`` -> endpoints."""
    if not url.startswith("etcd://"):
        raise ValueError(f"--store must be 'embedded' or etcd://host:port[,host:port...], "
                         f"got {url!r}")
    out = []
    for part in url[len("etcd://"):].rstrip("/").split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--store {url!r}: each endpoint must be host:port, got {part!r}")
        out.append((host.strip("[]"), int(port)))
    return out


def job_root(token: str) -> bytes:
    """Where one job's keys live in a shared etcd: unguessable without the token (the tag
    is the one ``wire.job_prefix`` uses)."""
    tag = hashlib.sha256(b"xvendor-job:" + token.encode()).hexdigest()[:16]
    return f"/xvendor/{tag}/".encode()


class TLS(NamedTuple):
    """The files of a TLS link to etcd (PEM): the CA that signed etcd's server certificate,
    and, when etcd requires client certificates (``--client-cert-auth``), this client's
    certificate and key. ``server_name``: the name to check etcd's certificate against when
    it is not the endpoint's host (gRPC's ``ssl_target_name_override``)."""
    cacert: str
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None


def tls_from_args(args) -> TLS | None:
    """``--etcd-cacert/--etcd-cert/--etcd-key/--etcd-server-name`` -> TLS (None: plaintext),
    each file checked readable; a bad combination names the argument and the rule."""
    ca, cert, key = (getattr(args, f"etcd_{n}", None) for n in ("cacert", "cert", "key"))
    name = getattr(args, "etcd_server_name", None)
    if ca is None:
        if cert or key or name:
            given = next(f"--etcd-{n.replace('_', '-')}" for n, v in
                         (("cert", cert), ("key", key), ("server_name", name)) if v)
            raise ValueError(f"{given} needs --etcd-cacert (the CA of etcd's server "
                             f"certificate): TLS to etcd starts with it")
        return None
    if getattr(args, "store", "embedded") == "embedded":
        raise ValueError("--etcd-cacert is for --store etcd://...; the embedded store has no "
                         "etcd link")
    if (cert is None) != (key is None):
        raise ValueError("--etcd-cert and --etcd-key go together (a client certificate and "
                         f"its private key), got only {'--etcd-cert' if cert else '--etcd-key'}")
    for flag, path in (("--etcd-cacert", ca), ("--etcd-cert", cert), ("--etcd-key", key)):
        if path is not None and not os.access(path, os.R_OK):
            raise ValueError(f"{flag} {path}: not a readable file")
    return TLS(ca, cert, key, name)


_SECURE: dict[int, tuple] = {}  # loop thread id -> (credentials, channel options to add)


def _secure_channels() -> None:
    """Install (once) the wrapper of NOTE [etcd TLS] over ``aetcd.rpc.insecure_channel``."""
    import aetcd.rpc as rpc
    if getattr(rpc.insecure_channel, "_xvendor_tls", False):
        return
    plain = rpc.insecure_channel

    def channel(target, options=None, *a, **kw):
        found = _SECURE.get(threading.get_ident())
        if found is None:
            return plain(target, options, *a, **kw)
        creds, extra = found
        return rpc.secure_channel(target, creds, [*(options or ()), *extra])
    channel._xvendor_tls = True
    rpc.insecure_channel = channel


def _credentials(tls: TLS):
    import grpc

    def read(path):
        with open(path, "rb") as f:
            return f.read()
    return grpc.ssl_channel_credentials(
        root_certificates=read(tls.cacert),
        private_key=read(tls.key) if tls.key else None,
        certificate_chain=read(tls.cert) if tls.cert else None)


class Etcd:
    """A synchronous face on ``aetcd.Client``: its coroutines run on a private event loop."""

    def __init__(self, endpoints: list[tuple[str, int]], timeout_s: float = 2.0,
                 user: str | None = None, password: str | None = None,
                 tls: TLS | None = None):
        # gRPC's fork handlers (on by default in grpcio) break every child a process forks
        # while a call is in flight: the child runs the handlers half-way and dies of SIGABRT
        # or SIGSEGV before it can exec (seen with subprocess.run from a test process that
        # held a client). Nothing here needs gRPC in a forked child, so they are turned off
        # unless the user chose otherwise; it must be set before grpc is first imported.
        os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
        import aetcd
        self.aetcd, self.timeout_s, self.endpoints = aetcd, timeout_s, endpoints
        # aetcd builds its gRPC target as f"{host}:{port}": several endpoints go in as one
        # ipv4/ipv6 target list (gRPC's pick_first moves on when one is down)
        addrs = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in endpoints]
        target = addrs[0] if len(addrs) == 1 else (
            ("ipv6:" if ":" in endpoints[0][0] else "ipv4:") + ",".join(addrs))
        host, port = target.rsplit(":", 1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="xv-etcd",
                                        daemon=True)
        self._thread.start()
        if tls is not None:  # before the first call: aetcd connects lazily, on that thread
            _secure_channels()
            extra = (("grpc.ssl_target_name_override", tls.server_name),) \
                if tls.server_name else ()
            _SECURE[self._thread.ident] = (_credentials(tls), extra)
        self.client = aetcd.Client(host, port, username=user, password=password,
                                   timeout=timeout_s)
        self.tx = self.client.transactions

    def run(self, coro, timeout_s: float | None = None):
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout_s or self.timeout_s + 1.0)
        except BaseException:
            fut.cancel()
            raise

    def get(self, key: bytes):
        """The key's ``aetcd`` record (value, create_revision, mod_revision, ...) or None."""
        return self.run(self.client.get(key))

    def get_prefix(self, prefix: bytes) -> list:
        return list(self.run(self.client.get_prefix(prefix)))

    def txn(self, compare, success, failure=()):
        return self.run(self.client.transaction(compare, list(success), list(failure)))

    def revision(self) -> int:
        """etcd's current revision (the header of a read)."""
        return int(self.run(self.client.get_prefix(b"\0", keys_only=True)).header.revision)

    def close(self) -> None:
        try:
            self.run(self.client.close(), 2.0)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(2)
        _SECURE.pop(self._thread.ident, None)


class Replica:
    """One coordinator replica's part in the election (NOTE [fencing])."""

    def __init__(self, etcd: Etcd, root: bytes, me: dict, ttl_s: int = 1, log=print):
        self.etcd, self.root, self.me, self.log = etcd, root, json.dumps(me).encode(), log
        self.leader_key = root + b"leader"
        self.ttl_s = int(ttl_s)
        self.lease = None
        self.token: int | None = None      # the leader key's create revision while leading
        self._valid_until = 0.0
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    # -- the lease ---------------------------------------------------------------------
    def _grant(self) -> None:
        t = time.monotonic()
        self.lease = self.etcd.run(self.etcd.client.lease(self.ttl_s))
        self.granted_ttl = int(self.lease.ttl)  # etcd raises a TTL below its minimum
        self._valid_until = t + self.granted_ttl
        self.lost.clear()
        self._stop.clear()
        self._keeper = threading.Thread(target=self._keep, args=(self.lease,),
                                        name="xv-etcd-lease", daemon=True)
        self._keeper.start()

    def _keep(self, lease) -> None:
        every = max(0.1, self.granted_ttl / 4)
        while not self._stop.wait(every):
            t = time.monotonic()
            try:
                reply = self.etcd.run(lease.refresh(), self.granted_ttl)
                ttl = int(getattr(reply, "TTL", 0) or 0)
            except Exception:  # etcd unreachable: the serving window closes by itself
                if time.monotonic() > self._valid_until:
                    self.lost.set()
                continue
            if ttl <= 0:  # etcd let the lease expire: whatever this replica held is gone
                self.lost.set()
                return
            self._valid_until = max(self._valid_until, t + ttl)

    def valid(self) -> bool:
        return (self.token is not None and not self.lost.is_set()
                and time.monotonic() < self._valid_until)

    # -- the election ------------------------------------------------------------------
    def campaign(self, stop=lambda: False, poll_s: float = 0.02) -> int:
        """Block until this replica holds the leader key; return its fencing token."""
        tx = self.etcd.tx
        while not stop():
            if self.lease is None or self.lost.is_set():
                self._stop.set()
                try:
                    self._grant()
                except Exception as e:
                    self.log(f"etcd: cannot grant a lease ({type(e).__name__}: {e}); retrying")
                    time.sleep(0.5)
                    continue
            try:
                ok, resp = self.etcd.txn([tx.version(self.leader_key) == 0],
                                         [tx.put(self.leader_key, self.me, lease=self.lease),
                                          tx.get(self.leader_key)])
            except Exception as e:
                self.log(f"etcd: election attempt failed ({type(e).__name__}: {e})")
                time.sleep(0.2)
                continue
            if ok:
                self.token = int(resp[1][0][1].create_revision)
                return self.token
            time.sleep(poll_s)
        raise InterruptedError("campaign stopped")

    def leader(self) -> dict | None:
        got = self.etcd.get(self.leader_key)
        return json.loads(got.value) if got is not None else None

    def commit(self, puts: dict[bytes, bytes], dels: list[bytes]) -> None:
        """One fenced transaction; ``Fenced`` if this replica's token is no longer the
        leader key's create revision (or its serving window closed)."""
        if not self.valid():
            raise Fenced("this replica's lease lapsed: it no longer leads")
        tx = self.etcd.tx
        ops = [tx.put(k, v) for k, v in puts.items()] + [tx.delete(k) for k in dels]
        ok, _ = self.etcd.txn([tx.create(self.leader_key) == self.token], ops)
        if not ok:
            self.lost.set()
            raise Fenced(f"etcd refused a write: the leader key's create revision is no "
                         f"longer {self.token} (another replica leads)")

    def step_down(self) -> None:
        """Stop leading: revoke the lease (the key goes at once) if etcd still has it."""
        was = self.token
        self.token = None
        self._stop.set()
        if self.lease is not None:
            try:
                self.etcd.run(self.lease.revoke(), 2.0)
            except Exception:
                pass
        self.lease = None
        self.lost.set()
        if was is not None:
            self.log(f"stepped down (fencing token {was})")

    def incarnation(self, proposed: int) -> int:
        """The job's incarnation: the first leader's proposal, kept by every later one (the
        epochs go on, so the numbering they belong to does too)."""
        key, tx = self.root + b"incarnation", self.etcd.tx
        self.etcd.txn([tx.version(key) == 0], [tx.put(key, str(proposed).encode())])
        return int(self.etcd.get(key).value)


class EtcdKV(authstore.KV):
    """``authstore.KV`` whose every mutation is first committed to etcd (fenced), and whose
    reads come from the mirror; every request is refused once this replica stops leading."""

    # the in-memory step (``KV.abort_and_propose``) would skip etcd: the observer writes the
    # flag and the proposal apart here (NOTE [the next epoch in the abort flag] in control)
    abort_and_propose = None

    def __init__(self, replica: Replica):
        super().__init__()
        self.replica, self.prefix = replica, replica.root + b"kv/"
        self._wlock = threading.Lock()  # mutations in order: compute, commit, then apply
        self.commits = 0

    def load(self) -> int:
        """Fill the mirror from etcd (at takeover); returns the number of keys."""
        kvs = self.replica.etcd.get_prefix(self.prefix)
        n = len(self.prefix)
        with self._lock:
            self._d = {kv.key[n:]: kv.value for kv in kvs}
        return len(self._d)

    def apply(self, op: int, f: list[bytes]) -> tuple[int, list[bytes]]:
        if not self.replica.valid():
            raise Fenced("this replica no longer leads")
        if op not in WRITES:
            return super().apply(op, f)
        with self._wlock:
            d = self._d
            dels: list[bytes] = []
            if op == SET and len(f) == 2:
                puts, out = {f[0]: f[1]}, (OK, [])
            elif op == MSET and len(f) % 2 == 0:
                puts, out = dict(zip(f[0::2], f[1::2])), (OK, [])
            elif op == ADD and len(f) == 2:
                v = str(int(d.get(f[0], b"0")) + int(f[1])).encode()
                puts, out = ({f[0]: v} if int(f[1]) else {}), (OK, [v])
            elif op == CAS and len(f) == 3:
                cur = d.get(f[0])
                if (cur is None and f[1] == b"") or (cur is not None and cur == f[1]):
                    puts, out = {f[0]: f[2]}, (OK, [f[2]])
                else:  # no write: the caller learns the winner
                    return OK, [f[1] if cur is None else cur]
            elif op == DEL and len(f) == 1:
                dels, puts = ([f[0]] if f[0] in d else []), {}
                out = (OK, [b"1" if dels else b"0"])
            else:
                raise ValueError(f"malformed request: op {op} with {len(f)} fields")
            durable = {self.prefix + k: v for k, v in puts.items()
                       if not any(x in b"/" + k for x in VOLATILE)}
            if durable or dels:
                self.replica.commit(durable, [self.prefix + k for k in dels])
                self.commits += 1
            with self._lock:
                d.update(puts)
                for k in dels:
                    d.pop(k, None)
            self._wrote(puts)  # wake the store's waiters (authstore NOTE [scale])
            return out


# -- running a replica -----------------------------------------------------------------
def run_replica(args, token: str, make_coordinator, log) -> int:
    """``xvendor coordinator --store etcd://...``: campaign; lead (bind the ports, serve
    from etcd) until fenced or the lease lapses; step down; campaign again."""
    endpoints = parse_url(args.store)
    password = os.environ.get("XVENDOR_ETCD_PASSWORD") or None
    etcd = Etcd(endpoints, user=getattr(args, "etcd_user", None), password=password,
                tls=tls_from_args(args))
    me = {"pid": os.getpid(), "host": socket.gethostname(), "port": args.port,
          "name": getattr(args, "name", None) or f"{socket.gethostname()}:{args.port}"}
    replica = Replica(etcd, job_root(token), me, args.lease_ttl, log)
    log(f"replica {me['name']}: standby, campaigning on etcd {args.store}")
    try:
        while True:
            t0 = time.monotonic()
            rev = replica.campaign()
            took = time.monotonic() - t0
            kv = EtcdKV(replica)
            keys = kv.load()
            inc = replica.incarnation(int(time.time() * 1000) if args.incarnation is None
                                      else args.incarnation)
            log(f"replica {me['name']}: leading at {time.time():.3f} (fencing token {rev}, "
                f"lease TTL {replica.granted_ttl} s, {keys} keys adopted, campaigned "
                f"{took:.3f} s)")
            try:
                c = make_coordinator(kv, inc)
            except OSError as e:  # a port still held by someone: give the lead away
                log(f"replica {me['name']}: cannot bind ({e}); stepping down")
                replica.step_down()
                time.sleep(1.0)
                continue
            adopt(c)
            log(f"listening on {args.host}:{c.port} (store {c.store_port}), "
                f"min replicas {args.min_replicas}")
            try:
                c.serve(until=lambda: not replica.valid())
            except Fenced as e:
                log(f"replica {me['name']}: {e}")
            finally:
                c.close()
            why = "fenced" if replica.lost.is_set() else "lease lapsed"
            log(f"replica {me['name']}: no longer leads ({why}, {kv.commits} writes "
                f"committed); closed its ports, standing by")
            replica.step_down()
    except KeyboardInterrupt:
        replica.step_down()
        return 0
    finally:
        etcd.close()


def adopt(c) -> None:
    """A new leader's coordinator takes up the lanes the store already has (their epoch 0
    formed, their death notices), so it judges their members before they come back."""
    from . import control as cp
    from . import wire
    r = 0
    while c._client.prefixed(wire.job_prefix(c.token, r)).check([cp.key_epoch(0)]):
        lane = c.lane(r)
        # Heartbeat counters are not replicated: a member that never beats again (it died
        # while no replica led, so it has no link to close here either) must still be
        # judged. Each known member is credited one beat now; silence counts from here.
        for m in range(lane.verdicts.known_ids()):
            if m not in lane.verdicts.deaths and not lane.ctl.store.check([cp.key_left(m)]):
                lane.ctl.store.add(cp.key_hb(m), 1)
        r += 1


# -- a local etcd (tests, the bench, one machine) ----------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificates(folder: str, openssl: str | None = None) -> dict[str, str]:
    """A throw-away CA, a server certificate for 127.0.0.1/localhost and a client
    certificate signed by it, written as PEM files into ``folder`` with the ``openssl``
    command (for a local TLS etcd: tests, the bench). Returns their paths by name."""
    openssl = openssl or shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("no openssl binary on PATH (Debian: apt-get install openssl)")
    p = {n: os.path.join(folder, f"{n}.pem") for n in
         ("ca", "ca-key", "server", "server-key", "client", "client-key")}
    ext = os.path.join(folder, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n")
    cext = os.path.join(folder, "client.ext")
    with open(cext, "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")

    def run(*argv):
        subprocess.run([openssl, *argv], check=True, capture_output=True, timeout=60)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("req", "-x509", *key, "-keyout", p["ca-key"], "-out", p["ca"], "-days", "2",
        "-subj", "/CN=xvendor test CA")
    for who, extfile in (("server", ext), ("client", cext)):
        csr = os.path.join(folder, f"{who}.csr")
        run("req", "-new", *key, "-keyout", p[f"{who}-key"], "-out", csr,
            "-subj", f"/CN=xvendor test {who}")
        run("x509", "-req", "-in", csr, "-CA", p["ca"], "-CAkey", p["ca-key"],
            "-CAcreateserial", "-out", p[who], "-days", "2", "-extfile", extfile)
    return p


class LocalEtcd:
    """One etcd member on 127.0.0.1 in a temporary data dir, with the fast timings that
    allow a 1 s lease TTL (``--heartbeat-interval 50 --election-timeout 500``). With
    ``tls=True`` it serves clients over TLS only and requires a client certificate signed
    by its own throw-away CA (``self.tls``: the files a client needs)."""

    def __init__(self, binary: str | None = None, timeout_s: float = 30.0, tls: bool = False):
        self.binary = binary or shutil.which("etcd")
        if self.binary is None:
            raise FileNotFoundError("no etcd binary on PATH (Debian: apt-get install "
                                    "etcd-server)")
        self.dir = tempfile.mkdtemp(prefix="xv-etcd-")
        self.port, peer = _free_port(), _free_port()
        scheme = "https" if tls else "http"
        url, purl = f"{scheme}://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        secure, ctx, self.tls = [], None, None
        if tls:
            import ssl
            c = make_certificates(self.dir)
            self.tls = TLS(c["ca"], c["client"], c["client-key"])
            secure = ["--cert-file", c["server"], "--key-file", c["server-key"],
                      "--trusted-ca-file", c["ca"], "--client-cert-auth"]
            ctx = ssl.create_default_context(cafile=c["ca"])
            ctx.load_cert_chain(c["client"], c["client-key"])
        self.log = open(os.path.join(self.dir, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            [self.binary, "--name", "s1", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
             "--initial-cluster", f"s1={purl}", "--heartbeat-interval", "50",
             "--election-timeout", "500", "--auto-compaction-retention", "1", *secure],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"etcd://127.0.0.1:{self.port}"
        end = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1, context=ctx) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                self.close()
                raise RuntimeError(f"etcd did not become healthy on {url}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "LocalEtcd":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
