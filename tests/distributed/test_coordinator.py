"""The coordinator's front door and verdicts over real sockets on 127.0.0.1 (l1): refusals
(token, protocol, version, model), epoch 0 from whoever arrives, a dropped connection seen as
a death, straggler eviction from step reports. Plus the pure parts (l0)."""

import json
import socket
import time

import pytest

from xvendor.distributed import Coordinator, Refused, StragglerPolicy, Timing, wire
from xvendor.distributed.control import key_left
from xvendor.distributed.coordinator import main as coordinator_main
from drills.ddp_drill import ExactModel
from xvendor.distributed.env import Link, fingerprint, link_from_env

TOKEN = "right-token"


def raw_hello(c: Coordinator, **override) -> dict:
    """Speak the protocol by hand, to send what a real worker would not."""
    s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
    reader = wire.LineReader()
    greet = wire.recv_one(s, reader, 10)
    msg = wire.hello(TOKEN, greet["nonce"], lane=0, replica="x", restart=0, fingerprint=None)
    msg.update(override)
    wire.send(s, msg)
    reply = wire.recv_one(s, reader, 10)
    s.close()
    return reply


@pytest.mark.l1
def test_wrong_token_is_refused(coord):
    c = coord()
    with pytest.raises(Refused, match="wrong token"):
        Link("127.0.0.1", c.port, "not-the-token")
    assert any("wrong token" in r for r in c.refusals)
    assert c.lane(0).arrivals == []  # nothing of the stray reached the job's state


@pytest.mark.l1
def test_version_and_protocol_mismatch_are_refused(coord):
    c = coord()
    r = raw_hello(c, xvendor="0.0.1-other")
    assert not r["ok"] and "xvendor version mismatch" in r["error"] and "0.0.1-other" in r["error"]
    r = raw_hello(c, proto=99)
    assert not r["ok"] and "protocol version mismatch" in r["error"]
    r = raw_hello(c, lane=-1)
    assert not r["ok"] and "lane must be" in r["error"]
    assert raw_hello(c)["ok"]  # the same hello, unaltered, is admitted


@pytest.mark.l1
def test_a_different_model_is_refused(coord, wait_for):
    c = coord(min_replicas=2)
    fa, fb = fingerprint(ExactModel(37, 300)), fingerprint(ExactModel(38, 300))
    assert fa != fb and fa == fingerprint(ExactModel(37, 300))
    a = Link("127.0.0.1", c.port, TOKEN, fingerprint=fa)
    with pytest.raises(Refused, match="model mismatch in lane 0"):
        Link("127.0.0.1", c.port, TOKEN, fingerprint=fb)
    b = Link("127.0.0.1", c.port, TOKEN, fingerprint=fa, lane=1)  # lanes are separate
    c2 = Link("127.0.0.1", c.port, TOKEN, fingerprint=fa)
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0")
    assert c.lane(0).ctl.record(0)["members"] == [a.member, c2.member]
    for link in (a, b, c2):
        link.close()


@pytest.mark.l1
def test_epoch0_forms_from_whoever_arrives(coord, wait_for):
    c = coord(min_replicas=3, join_timeout_s=0.5)
    first = Link("127.0.0.1", c.port, TOKEN)
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0 after the join timeout")
    rec = c.lane(0).ctl.record(0)
    assert rec["members"] == [first.member] and "join timeout" in rec["why"]
    late = Link("127.0.0.1", c.port, TOKEN)  # after epoch 0: a newcomer, not a founder
    time.sleep(0.2)
    assert c.lane(0).ctl.record(0)["members"] == [first.member] and late.member != first.member
    first.close()
    late.close()


@pytest.mark.l1
def test_epoch0_of_every_lane_forms_from_the_same_whole_replica_groups(coord, wait_for):
    """Replica groups of 2 processes (lanes): a group counts only once both its lanes are in,
    and then every lane's epoch 0 lists the same groups. (Per lane, lane 0 would have formed
    from A and B as soon as B's rank 0 arrived, with B's rank 1 left a newcomer.)"""
    c = coord(min_replicas=2, join_timeout_s=60)

    def link(replica, lane):
        return Link("127.0.0.1", c.port, TOKEN, lane=lane, lanes=2, replica=replica)
    a0, a1, b0 = link("A", 0), link("A", 1), link("B", 0)
    time.sleep(0.3)
    assert c.lane(0).ctl.record(0) is None and c.lane(1).ctl.record(0) is None
    c0, c1 = link("C", 0), link("C", 1)
    wait_for(lambda: c.lane(1).ctl.record(0) is not None, what="epoch 0 of lane 1")
    assert c.lane(0).ctl.record(0)["members"] == [a0.member, c0.member]
    assert c.lane(1).ctl.record(0)["members"] == [a1.member, c1.member]
    assert "whole replica groups of 2" in c.lane(0).ctl.record(0)["why"]
    b1 = link("B", 1)  # after epoch 0: B joins whole, as a newcomer
    time.sleep(0.2)
    assert b1.member not in c.lane(1).ctl.record(0)["members"]
    with pytest.raises(Refused, match="lanes mismatch"):
        Link("127.0.0.1", c.port, TOKEN, lane=0, lanes=3, replica="D")
    r = raw_hello(c, lane=2, lanes=2)
    assert not r["ok"] and "lanes (processes per replica group" in r["error"]
    for x in (a0, a1, b0, b1, c0, c1):
        x.close()


