"""Who receives the state when an epoch forms (``membership.plan_transfer``), from the
members' ready flags: "0" no state, "1:<step>" state at that committed step, "1:<step>:synced"
the group's state (the member formed an epoch before)."""

import threading
import time
from types import SimpleNamespace

import pytest

from xvendor.distributed import authstore as A
from xvendor.distributed import control as cp
from xvendor.distributed.control import EpochAborted
from xvendor.distributed.membership import meet, plan_transfer


@pytest.mark.l0
@pytest.mark.parametrize("flags, plan", [
    (["1:7:synced", "1:7:synced", "1:7:synced"], (0, [])),          # shrink: nothing sent
    (["1:7:synced", "0", "1:7:synced", "0"], (0, [1, 3])),           # grow: newcomers only
    (["0", "1:7:synced", "1:7"], (1, [0, 2])),                       # unsynced holder too
    (["1:0", "1:0", "1:0"], (0, [1, 2])),                            # founders: initial sync
    (["1:6:synced", "1:7:synced", "1:7:synced"], (1, [0])),          # one member behind
    (["1:7", "1:8", "0"], (1, [0, 2])),                              # most advanced leads
])
def test_state_goes_to_the_members_that_need_it(flags, plan):
    assert plan_transfer(flags) == plan


@pytest.mark.l0
def test_no_member_holding_state_plans_nothing():
    assert plan_transfer(["0", "0"]) == (None, [])


@pytest.mark.l0
def test_a_posted_transfer_plan_reads_back_as_plan_transfer_made_it():
    """NOTE [scale]: the plan the last member to arrive posts (receivers, or the ranks that
    keep their state when fewer) decodes to exactly what ``plan_transfer`` returned."""
    from xvendor.distributed.membership import decode_plan, encode_plan
    for flags in (["1:0"] * 5, ["1:7:synced"] * 4, ["1:7:synced", "0", "1:7:synced", "0"],
                  ["1:3", "1:5", "0"], ["0", "0"]):
        src, need = plan_transfer(flags)
        raw = encode_plan(src, need, len(flags))
        assert decode_plan(raw, len(flags)) == (src, need), flags
    assert len(encode_plan(0, list(range(1, 10000)), 10000)) < 40  # founders: "keep" [0]


class _CountingKV(A.KV):
    """A store that counts every request it serves."""

    served = 0

    def apply(self, op, f):
        self.served += 1
        return super().apply(op, f)


@pytest.mark.l1
def test_a_member_waiting_to_form_costs_no_requests_until_there_is_news():
    """NOTE [waits on news]: member 0 waits at epoch 0's formation for member 1, which
    never arrives; while nothing happens its wait is held on the server (it used to wake
    every 0.5 s for four requests); a clean departure of member 1 ends it at once."""
    kv = _CountingKV()
    server = A.StoreServer("t0k3n-news", "127.0.0.1", 0, kv)
    try:
        ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, "t0k3n-news", prefix="p"))
        rg = SimpleNamespace(ctl=ctl, member=0, timing=cp.Timing(), has_state=True, step=0,
                             stats={"epochs": []})
        box = {}

        def run():
            try:
                box["plan"] = meet(rg, 0, [0, 1], time.monotonic())
            except EpochAborted as e:
                box["aborted"] = (str(e), time.monotonic())
        th = threading.Thread(target=run, daemon=True)
        th.start()
        time.sleep(0.5)
        before = kv.served
        time.sleep(2.0)
        idle = kv.served - before
        assert idle <= 2, idle  # was ~16: a wake-up every 0.5 s, four requests each
        other = cp.Control(A.LocalStore(server.kv, prefix="p"))
        t0 = time.monotonic()
        other.mark_left(1)
        th.join(5)
        assert "aborted" in box and "[1] will not arrive" in box["aborted"][0], box
        assert box["aborted"][1] - t0 < 0.5, box["aborted"][1] - t0
    finally:
        server.close()


class _CountingStore(A.AuthStore):
    """The real client, counting the requests it sends."""

    sent = 0

    def _call(self, op, fields):
        self.sent += 1
        return super()._call(op, fields)


@pytest.mark.l1
@pytest.mark.timeout(60)
def _arrive_in_order(n: int, run) -> None:
    """``run(i)`` for members 0..n-1 on threads started 50 ms apart (the last decides)."""
    ths = []
    for i in range(n):
        ths.append(threading.Thread(target=run, args=(i,), daemon=True))
        ths[-1].start()
        time.sleep(0.05)
    for th in ths:
        th.join(10)


