"""How a ``ResilientGroup`` agrees on an epoch and forms it: the membership half of
``group`` (functions over the group object, as ``env.reconnect`` is).

``converge`` loops until this member belongs to a formed epoch newer than ``after``: it
reads the latest proposed epoch, forms it (``form``) when it is not aborted, and otherwise
waits for the verdict on who failed and proposes the survivors (first proposal wins,
``Control.propose``). ``form`` meets the epoch's members through their ready flags (each
says whether its member holds state, at which committed step, and whether that state is the
group's: ``ready_flag``), builds the group on a helper thread that keeps reading the abort
flag (``build``), and sends step and state from the most advanced member that holds state to
the members that need it, and only to them (``sync_state``). A member found dead, or absent
from the latest epoch, is excluded (``ResilientGroup._exclude`` raises ``Excluded``).

NOTE [who needs the state]: a member that formed an epoch before holds the group's state:
since then its state changed only by committed steps, and every member of an epoch commits
the same steps (one verdict per step, ``stepguard``). So at a shrink, where every survivor
holds the group's state at the same step, nothing is sent at all; at a grow only the
newcomers receive it; a member behind the most advanced one (possible only after a
coordinator restart, when some committed a step the others did not) receives it too.
Founders of a first epoch have never been synced: all but the source receive the state
(the initial sync, so replicas that initialised differently start equal).
"""

from __future__ import annotations

import io
import json
import threading
import time


from . import control as cp
from .control import EpochAborted


def converge(rg, after: int, t0: float, known: tuple[int, dict] | None = None) -> None:
    """Return once ``rg`` is a member of a formed epoch newer than ``after``. ``known``:
    an epoch and its record the caller just read (``env.join``: epoch 0), so that its first
    look reads neither again (NOTE [one read])."""
    settle: dict[int, float] = {}
    from_flag = True  # the abort flag's next epoch: tried once (it may be aborted too)
    while True:
        if time.monotonic() - t0 > rg.timing.join_timeout_s:
            raise RuntimeError(f"member {rg.member}: membership did not converge within "
                               f"{rg.timing.join_timeout_s} s")
        if known is None and after >= 0:  # NOTE [one read]: the next epoch in one request
            known, from_flag = _next_epoch(rg, after, from_flag), False
        if known is not None:
            (e, rec, checked), known = (tuple(known) + (False,))[:3], None
            if e > after and rg.member in rec["members"] and (checked or rg.ctl.wait_value(
                    [cp.key_dead(rg.member), cp.key_epoch(e + 1), cp.key_abort(e)],
                    0, 0) is None):
                try:  # not dead, no newer epoch, not aborted: checked in one request
                    form(rg, e, rec)
                    return
                except EpochAborted:
                    rg._retire_current()
                    continue
        if rg.ctl.is_dead(rg.member):
            rg._exclude(f"member {rg.member} was declared dead: "
                        f"{rg.ctl.get(cp.key_dead(rg.member))}")
        latest = rg.ctl.latest_epoch()
        rec = rg.ctl.record(latest)
        if rg.member not in rec["members"]:
            rg._exclude(f"member {rg.member} is not in epoch {latest} {rec['members']}")
        if latest > after and not rg.ctl.aborted(latest):
            try:
                form(rg, latest, rec)
                return
            except EpochAborted:
                rg._retire_current()
                continue
        rg.ctl.abort(latest, f"member {rg.member} left epoch {latest}")
        gone = departed(rg, rec["members"])
        first = settle.setdefault(latest, time.monotonic())
        if not gone and time.monotonic() - first < rg.timing.hb_timeout_s + rg.timing.margin_s:
            time.sleep(rg.timing.slice_s)  # wait for the agent's verdict on who failed
            continue
        rg._dump(latest, rec["members"])
        rg.ctl.propose(latest + 1, {"members": [m for m in rec["members"] if m not in gone],
                                    "joins": rec.get("joins", 0),
                                    # the notices ``departed`` read (NOTE [news after the
                                    "news": [rg.ctl._dead_seen, rg.ctl._left_seen],  # record])
                                    "why": f"shrink after epoch {latest}: {sorted(gone)}"})