@pytest.mark.l1
def test_a_dropped_connection_is_a_death_and_a_goodbye_is_not(coord, wait_for):
    c = coord(min_replicas=2)
    a, b = Link("127.0.0.1", c.port, TOKEN), Link("127.0.0.1", c.port, TOKEN)
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0")
    t0 = time.monotonic()
    a._sock.close()  # what the kernel does for a process killed with SIGKILL
    wait_for(lambda: a.member in c.deaths(), what="the death notice")
    print(f"dropped connection -> death notice in {time.monotonic() - t0:.3f} s")
    assert "closed without a goodbye" in c.deaths()[a.member]
    assert c.lane(0).ctl.aborted(0)  # the epoch that listed it is stopped for everyone
    b.close()  # a clean leave
    time.sleep(0.3)
    assert b.member not in c.deaths()


@pytest.mark.l1
def test_the_coordinator_proposes_the_survivors_epoch_itself(coord, wait_for):
    """NOTE [the observer proposes the shrink] (verdicts): a death makes the coordinator
    propose the next epoch of the survivors, with no member doing anything; a second death
    stops that one and proposes the next; a clean leave proposes nothing."""
    c = coord(min_replicas=3)
    a, b, d = (Link("127.0.0.1", c.port, TOKEN) for _ in range(3))
    ctl = c.lane(0).ctl
    wait_for(lambda: ctl.record(0) is not None, what="epoch 0")
    a._sock.close()
    wait_for(lambda: ctl.record(1) is not None, what="epoch 1, proposed by the coordinator")
    rec = ctl.record(1)
    assert rec["members"] == [b.member, d.member], rec
    assert "proposed by the observer" in rec["why"] and rec["incarnation"] == c.incarnation
    assert ctl.aborted(0) and not ctl.aborted(1)
    d._sock.close()
    wait_for(lambda: ctl.record(2) is not None, what="epoch 2")
    assert ctl.record(2)["members"] == [b.member] and ctl.aborted(1)
    b.close()
    time.sleep(0.3)
    assert ctl.record(3) is None


@pytest.mark.l1
def test_the_abort_flag_names_the_survivors_epoch(coord, wait_for):
    """NOTE [the next epoch in the abort flag] (control): the flag the coordinator sets at a
    death carries the epoch it proposed with it, so a survivor that read the flag needs no
    request to find it; two deaths seen together still make one epoch."""
    from xvendor.distributed.control import key_abort, split_abort
    c = coord(min_replicas=4)
    a, b, d, f = (Link("127.0.0.1", c.port, TOKEN) for _ in range(4))
    ctl = c.lane(0).ctl
    wait_for(lambda: ctl.record(0) is not None, what="epoch 0")
    a._sock.close()
    wait_for(lambda: ctl.record(1) is not None, what="epoch 1")
    why, nxt = split_abort(ctl.get(key_abort(0)))
    assert why.startswith(f"member(s) [{a.member}] dead") and "goodbye" in why, why
    assert nxt == (1, ctl.record(1)) and nxt[1]["members"] == [b.member, d.member, f.member]
    b._sock.close()
    d._sock.close()  # together: one pass of the coordinator's loop sees both, mostly
    wait_for(lambda: {b.member, d.member} <= set(c.deaths()), what="both deaths")
    wait_for(lambda: ctl.latest_epoch() >= 2 and f.member in ctl.record(ctl.latest_epoch())
             ["members"] and len(ctl.record(ctl.latest_epoch())["members"]) == 1,
             what="the epoch of the last survivor")
    e = ctl.latest_epoch()
    why, nxt = split_abort(ctl.get(key_abort(e - 1)))
    assert nxt == (e, ctl.record(e)), (why, nxt)
    f.close()