def test_forming_costs_three_requests_per_waiting_member():
    """NOTE [one read]: n members meet at an epoch over a real store; each one that waits
    for the plan sends its flag, its count and one wait whose answer carries the plan (it
    read the plan, the abort flag and both lists after each wake-up and the plan before its
    first wait: 7 or more); the last to arrive decides (check, read the flags, post)."""
    n = 6
    server = A.StoreServer("t0k3n-form", "127.0.0.1", 0)
    try:
        stores = [_CountingStore("127.0.0.1", server.port, "t0k3n-form", prefix="p")
                  for _ in range(n)]
        box = {}

        def run(i):
            rg = SimpleNamespace(ctl=cp.Control(stores[i]), member=i, timing=cp.Timing(),
                                 has_state=True, step=0, epoch=-1, stats={"epochs": []})
            box[i] = meet(rg, 0, list(range(n)), time.monotonic())
        for s in stores:
            s.sent = 0  # the connect's probe is not the formation's
        _arrive_in_order(n, run)
        assert len(box) == n and len({repr(v) for v in box.values()}) == 1, box
        sent = [s.sent for s in stores]
        assert all(x == 3 for x in sent[:-1]), sent
        assert sent[-1] <= 5, sent  # flag, count, check, read the flags, post the plan
    finally:
        server.close()


@pytest.mark.l1
def test_a_wait_can_answer_with_the_value():
    """``WAITV``: the index of the key that exists and its value, at once when it exists
    (timeout 0 asks which exists now), when it is written, or None at the timeout."""
    server = A.StoreServer("t0k3n-waitv", "127.0.0.1", 0)
    try:
        s = A.AuthStore("127.0.0.1", server.port, "t0k3n-waitv", prefix="p")
        assert s.wait_value(["a", "b"], 0) is None
        s.set("b", "vb")
        assert s.wait_value(["a", "b"], 0) == (1, b"vb")
        t0 = time.monotonic()
        threading.Timer(0.2, lambda: A.AuthStore("127.0.0.1", server.port, "t0k3n-waitv",
                                                 prefix="p").set("c", "vc")).start()
        assert s.wait_value(["c"], 5.0) == (0, b"vc")
        assert 0.15 < time.monotonic() - t0 < 2.0
        assert s.wait_value(["d"], 0.2) is None
        assert cp.Control(s).wait_value(["b"], 0, 0) == (0, "vb")
        assert cp.Control(A.LocalStore(server.kv, prefix="p")).wait_value(["b"], 0, 0) \
            == (0, "vb")
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_a_dead_decider_at_a_formation_is_replaced_by_one_late_claimant():
    """NOTE [late deciders]: every ready flag is in and the count reached ``n``, but the
    member whose addition reached it died before posting the plan. After ``hb_timeout_s``
    one waiting member claims the decision and posts the plan; the others learn it from
    their wait. Before, each waiting member checked all ``n`` flags on each wake-up."""
    n, waiting = 30, 6
    wide: list[int] = []

    class KV(A.KV):
        def apply(self, op, f):
            if len(f) >= n:  # a CHECK or MGET of every flag
                wide.append(op)
            return super().apply(op, f)

    server = A.StoreServer("t0k3n-lated", "127.0.0.1", 0, KV())
    try:
        box = {}

        def run(i):
            ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, "t0k3n-lated", prefix="p"))
            rg = SimpleNamespace(ctl=ctl, member=i, timing=cp.Timing(hb_timeout_s=0.5),
                                 has_state=True, step=0, epoch=-1, stats={"epochs": []})
            box[i] = meet(rg, 0, list(range(n)), time.monotonic())
        ths = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(waiting)]
        for th in ths:
            th.start()
        time.sleep(0.2)
        local = A.LocalStore(server.kv, prefix="p")
        for m in range(waiting, n):  # the others arrived; the last of them died at once
            local.set(cp.key_ready(m), cp.ready_value(0, "1:0"))
        local.add(cp.key_ready_count(0), n - waiting)
        for th in ths:
            th.join(10)
        assert len(box) == waiting and len({repr(v) for v in box.values()}) == 1, box
        assert box[0] == plan_transfer(["1:0"] * n)
        assert len(wide) <= 2, wide  # one claimant: one check, one read of the flags
    finally:
        server.close()