def _next_epoch(rg, after: int, from_flag: bool = True) -> tuple[int, dict, bool] | None:
    """Epoch ``after + 1`` and its record when it is the latest one, not aborted, and this
    member is not dead: one request (``Control.wait_value`` with timeout 0 on the death
    notice, epoch ``after + 2``, the abort flag of ``after + 1`` and epoch ``after + 1``:
    the first present answers), where the general look costs five or more (death notice,
    latest hint, probes, record, abort flag).
    The observer proposes the survivors' epoch (NOTE [the observer proposes the
    shrink] in verdicts), so after a failure this is what survivors usually find; and it
    names that epoch in the abort flag it sets, so a member that read the flag (its
    heartbeat's watch did) has it without a request (NOTE [the next epoch in the abort
    flag] in control: the checks of the request are then the formation's own: an aborted
    epoch ends ``meet``, a member not in the record is excluded by ``converge``)."""
    nxt = rg.ctl.next_from_abort(after) if from_flag else None
    if nxt is not None and nxt[0] == after + 1:
        return after + 1, nxt[1], True
    got = rg.ctl.wait_value([cp.key_dead(rg.member), cp.key_epoch(after + 2),
                             cp.key_abort(after + 1), cp.key_epoch(after + 1)], 0, 0)
    if not got or got[0] != 3:
        return None
    return after + 1, cp.decode_record(got[1]), True


