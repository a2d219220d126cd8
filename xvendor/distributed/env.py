"""Joining a job run by a ``Coordinator``, from the environment a launcher sets.

- ``XVENDOR_COORDINATOR=host:port`` the coordinator's front port (required); with a
                                    replicated coordinator (``--store etcd://``) every
                                    replica's, comma-separated: the worker follows whichever
                                    leads (``Link.follow``)
- ``XVENDOR_TOKEN``                 the job's shared token (required)
- ``XVENDOR_REPLICA_ID``            this replica group's name (default: host:pid, or with
                                    several processes per group torchrun's MASTER_ADDR:PORT)
- ``WORLD_SIZE``                    processes per replica group (torchrun): the lanes
- ``RANK``                          rank inside the replica group (torchrun): the lane
- ``TORCHELASTIC_RESTART_COUNT``    > 0: torchrun restarted this worker; it joins as a
                                    newcomer and receives the state from the survivors
- ``XVENDOR_FR_DIR``                where to dump the flight recorder on a failure
- ``XV_GLOO_HOST``                  the address gloo binds (default: this host's address on
                                    the route to the coordinator)
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import threading
import time

from . import membership, wire
from .control import Timing


def fingerprint(model) -> str:
    """SHA-256 of the model's parameter names, shapes and dtypes (not values): replicas that
    would build different reducers or state dicts get different fingerprints."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype};".encode())
    return h.hexdigest()


class Link:
    """This worker's connection to the coordinator: admission, then liveness (the socket
    stays open for the life of the process) and straggler reports.

    ``addresses``: every replica of a replicated coordinator; the one that answers leads
    (standbys do not listen). ``follow`` moves the link to a new leader under the same
    member id; the store clients made with this link (``control.connect(link=...)``) call it
    when their leader stops answering."""

    REQUEST_S = 3.0  # replicated: a store request unanswered this long -> follow the leader

    def __init__(self, host: str, port: int, token: str, *, lane: int = 0, replica: str = "",
                 restart: int = 0, fingerprint: str | None = None, timeout_s: float = 30.0,
                 lanes: int = 1, addresses: list[tuple[str, int]] | None = None):
        self.args = dict(host=host, port=port, token=token, lane=lane, replica=replica,
                         restart=restart, fingerprint=fingerprint, timeout_s=timeout_s,
                         lanes=lanes, addresses=addresses)
        self.addresses = list(addresses) if addresses else [(host, port)]
        self.replicated = len(self.addresses) > 1
        self.gen, self.follows = 0, []  # how often the link moved; seconds each move took
        self._lock = threading.Lock()
        self.fingerprint = fingerprint
        self._open(None, timeout_s)

    def _open(self, resume: int | None, timeout_s: float) -> None:
        """Be admitted (or, ``resume``: re-attach that member) by whichever address answers;
        with several, keep trying them for ``timeout_s``."""
        end, err = time.monotonic() + timeout_s, None
        while True:
            for host, port in self.addresses:
                try:
                    return self._handshake(host, port, resume,
                                           min(timeout_s, 3.0) if self.replicated else timeout_s)
                except (ConnectionError, OSError) as e:  # a standby, or a frozen old leader
                    err = e
            if not self.replicated or time.monotonic() > end:
                raise err
            time.sleep(0.05)

    def _handshake(self, host: str, port: int, resume: int | None, timeout_s: float) -> None:
        a = self.args
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise ConnectionError(f"cannot reach the coordinator at {host}:{port} "
                                  f"(XVENDOR_COORDINATOR): {e}") from e
        try:
            reader = wire.LineReader()
            greet = wire.recv_one(sock, reader, timeout_s)
            if "nonce" not in greet:
                raise wire.Refused(f"{host}:{port} is not an xvendor coordinator: {greet}")
            wire.send(sock, wire.hello(a["token"], greet["nonce"], lane=a["lane"],
                                       replica=a["replica"], restart=a["restart"],
                                       fingerprint=a["fingerprint"], lanes=a["lanes"],
                                       resume=resume))
            reply = wire.recv_one(sock, reader, timeout_s)
        except BaseException:
            sock.close()
            raise
        if not reply.get("ok"):
            sock.close()
            raise wire.Refused(f"the coordinator at {host}:{port} refused this worker: "
                               f"{reply.get('error')}")
        sock.settimeout(5.0)
        self._sock, self.host, self.port = sock, host, port
        self.local_ip = sock.getsockname()[0]  # the interface that reaches the coordinator
        self.member, self.store_port = int(reply["member"]), int(reply["store_port"])
        self.prefix, self.timing = reply["prefix"], Timing(**reply["timing"])
        self.job_prefix = reply["job_prefix"]  # keys shared by every lane (lanes.py)
        self.incarnation = reply.get("incarnation")  # the coordinator's (NOTE [incarnations])

    def current(self) -> tuple[int, str, int]:
        """(generation, host, store port) of the replica this link is attached to."""
        with self._lock:
            return self.gen, self.host, self.store_port

    def follow(self, seen_gen: int) -> tuple[int, str, int]:
        """The replica at generation ``seen_gen`` stopped answering: re-attach this member
        to whichever replica leads now (once, however many threads noticed), retried for
        the join timeout; a refusal (this member was declared dead meanwhile) is final."""
        with self._lock:
            if self.gen == seen_gen:
                t0, old = time.monotonic(), self._sock
                try:  # a moved link, not a death, should the old leader still read it
                    wire.send(old, {"bye": True})
                except OSError:
                    pass
                old.close()
                self._open(self.member, self.timing.join_timeout_s)
                self.gen += 1
                self.follows.append(time.monotonic() - t0)
            return self.gen, self.host, self.store_port

    def reopen(self) -> "Link":
        """A new admission (a new member id) for a process that was excluded."""
        self.close()
        return Link(**self.args)

    def lost(self, grace_s: float = 1.0) -> bool:
        """True if the coordinator closed this connection (it died or was restarted). It
        never sends after admitting, so a readable socket means end of stream."""
        end = time.monotonic() + grace_s
        while True:
            try:
                readable, _, _ = select.select([self._sock], [], [], 0.05)
                if readable and self._sock.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except OSError:
                return True
            if time.monotonic() > end:
                return False

    def reconnect(self) -> "Link":
        """Be admitted again by a restarted coordinator at the same address (the launcher
        restarts it); retried until the join timeout. A refusal is final."""
        self._sock.close()
        end = time.monotonic() + self.timing.join_timeout_s
        while True:
            try:
                return Link(**self.args)
            except (ConnectionError, OSError) as e:
                if time.monotonic() > end:
                    raise ConnectionError(f"the coordinator did not come back within "
                                          f"{self.timing.join_timeout_s} s: {e}") from e
                time.sleep(0.2)

    def report(self, epoch: int, step: int, busy_s: float) -> None:
        try:
            wire.send(self._sock, {"busy": round(busy_s, 6), "step": step, "epoch": epoch})
        except OSError:  # the coordinator is gone: the store calls will say so
            pass

    def close(self) -> None:
        try:
            wire.send(self._sock, {"bye": True})
        except OSError:
            pass
        self._sock.close()