def _meet_all(stores, e: int, members: list[int], who=None, step=0) -> dict:
    """The members ``who`` (default: all) of epoch ``e`` (``members``) meet it, each on a
    thread of its own: {member: plan}."""
    box = {}

    def run(i):
        rg = SimpleNamespace(ctl=cp.Control(stores[i]), member=i, timing=cp.Timing(),
                             has_state=True, step=step, epoch=e - 1,
                             stats={"epochs": [1] if e else []})
        box[i] = meet(rg, e, members, time.monotonic())
    ths = [threading.Thread(target=run, args=(i,), daemon=True) for i in who or members]
    for th in ths:
        th.start()
    for th in ths:
        th.join(10)
    return box


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_ready_flags_are_one_key_a_member_whatever_the_number_of_epochs():
    """NOTE [one ready key a member]: each formation used to leave a ready key per member
    (``ready/<e>/<id>``) in the store for good; n keys now, however many epochs form."""
    n = 4
    server = A.StoreServer("t0k3n-ready", "127.0.0.1", 0)
    try:
        stores = [A.AuthStore("127.0.0.1", server.port, "t0k3n-ready", prefix="p")
                  for _ in range(n)]
        for e in range(4):
            box = _meet_all(stores, e, list(range(n)), step=e)
            assert len(box) == n and len({repr(v) for v in box.values()}) == 1, (e, box)
        ready = [k for k in server.kv._d if b"/ready/" in k]
        assert len(ready) == n, ready
        assert all(server.kv._d[k].startswith(b"3/") for k in ready), ready
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_a_flag_of_an_earlier_epoch_is_not_taken_for_the_next_one():
    """A member that formed epoch 0 and has not arrived at epoch 1 still holds epoch 0's
    flag under its key: the decider of epoch 1 (the count says n, the keys all exist)
    must wait for it, and the plan reads the flag it posted for epoch 1."""
    n = 3
    server = A.StoreServer("t0k3n-stale", "127.0.0.1", 0)
    try:
        stores = [A.AuthStore("127.0.0.1", server.port, "t0k3n-stale", prefix="p")
                  for _ in range(n)]
        local = A.LocalStore(server.kv, prefix="p")
        local.set(cp.key_ready(2), cp.ready_value(0, "1:0:synced"))  # epoch 0's, not 1's
        local.add(cp.key_ready_count(1), 1)  # a count that reaches n early (a hint only)
        box = {}
        th = threading.Thread(target=lambda: box.update(_meet_all(stores, 1, [0, 1, 2],
                                                                  who=[0, 1], step=5)),
                              daemon=True)
        th.start()  # members 0 and 1 arrive at epoch 1 (3 members: 0, 1 and 2)
        time.sleep(1.0)
        assert not box and not local.check([cp.key_plan(1)]), box  # no plan without 2
        late = _meet_all(stores, 1, [0, 1, 2], who=[2], step=5)
        th.join(10)
        assert late and box, (late, box)
        # every member synced at step 5 (member 2's epoch-0 flag said step 0): none receives
        assert late[2] == box[0] == box[1] == (0, [])
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_the_decider_of_an_epoch_deletes_the_previous_epochs_ready_count_and_claim():
    """NOTE [one claim key a decision]: once every member of epoch ``e`` posted its ready
    flag, nobody reads epoch ``e - 1``'s ready count or late claim: the member that posts
    ``e``'s plan deletes both (they stayed in the store for good)."""
    n = 4
    server = A.StoreServer("t0k3n-forget", "127.0.0.1", 0)
    try:
        stores = [A.AuthStore("127.0.0.1", server.port, "t0k3n-forget", prefix="p")
                  for _ in range(n)]
        stores[0].add(cp.key_ready_count(0), n)  # epoch 0's formation, and a late claim
        stores[0].set(cp.key_late("ready/0"), "1:3")
        box = {}

        def run(i):
            rg = SimpleNamespace(ctl=cp.Control(stores[i]), member=i, timing=cp.Timing(),
                                 has_state=True, step=0, epoch=0, stats={"epochs": []})
            box[i] = meet(rg, 1, list(range(n)), time.monotonic())
        ths = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(10)
        assert len(box) == n, box
        assert not stores[0].check([cp.key_ready_count(0)])
        assert not stores[0].check([cp.key_late("ready/0")])
        assert stores[0].check([cp.key_ready_count(1)])  # epoch 1's own: kept
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_a_death_the_record_already_excludes_wakes_no_one():
    """NOTE [news after the record]: after a kill the observer proposes the survivors'
    epoch with the count of death notices it knew (``news``); a survivor forming it waits
    from there, so the death it was proposed for is no news: 3 requests per waiting member
    (flag, count, wait), as without a death. Before, each waiting member's wait ended at
    once on that notice and it read the lists and waited again (8 requests)."""
    n = 5
    server = A.StoreServer("t0k3n-news", "127.0.0.1", 0)
    try:
        obs = cp.Control(A.LocalStore(server.kv, prefix="p"))
        obs.declare_dead(99, "killed")  # deadlist/0: the death epoch 1 was proposed for
        rec = {"members": list(range(n)), "news": obs.news_counts()}
        assert rec["news"] == [1, 0]
        stores = [_CountingStore("127.0.0.1", server.port, "t0k3n-news", prefix="p")
                  for _ in range(n)]
        box = {}

        def run(i):
            rg = SimpleNamespace(ctl=cp.Control(stores[i]), member=i, timing=cp.Timing(),
                                 has_state=True, step=0, epoch=0, stats={"epochs": []})
            box[i] = meet(rg, 1, rec["members"], time.monotonic(), rec["news"])
        for s in stores:
            s.sent = 0
        _arrive_in_order(n, run)
        assert len(box) == n, box
        sent = [s.sent for s in stores]
        assert all(x == 3 for x in sent[:-1]), sent
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_join_learns_from_its_wait_that_epoch_0_is_neither_aborted_nor_superseded():
    """NOTE [one read] in env.join: the wait for epoch 0 names the member's death notice,
    epoch 1 and epoch 0's abort flag ahead of epoch 0; answered with the record, none of
    them exists, so ``converge`` gets the record as checked and its first look sends no
    request. Answered with one of them (here: the member was declared dead), the record is
    read and ``converge`` looks for itself."""
    from xvendor.distributed import env

    server = A.StoreServer("t0k3n-join", "127.0.0.1", 0)
    try:
        obs = cp.Control(A.LocalStore(server.kv, prefix="p"))
        obs.propose(0, {"members": [3, 4], "joins": 0})

        class Cls:
            @classmethod
            def found(cls, host, port, member, known=None, **kw):
                return known

            @classmethod
            def newcomer(cls, *a, **kw):
                raise AssertionError("a founder")

        def link(member):
            return SimpleNamespace(host="127.0.0.1", store_port=server.port, prefix="p",
                                   member=member, timing=cp.Timing(), local_ip="127.0.0.1",
                                   replicated=False, args={"token": "t0k3n-join"})
        known = env.join(Cls, link(3))
        assert known[0] == 0 and known[1]["members"] == [3, 4]
        assert len(known) == 3 and known[2] is True
        obs.declare_dead(4, "gone")
        known = env.join(Cls, link(4))
        assert known[1]["members"] == [3, 4] and (len(known) == 2 or known[2] is False)
    finally:
        server.close()