@pytest.mark.l1
def test_a_verdict_on_one_lane_evicts_the_whole_replica_group(coord, wait_for):
    """NOTE [a replica group is evicted whole]: group A's lane-1 process dies (no goodbye);
    the coordinator declares A's lane-0 process dead too, naming why; B is untouched, and a
    mate that left cleanly is not declared."""
    logged = []
    c = coord(min_replicas=2)
    c._log = logged.append

    def link(replica, lane):
        return Link("127.0.0.1", c.port, TOKEN, lane=lane, lanes=2, replica=replica)
    a0, a1, b0, b1 = link("A", 0), link("A", 1), link("B", 0), link("B", 1)
    wait_for(lambda: c.lane(1).ctl.record(0) is not None, what="epoch 0")
    a1._sock.close()
    wait_for(lambda: a0.member in c.deaths(0), what="the mate's eviction")
    assert a1.member in c.deaths(1) and "closed without a goodbye" in c.deaths(1)[a1.member]
    why = c.deaths(0)[a0.member]
    assert "replica group 'A' (restart 0) lost its lane 1" in why and "goodbye" in why, why
    assert b0.member not in c.deaths(0) and b1.member not in c.deaths(1)
    assert any("replica 'A', restart 0) declared dead" in m for m in logged), logged
    c.lane(0).ctl.store.set(key_left(b0.member), "1")      # B's lane 0 leaves cleanly...
    b0.close()
    b1._sock.close()                                        # ...then its lane 1 drops
    wait_for(lambda: b1.member in c.deaths(1), what="B's lane-1 death")
    time.sleep(0.3)
    assert b0.member not in c.deaths(0)
    a0.close()


@pytest.mark.l1
def test_straggler_is_evicted_after_k_consecutive_slow_steps(coord, wait_for):
    c = coord(min_replicas=3, straggler=StragglerPolicy(factor=3.0, steps=3, min_s=0.1))
    links = [Link("127.0.0.1", c.port, TOKEN) for _ in range(3)]
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0")
    fast, slow = 0.02, 0.5
    pattern = {0: [fast] * 8, 1: [fast] * 8,
               2: [slow, fast, slow, slow, fast, slow, slow, slow]}  # 3 in a row only at 5..7
    for step in range(8):
        for i, link in enumerate(links):
            link.report(0, step, pattern[i][step])
        time.sleep(0.05)
        victim = links[2].member
        if step < 7:
            time.sleep(0.1)
            assert victim not in c.deaths(), f"evicted early, at step {step}"
    wait_for(lambda: links[2].member in c.deaths(), what="the straggler's eviction")
    why = c.deaths()[links[2].member]
    assert "straggler" in why and "3 consecutive steps" in why and "0.500" in why, why
    assert set(c.deaths()) == {links[2].member}
    for link in links:
        link.close()


@pytest.mark.l1
def test_cli_refuses_to_start_without_a_token(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("XVENDOR_TOKEN", raising=False)
    assert coordinator_main(["--port", "0", "--host", "127.0.0.1"]) == 2
    assert "XVENDOR_TOKEN" in capsys.readouterr().err
    empty = tmp_path / "token"
    empty.write_text("\n")
    assert coordinator_main(["--port", "0", "--token-file", str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err


@pytest.mark.l0
def test_env_errors_name_the_variable(monkeypatch):
    monkeypatch.setenv("XVENDOR_COORDINATOR", "no-port-here")
    with pytest.raises(ValueError, match="XVENDOR_COORDINATOR must be host:port"):
        link_from_env()
    monkeypatch.setenv("XVENDOR_COORDINATOR", "127.0.0.1:1")
    monkeypatch.delenv("XVENDOR_TOKEN", raising=False)
    with pytest.raises(ValueError, match="XVENDOR_TOKEN is not set"):
        link_from_env()


@pytest.mark.l0
def test_wire_pieces():
    r = wire.LineReader()
    assert r.feed(b'{"a": 1}\n{"b"') == [{"a": 1}]
    assert r.feed(b': 2}\n') == [{"b": 2}]
    with pytest.raises(ValueError, match="longer than"):
        wire.LineReader().feed(b"x" * (wire.LineReader.MAX_LINE + 1))
    assert wire.mac("t", "n") != wire.mac("u", "n")
    assert wire.job_prefix("t", 0) != wire.job_prefix("u", 0) != wire.job_prefix("t", 1)
    hello = {"proto": wire.PROTO, "mac": wire.mac("t", "n"), "xvendor": "v", "lane": 0}
    assert wire.check_hello(hello, "t", "n", "v") is None
    assert "wrong token" in wire.check_hello(hello, "u", "n", "v")
    json.dumps(hello)


@pytest.mark.l0
def test_coordinator_argument_errors():
    with pytest.raises(ValueError, match="token must be a non-empty"):
        Coordinator("", "127.0.0.1", 0)
    with pytest.raises(ValueError, match="min_replicas must be >= 1"):
        Coordinator("t", "127.0.0.1", 0, min_replicas=0)
    assert Timing().hb_timeout_s > 0


@pytest.mark.l1
def test_the_incarnation_is_in_every_epoch_record_and_reply(coord, wait_for):
    c = coord(incarnation=41)
    link = Link("127.0.0.1", c.port, TOKEN, replica="a")
    wait_for(lambda: c.lane(0).ctl.record(0) is not None, what="epoch 0")
    assert link.incarnation == 41 and c.lane(0).ctl.record(0)["incarnation"] == 41
    link.close()
