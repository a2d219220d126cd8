"""The control-plane store's wire: constants, framing and the token proof, shared by the
server (``storeserver``), the map (``storekv``) and the clients (``authstore``). The
protocol and its NOTEs are described in ``authstore``'s docstring (the public module)."""

from __future__ import annotations

import hashlib
import hmac
import struct

MAGIC = b"XVS1"
MAX_FRAME = 4 << 20        # control-plane values are small (gloo addresses < 1 KiB)
MAX_CONNS = 4096


def max_conns() -> int:
    """Connections one listener holds: half the open-file limit (the front port and the store
    share it), less a reserve, and never below ``MAX_CONNS``. NOTE [scale]: a fixed 4096 turned
    every member past the 2048th away (each holds a front link and store links)."""
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MAX_CONNS, (soft - 256) // 2)
# NOTE [late hellos]: the window is the client's to answer in, not the server's to read in.
# Both handshake sweeps (here and the coordinator's front port) read what a client sent
# before closing it: a pass of the serving loop that runs past the window (a connect burst
# of thousands of members: greetings sent, hellos queued behind a backlog) closed clients
# whose answer sat unread in the kernel's buffer. A silent client is still closed.
HANDSHAKE_S = 5.0
_LEN = struct.Struct(">I")

SET, GET, ADD, CAS, CHECK, MGET, DEL, NUM, MSET, WAIT, BEAT = range(1, 12)
# only on a front link handed over to the store (NOTE [one link per member]): no reply
REPORT, BYE = 12, 13
# ``WAIT`` whose answer carries the present key's value: [index, value] (NOTE [one read])
WAITV = 14
MAX_WAIT_S = 10.0
OK, MISSING = 0, 1


def proof(token: str, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), b"xvendor-store:" + nonce, hashlib.sha256).digest()


def _pack(head: int, fields: list[bytes]) -> bytes:
    body = bytes([head]) + b"".join(_LEN.pack(len(f)) + f for f in fields)
    return _LEN.pack(len(body)) + body


def _unpack(body: bytes) -> tuple[int, list[bytes]]:
    if not body:
        raise ValueError("empty frame")
    head, fields, i = body[0], [], 1
    while i < len(body):
        if i + 4 > len(body):
            raise ValueError("truncated field length")
        (n,) = _LEN.unpack_from(body, i)
        if i + 4 + n > len(body):
            raise ValueError("field runs past the frame")
        fields.append(body[i + 4:i + 4 + n])
        i += 4 + n
    return head, fields


def _b(v) -> bytes:
    return v if isinstance(v, bytes) else bytes(v) if isinstance(v, (bytearray, list)) \
        else str(v).encode()