@pytest.mark.l1
@pytest.mark.timeout(60)
def test_the_next_epoch_named_by_the_abort_flag_costs_no_request():
    """NOTE [the next epoch in the abort flag] (control): a member that read the flag (its
    watch's answer) takes the epoch it names on its first look; the look after that (the
    epoch turned out aborted too) asks the store as before."""
    from xvendor.distributed.membership import _next_epoch

    class Counting(A.KV):
        n = 0

        def apply(self, op, f):
            Counting.n += 1
            return super().apply(op, f)

        def first_present(self, keys):  # a wait's own look (WAITV)
            Counting.n += 1
            return super().first_present(keys)
    server = A.StoreServer("t0k3n-next", "127.0.0.1", 0, Counting())
    try:
        ctl = cp.Control(A.AuthStore("127.0.0.1", server.port, "t0k3n-next", prefix="p"))
        rec = {"members": [1, 2], "joins": 0, "epoch": 1}
        ctl.note_abort(0, cp.abort_value("member(s) [0] dead", (1, rec)))
        rg = SimpleNamespace(ctl=ctl, member=1)
        before = Counting.n
        assert _next_epoch(rg, 0) == (1, rec, True) and Counting.n == before
        assert _next_epoch(rg, 3) is None and Counting.n == before + 1  # not named: asked
        assert _next_epoch(rg, 0, from_flag=False) is None and Counting.n == before + 2
    finally:
        server.close()