def link_from_env(model=None) -> Link:
    env = os.environ
    addr = env.get("XVENDOR_COORDINATOR", "")
    addresses = []
    for part in addr.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"XVENDOR_COORDINATOR must be host:port[,host:port...] (every "
                             f"replica of a replicated coordinator), got {addr!r}")
        addresses.append((host, int(port)))
    token = env.get("XVENDOR_TOKEN", "")
    if not token:
        raise ValueError("XVENDOR_TOKEN is not set: every worker must present the job's token")
    lanes = int(env.get("WORLD_SIZE", "1"))
    # every process of a replica group must name it alike: torchrun's store address does
    default = (f"{env.get('MASTER_ADDR', socket.gethostname())}:{env.get('MASTER_PORT', '')}"
               if lanes > 1 else f"{socket.gethostname()}:{os.getpid()}")
    return Link(*addresses[0], token, lane=int(env.get("RANK", "0")), lanes=lanes,
                addresses=addresses if len(addresses) > 1 else None,
                replica=env.get("XVENDOR_REPLICA_ID", default),
                restart=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
                fingerprint=fingerprint(model) if model is not None else None)


def job_control(link: Link):
    """A control-plane client on the keys every lane of the job shares."""
    from . import control as cp
    return cp.Control(cp.connect(link.host, link.store_port, prefix=link.job_prefix,
                                 token=link.args["token"], link=link))


