"""The coordinator's front door: a line-of-JSON protocol over one TCP connection per worker.

1. coordinator -> worker  ``{"coordinator": PROTO, "nonce": <hex>}``
2. worker -> coordinator  ``hello``: protocol, xvendor and torch versions, ``mac`` =
   HMAC-SHA256(token, nonce) (the token itself never crosses the wire), lane, replica id,
   restart count, lanes (processes per replica group), model fingerprint, pid, host;
   ``resume`` = a member id, from a worker that followed a new leading replica (its id,
   epochs and verdicts are in the replicated store): re-attached, no new id.
3. coordinator -> worker  ``{"ok": true, member, store_port, prefix, job_prefix, timing}`` or
   ``{"ok": false, "error": <why>}`` and the connection is closed.
4. worker -> coordinator  ``{"busy": s, "step": n, "epoch": e}`` per guarded step (straggler
   watch) and ``{"bye": true}`` before a clean close. A hello with ``"store_link": true``
   (granted when the reply says so too) turns the link into a store connection after the
   reply, the reports and goodbye going as store frames (NOTE [one link per member] in
   authstore): one descriptor per worker in the coordinator.

The connection stays open for the life of the worker: the kernel closes it when the process
dies (kill -9 included), which the coordinator sees at once, with no heartbeat to wait out.

The control-plane keys live under ``prefix``, derived from the token; the store itself
(``authstore``) serves only connections that prove the token the same way (nonce + HMAC).
Neither link is encrypted or authenticated per message after the proof: this keeps strays,
other jobs and anyone without the token out; it is no defence against someone who can read
and inject packets on the path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket

PROTO = 1


class Refused(RuntimeError):
    """The coordinator turned this worker away (wrong token, version or model)."""


def mac(token: str, nonce: str) -> str:
    return hmac.new(token.encode(), nonce.encode(), hashlib.sha256).hexdigest()


def job_prefix(token: str, lane: int | None) -> str:
    """Where a lane's control-plane keys live (``lane=None``: the keys every lane shares):
    unguessable without the token."""
    tag = hashlib.sha256(b"xvendor-job:" + token.encode()).hexdigest()[:16]
    return f"xvj/{tag}/l{lane}/" if lane is not None else f"xvj/{tag}/job/"


def new_nonce() -> str:
    return secrets.token_hex(16)


def send(sock: socket.socket, msg: dict) -> None:
    sock.sendall((json.dumps(msg) + "\n").encode())


class LineReader:
    """Splits a stream into JSON lines (a message may arrive in pieces)."""

    MAX_LINE = 1 << 16  # a hello is a few hundred bytes: a longer line is not our protocol

    def __init__(self):
        self._buf = b""

    def feed(self, data: bytes) -> list[dict]:
        self._buf += data
        out = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            out.append(json.loads(line))
        if len(self._buf) > self.MAX_LINE:
            raise ValueError(f"line longer than {self.MAX_LINE} bytes")
        return out

    def take(self) -> bytes:
        """What arrived after the last whole line (a link handed over: NOTE [one link per
        member] in authstore)."""
        rest, self._buf = self._buf, b""
        return rest


def recv_one(sock: socket.socket, reader: LineReader, timeout_s: float) -> dict:
    sock.settimeout(timeout_s)
    while True:
        data = sock.recv(4096)
        if not data:
            raise ConnectionError("the coordinator closed the connection")
        msgs = reader.feed(data)
        if msgs:
            return msgs[0]


def hello(token: str, nonce: str, *, lane: int, replica: str, restart: int,
          fingerprint: str | None, lanes: int = 1, resume: int | None = None,
          versions: tuple[str, str] | None = None) -> dict:
    """``versions``: (xvendor's, torch's) as the caller already knows them (the simulator's
    torch-free shards: NOTE [a torch-free control plane]); default: imported here."""
    if versions is None:
        import torch

        from .. import __version__
        versions = (__version__, torch.__version__)
    return {"proto": PROTO, "xvendor": versions[0], "torch": versions[1],
            "mac": mac(token, nonce), "lane": lane, "lanes": lanes, "replica": replica,
            "restart": restart,
            "fingerprint": fingerprint, "pid": os.getpid(), "host": socket.gethostname(),
            **({"resume": resume} if resume is not None else {})}


def check_hello(msg: dict, token: str, nonce: str, version: str) -> str | None:
    """Why this hello is refused, or None."""
    if msg.get("proto") != PROTO:
        return (f"protocol version mismatch: worker speaks {msg.get('proto')!r}, this "
                f"coordinator speaks {PROTO} (run the same xvendor on both)")
    if not hmac.compare_digest(str(msg.get("mac", "")), mac(token, nonce)):
        return "wrong token: XVENDOR_TOKEN (or --token-file) differs from the coordinator's"
    if msg.get("xvendor") != version:
        return (f"xvendor version mismatch: worker {msg.get('xvendor')!r}, coordinator "
                f"{version!r} (every worker and the coordinator must run the same release)")
    if not isinstance(msg.get("lane"), int) or msg["lane"] < 0:
        return f"lane must be a rank >= 0 within the replica group, got {msg.get('lane')!r}"
    lanes = msg.get("lanes", 1)
    if not isinstance(lanes, int) or lanes < 1 or (lanes > 1 and msg["lane"] >= lanes):
        return (f"lanes (processes per replica group, WORLD_SIZE) must be >= 1 and above the "
                f"lane, got lanes {lanes!r} for lane {msg['lane']}")
    return None