class LateDecider:
    """Whether this member is the late decider of a count (NOTE [late deciders]): at most
    one claim attempt per ``period_s`` round after ``period_s`` passed, each one request
    (the count) plus one or two more (the claim) once the count reached ``n``. ``what``
    names the decision (``ready/<e>``, ``vote/<e>/<s>``).

    NOTE [one claim key a decision]: the claim is one key, ``late/<what>``, whose value is
    ``<round>:<member>``: a round's first claimant sets it (from empty, or over an earlier
    round's claim: compare-and-set on the value it read back), so a round has one winner
    and the next round replaces it. It used to be one key a round (``late/<what>/<round>``),
    which nobody could delete without knowing which rounds ran; one key is deleted with
    the count when the decision is over (``forget_decision``)."""

    def __init__(self, store, count_key: str, what: str, n: int, me: int, period_s: float):
        self.store, self.count_key, self.what, self.n = store, count_key, what, n
        self.me, self.period = str(me), max(period_s, 1e-3)
        self.began, self.round = time.monotonic(), 0

    def next_at(self) -> float:
        """When this member may try its next claim."""
        return self.began + (self.round + 1) * self.period

    def claims(self) -> bool:
        """True if this member won a round's claim now (it then decides)."""
        now = time.monotonic()
        if now < self.next_at():
            return False
        self.round = int((now - self.began) / self.period)
        if int(self.store.add(self.count_key, 0)) < self.n:
            return False
        key, mine = cp.key_late(self.what), f"{self.round}:{self.me}"
        won = _text(self.store.compare_set(key, "", mine))
        if won != mine and _claim_round(won) < self.round:  # an earlier round's claimant
            won = _text(self.store.compare_set(key, won, mine))
        return won == mine


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _claim_round(value: str) -> int:
    head = value.split(":", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def forget_decision(store, count_key: str, what: str) -> None:
    """Delete a finished decision's count and late claim (NOTE [one claim key a decision]):
    called by the member that posted the decision after the one it follows, once nobody can
    read them any more (``stepguard.verdict``: step ``s - 1``'s once every vote of ``s`` is
    in; ``_decide``: epoch ``e - 1``'s ready count once every member of ``e`` is ready)."""
    store.delete_key(count_key)
    store.delete_key(cp.key_late(what))


def meet(rg, e: int, members: list[int], t0: float,
         news=None) -> tuple[int | None, list[int]]:
    """Post this member's ready flag for epoch ``e``, wait until every member posted its
    own, and return the epoch's transfer plan (``plan_transfer`` over the flags, in rank
    order); ``EpochAborted`` when a member will not arrive or the epoch is aborted.

    NOTE [scale]: every member polls while it waits. Checking all ``n`` ready keys on each
    poll, then reading all ``n`` flags, made one formation O(n^2) store work (measured with
    ``bench/sim_members.py``: 1,000 members took 30 s to form epoch 0 and never formed the
    next one within 90 s). Now each member adds 1 to ``readyn/<e>`` after its flag; the
    member whose addition reaches ``n`` (the last to arrive) checks the keys, reads the flags
    once, computes the plan and posts it (``plan/<e>``, first proposal wins); the others
    poll that one small key. The count is a hint only (a request repeated on a new leading
    replica may add twice): the keys decide, whoever sees a count of ``n`` or more may
    decide, and after ``hb_timeout_s`` one waiting member a round may (NOTE [late
    deciders]).
    On the coordinator's store the others do not poll but wait on the server for the plan
    key or the abort flag (``Control.wait_any``).

    NOTE [late deciders]: that fallback used to start after one second. A decider that
    died aborts the epoch (its death notice does, within ``hb_timeout_s``), so waiting that
    long loses nothing; but under a slow store a second passed often, and then every member
    checked and read all ``n`` flags on every wake-up: O(n^2) store work exactly when the
    store was already behind (the steps of 1,000 simulated members on a loaded machine,
    bench/sim_members.py). The same holds for the votes (``stepguard.verdict``).
    Waiting ``hb_timeout_s`` was not enough: past it, every waiting member still read the
    count and, once it was ``n``, checked all ``n`` keys on each wake-up while the decider
    was slow (not dead): O(n) per member per wake-up, O(n^2) per step (at 10,000 simulated
    members every shard was inside these checks). Now a late member takes a claim first
    (``LateDecider``): once per ``hb_timeout_s`` round, a member whose wait found no
    decision reads the count (one request) and, if it is ``n`` or more, proposes itself
    for the round's claim key (first proposal wins); only the round's winner checks and
    reads the ``n`` keys. A winner that dies is replaced the next round. O(1) requests per
    waiting member a round, one O(n) check a round, and no key list built by members that
    do not decide.

    NOTE [waits on news]: the wait used to end every 0.5 s so that a member that left
    cleanly (which aborts nothing) was seen; each wake-up cost a waiting member four
    requests (plan, abort flag, death and left lists), 8 a second for as long as the
    formation took: 30 control requests per survivor to form one shrink of 3,000 simulated
    members, most of them these. The wait now includes the keys of the next death and
    departure notices (``Control.news_keys``): it ends when there is news, or after 5 s.

    NOTE [news after the record]: an epoch record proposed after deaths lists the count of
    death and departure notices its proposer knew (``news``); none of those members is in
    it, so they are no news to a member forming it. The wait starts at that count. Before,
    after a kill every survivor's wait ended at once on the very death the new epoch was
    proposed for, and each read the lists (count, notice, reason, departures) and waited
    again: 5 requests per survivor, 50,000 at 10,000 members on the store's one thread
    (bench/sim_members.py)."""
    n, store = len(members), rg.ctl.store
    store.set(cp.key_ready(rg.member), cp.ready_value(e, ready_flag(rg)))
    mine, polls, waited = int(store.add(cp.key_ready_count(e), 1)), 0, False
    plan_key, abort_key = cp.key_plan(e), cp.key_abort(e)
    late = LateDecider(store, cp.key_ready_count(e), f"ready/{e}", n, rg.member,
                       rg.timing.hb_timeout_s)  # NOTE [late deciders]
    if getattr(store, "wait_value", None) is not None:  # NOTE [one read]
        return _meet_on_news(rg, e, members, mine >= n, late, t0, news)
    decider, keys = mine >= n, None
    while True:
        raw = rg.ctl.get(plan_key)
        if raw is not None:
            return decode_plan(raw, n)
        decider = decider or late.claims()
        if decider and (flags := _arrived(store, e, keys := keys or _ready_keys(members))):
            return _decide(rg, e, flags, n)
        polls += 1
        if waited or polls % 4 == 0:  # polling: deaths and aborts every 4th time
            if rg.ctl.aborted(e):
                raise EpochAborted(f"epoch {e} aborted while forming")
            gone = departed(rg, members)
            if gone or time.monotonic() - t0 > rg.timing.join_timeout_s:
                rg.ctl.abort(e, f"members {sorted(gone)} will not arrive at epoch {e}")
                raise EpochAborted(f"epoch {e}: members {sorted(gone)} will not arrive")
        # the plan, an abort, the next death or departure notice wake this at once (NOTE
        # [waits on news]); the timeout only bounds the join-timeout check
        waited = rg.ctl.wait_any([plan_key, abort_key, *rg.ctl.news_keys(news)], 5.0,
                                 rg.timing.slice_s / 4)


def _ready_keys(members: list[int]) -> list[str]:
    return [cp.key_ready(m) for m in members]


def _arrived(store, e: int, keys: list[str]) -> list[str] | None:
    """Every member's ready flag for epoch ``e``, or None while one has not posted it.

    NOTE [one ready key a member]: a flag was one key per member per epoch
    (``ready/<e>/<id>``), never deleted: n keys more in the store at every formation, for
    the job's life (10,000 at each shrink of 10,000 simulated members). Deleting them would
    cost a request per member per formation, or n by one member. Now each member has one
    key, ``ready/<id>``, overwritten at each formation with ``<e>/<flag>``: the decider reads
    them all (it did already, once every key existed) and decides only when every value is
    epoch ``e``'s. A value of an older epoch: that member has not arrived; of a newer one:
    it left ``e``'s formation, which then has its plan or its abort flag, and the decider's
    wait sees either. No request more than before, and n keys in all."""
    if not store.check(keys):  # before a member's first formation its key does not exist
        return None
    return cp.ready_flags(store.multi_get(keys), e)


def _decide(rg, e: int, flags: list[str], n: int) -> tuple[int | None, list[int]]:
    """Every ready flag is in (``_arrived``): post the plan (first proposal wins)."""
    store = rg.ctl.store
    src, needers = plan_transfer(flags)
    won = store.compare_set(cp.key_plan(e), "", encode_plan(src, needers, n)).decode()
    if e > 0:  # every member of ``e`` left ``meet`` of ``e - 1`` (NOTE [one claim key a
        forget_decision(store, cp.key_ready_count(e - 1), f"ready/{e - 1}")  # decision])
    return decode_plan(won, n)


def _meet_on_news(rg, e: int, members: list[int], decider: bool, late: LateDecider,
                  t0: float, news=None) -> tuple[int | None, list[int]]:
    """``meet`` on the coordinator's store, after the flag and the count.

    NOTE [one read]: a member waiting for the plan learns from the wait itself which key
    ended it, and the plan's value with it (``Control.wait_value``, one request): a plan is
    returned, an abort raised, news of a death or departure read (``departed``); only a
    timeout or news costs more. Before, every wake-up read the plan, the abort flag and both
    lists (four requests) and the first look read the plan before waiting: 7-8 requests per
    member to form an epoch, 3 now when nothing happens (flag, count, wait). Likewise
    ``converge`` with ``known`` (``env.join`` read epoch 0 from its wait: the record, O(n)
    bytes, is read once per member, not twice: O(n^2) bytes in all at a formation)."""
    n, store, keys = len(members), rg.ctl.store, None
    plan_key, abort_key = cp.key_plan(e), cp.key_abort(e)
    while True:
        decider = decider or late.claims()  # NOTE [late deciders]
        if decider and (flags := _arrived(store, e, keys := keys or _ready_keys(members))):
            return _decide(rg, e, flags, n)
        wait = min(5.0, max(rg.timing.slice_s, late.next_at() - time.monotonic()))
        got = rg.ctl.wait_value([plan_key, abort_key, *rg.ctl.news_keys(news)],
                                0.5 if decider else wait, rg.timing.slice_s / 4)
        if got is not None and got[0] == 0:
            return decode_plan(got[1], n)
        if got is not None and got[0] == 1:
            raise EpochAborted(f"epoch {e} aborted while forming")
        gone = departed(rg, members)  # news, or 5 s passed
        if gone or time.monotonic() - t0 > rg.timing.join_timeout_s:
            rg.ctl.abort(e, f"members {sorted(gone)} will not arrive at epoch {e}")
            raise EpochAborted(f"epoch {e}: members {sorted(gone)} will not arrive")


def encode_plan(src: int | None, needers: list[int], n: int) -> str:
    """A transfer plan as posted under ``plan/<e>``: the receivers, or the ranks that keep
    their state when fewer (founders: all but the source receive)."""
    if src is None:
        return json.dumps({"src": None})
    keep = sorted(set(range(n)) - set(needers))
    return json.dumps({"src": src, "need": needers} if len(needers) <= len(keep)
                      else {"src": src, "keep": keep})


def decode_plan(raw: str, n: int) -> tuple[int | None, list[int]]:
    p = json.loads(raw)
    if p["src"] is None:
        return None, []
    if "need" in p:
        return p["src"], list(p["need"])
    keep = set(p["keep"])
    return p["src"], [r for r in range(n) if r not in keep]


def departed(rg, members: list[int]) -> set[int]:
    """The members that died (a verdict) or left cleanly."""
    dead, left = rg.ctl.dead(), rg.ctl.left()  # NOTE [scale]: O(1) requests, not O(members)
    return {m for m in members if m in dead or m in left}


def form(rg, e: int, rec: dict) -> None:
    """Meet epoch ``e``'s members, build its group, sync step and state; ``EpochAborted``
    when a member will not arrive or the epoch is aborted meanwhile."""
    members = rec["members"]
    t0 = time.monotonic()
    src, needers = meet(rg, e, members, t0, rec.get("news"))  # NOTE [news after the record]
    t_ready = time.monotonic()
    if src is None:
        raise RuntimeError(f"epoch {e}: no member holds state (members {members})")
    prev, prev_members = rg._prev or (None, [])
    rg._prev = None
    rg.epoch, rg.rank, rg.members, rg.record = e, members.index(rg.member), members, rec
    try:
        rg.pg = build(rg, e, members, prev, prev_members)
    except RuntimeError as err:
        rg.ctl.abort(e, f"member {rg.member}: group creation failed: {err}")
        raise EpochAborted(f"epoch {e}: group creation failed: {err}") from err
    t_built = time.monotonic()
    sent = sync_state(rg, src, needers)
    rg.has_state = True
    rg.stats["epochs"].append({"epoch": e, "members": members, "rank": rg.rank,
                               "ready_s": round(t_ready - t0, 4),
                               "build_s": round(t_built - t_ready, 4),
                               "sync_s": round(time.monotonic() - t_built, 4),
                               "state_to": [members[r] for r in needers],
                               "state_bytes": sent})
    for notify in rg.listeners:  # adapters (resilient_ddp) move to the new epoch
        notify(rg, prev_members)


def build(rg, e: int, members: list[int], prev, prev_members: list[int]):
    """The epoch's group, built on a helper thread: a gloo constructor connects to every
    peer and blocks for the whole op timeout if one died after the rendezvous (seen in
    the two-failures drill). The constructor releases the GIL, so this thread keeps
    reading the abort flag and, on abort, leaves the builder behind (it times out)."""
    return watched(rg, e, members, f"build-{e}",
                   lambda: rg.plane.form(e, rg.rank, members, prev, prev_members,
                                         lambda w: rg._wait(w, time.monotonic())),
                   f"a peer died while epoch {e} connected", "while its group connected")


def watched(rg, e: int, members: list[int], name: str, fn, why: str, where: str):
    """``fn()`` on a helper thread while this thread reads epoch ``e``'s abort flag and the
    death notices of ``members``; its result, or its error re-raised here. On an abort or a
    death it marks the epoch aborted (``why``), leaves the helper behind and raises
    ``EpochAborted`` ("epoch e aborted ``where``")."""
    box: dict = {}

    def run():
        try:
            box["ok"] = fn()
        except BaseException as err:  # handed to the calling thread
            box["err"] = err

    th = threading.Thread(target=run, name=f"xv-{name}", daemon=True)
    th.start()
    while th.is_alive():
        th.join(rg.timing.slice_s)
        if th.is_alive() and (rg.ctl.aborted(e) or departed(rg, members)):
            rg.ctl.abort(e, f"member {rg.member}: {why}")
            raise EpochAborted(f"epoch {e} aborted {where}")
    if "err" in box:
        raise box["err"]
    return box.get("ok")


def ready_flag(rg) -> str:
    """This member's ready flag: "0" (no state), "1:<step>" (state at committed step
    <step>), "1:<step>:synced" (the group's state at that step: NOTE [who needs the state])."""
    if not rg.has_state:
        return "0"
    # synced: this member formed an epoch before (the group's epochs it recorded)
    return f"1:{int(rg.step)}" + (":synced" if rg.stats["epochs"] else "")


def plan_transfer(flags: list[str]) -> tuple[int | None, list[int]]:
    """(source rank, ranks that receive the state) from the members' ready flags, in rank
    order (NOTE [who needs the state]); (None, []) when no member holds state. The source
    is the first synced member at the most advanced step, else the first at that step."""
    parsed = []
    for f in flags:
        parts = f.split(":")
        if parts[0] != "1":
            parsed.append((-1, False))
        else:
            parsed.append((int(parts[1]), len(parts) > 2 and parts[2] == "synced"))
    top = max(step for step, _ in parsed)
    if top < 0:
        return None, []
    at_top = [r for r, (step, _) in enumerate(parsed) if step == top]
    synced = [r for r in at_top if parsed[r][1]]
    src = (synced or at_top)[0]
    keep = set(synced) if synced else {src}
    return src, [r for r in range(len(flags)) if r not in keep]


def sync_state(rg, src: int, needers: list[int]) -> int:
    """Send step and state from rank ``src`` to the ranks ``needers``, point to point, and
    to nobody else; returns the bytes sent (0 on the other members).

    NOTE [state transfer off the training thread]: gloo's send/recv cannot be waited on in
    slices (a timed-out ``wait(timeout)`` on a send or recv signals the error to every pair
    of the group's context), and the transfer may take long (serializing a large state
    under load) without anything being wrong, so the call bound does not apply to it. Each
    transfer runs on a helper thread with gloo's own op timeout, while this thread reads the
    epoch's abort flag and the death notices, as ``build`` does; on either it leaves the
    helper behind (the group is retired) and raises ``EpochAborted``."""
    if not needers or (rg.rank != src and rg.rank not in needers):
        return 0
    import torch  # NOTE [a torch-free control plane] in __init__
    tag_header, tag_payload = 1, 2
    if rg.rank == src:
        bio = io.BytesIO()
        torch.save({"step": int(rg.step), "state": rg.get_state()}, bio)
        payload = torch.frombuffer(bio.getbuffer(), dtype=torch.uint8)
        header = torch.tensor([payload.numel(), rg.step], dtype=torch.int64)

        def send():
            for dst in needers:
                rg.pg.send([header], dst, tag_header).wait()
                rg.pg.send([payload], dst, tag_payload).wait()
        _off_thread(rg, "state_send", send)
        return int(payload.numel()) * len(needers)
    box: dict = {}

    def recv():
        header = torch.zeros(2, dtype=torch.int64)
        rg.pg.recv([header], src, tag_header).wait()
        box["buf"] = torch.empty(int(header[0]), dtype=torch.uint8)
        rg.pg.recv([box["buf"]], src, tag_payload).wait()
    _off_thread(rg, "state_recv", recv)
    obj = torch.load(io.BytesIO(memoryview(box["buf"].numpy())), weights_only=True)
    rg.set_state(obj["state"])
    rg.step = int(obj["step"])
    return 0


def _off_thread(rg, what: str, fn) -> None:
    """Run ``fn()`` on a helper thread (NOTE [state transfer off the training thread]),
    recorded in the flight recorder; its failure aborts the epoch."""
    e = rg.epoch
    entry = rg.recorder.start(what, [], e, rg.rank)
    try:
        watched(rg, e, rg.members, f"{what}-{e}", fn,
                f"a peer died during the state transfer of epoch {e}", "during its state transfer")
    except EpochAborted:
        rg.recorder.finish(entry, "aborted")
        raise
    except BaseException as err:
        rg.recorder.finish(entry, "failed")
        rg.ctl.abort(e, f"member {rg.member}: {what} failed: {err}")
        raise EpochAborted(f"epoch {e}: {what} failed: {err}") from err
    rg.recorder.finish(entry, "completed")