def join(cls, link: Link, **kw):
    """Found epoch 0 if the coordinator listed this member in it, else queue as a newcomer."""
    from . import control as cp
    ctl = cp.Control(cp.connect(link.host, link.store_port, prefix=link.prefix,
                                token=link.args["token"], link=link))
    t0 = time.monotonic()
    rec, checked = None, False
    # NOTE [one read]: the wait answers with the record. It also names this member's death
    # notice, epoch 1 and epoch 0's abort flag, ahead of epoch 0 (the first present
    # answers): answered with epoch 0, none of them exists, which is what ``converge``'s
    # first look would ask the store next (one request per founder less at a formation);
    # answered with one of them, the record is read and ``converge`` looks for itself.
    keys = [cp.key_dead(link.member), cp.key_epoch(1), cp.key_abort(0), cp.key_epoch(0)]
    while rec is None:
        got = ctl.wait_value(keys, 5.0, link.timing.slice_s)
        if got and got[0] == len(keys) - 1:
            rec, checked = cp.decode_record(got[1]), len(keys) == 4
        elif got is not None:
            rec = ctl.record(0)
            keys = [cp.key_epoch(0)]  # news came first: wait for the record alone
        if rec is None and time.monotonic() - t0 > link.timing.join_timeout_s:
            raise TimeoutError(f"member {link.member}: the coordinator formed no epoch 0 within "
                               f"{link.timing.join_timeout_s} s (fewer than --min-replicas?)")
    kw.setdefault("timing", link.timing)
    kw.setdefault("fr_dir", os.environ.get("XVENDOR_FR_DIR") or None)
    # gloo binds its device to XV_GLOO_HOST (loopback by default): across machines it must be
    # an address the peers can reach; the one that reaches the coordinator is such an address.
    os.environ.setdefault("XV_GLOO_HOST", link.local_ip)
    pg = kw.pop("replica_group", None)
    unit = None
    if pg is not None:  # several lanes per replica group: they act as one (lanes.py)
        from .lanes import ReplicaUnit
        unit = ReplicaUnit.create(pg, job_control(link), link.args["lane"],
                                  link.args["replica"], kw.get("device", "cpu"))
    args = dict(store_prefix=link.prefix, link=link, unit=unit, **kw)
    if link.member in rec["members"]:
        return cls.found(link.host, link.store_port, link.member,
                         known=(0, rec, True) if checked else (0, rec), **args)
    return cls.newcomer(link.host, link.store_port, link.member, **args)


def reconnect(rg) -> None:
    """The coordinator was restarted (its store, with every epoch, is gone): be admitted
    by the new one under a new id and form its epoch 0 with whoever else comes back
    (or queue, if it formed without this process). State is then synced from the most
    advanced member: a step some members committed just before the loss is kept, once.
    The step guard calls this (``rg.reconnect()``); a hand-written loop may too."""
    old = {k: getattr(rg, k) for k in ("listeners", "stats", "recorder", "get_state",
                                       "set_state", "timing", "fr_dir", "backend",
                                       "device", "strategy", "unit")}
    step = int(rg.step)
    rg._heartbeat.stop()
    if rg._torch_pg is not None:
        from .torch_pg import unregister
        unregister(rg._torch_pg)
    rg._retire_current()
    if rg._prev is not None:
        rg.plane.retire(rg._prev[0])
    link = rg.link.reconnect()
    # NOTE [re-initialised in place]: the user's loop and the adapters hold this object
    type(rg).__init__(rg, link.host, link.store_port, link.member,
                      get_state=old["get_state"], set_state=old["set_state"],
                      timing=old["timing"], fr_dir=old["fr_dir"], backend=old["backend"],
                      device=old["device"], strategy=old["strategy"],
                      store_prefix=link.prefix, link=link, unit=old["unit"])
    if rg.unit is not None:  # the same incarnation, its job-wide keys in the new store
        rg.unit.rebind(job_control(link))
    rg.listeners, rg.stats, rg.recorder, rg.step = (
        old["listeners"], old["stats"], old["recorder"], step)
    t0 = time.monotonic()
    while (rec := rg.ctl.record(0)) is None:
        if time.monotonic() - t0 > rg.timing.join_timeout_s:
            raise TimeoutError(f"member {rg.member}: the restarted coordinator formed no "
                               f"epoch 0 within {rg.timing.join_timeout_s} s")
        time.sleep(rg.timing.slice_s)
    if rg.member in rec["members"]:
        membership.converge(rg, after=-1, t0=t0)
    else:
        rg._queue(t0)
    rg.stats.setdefault("reconnects", []).append(time.monotonic() - t0)
