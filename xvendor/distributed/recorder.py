"""Flight recorder: a ring buffer of a rank's recent collectives, JSON dumps, and the analysis
behind ``xvendor fr analyze DIR``.

Each entry: ``seq`` (per epoch), ``op``, ``sizes`` (numel of each tensor), ``dtype``,
``epoch``, ``rank``, ``start``/``end`` (wall clock), ``state`` (started, completed, failed,
aborted). On a failure every reachable rank writes ``fr_e<epoch>_m<id>.json`` (the abort
flag reaches all of them); the agent writes ``fr_agent.json`` with its death notices.
With several lanes (HSDP, ``lanes``) member ids and epochs are per lane, so lane ``L`` > 0
writes ``fr_l<L>_e<epoch>_m<id>.json`` and ``fr_agent_l<L>.json`` (lane 0 keeps the plain
names) and each lane is analyzed on its own (``analyze(directory, lane)``, ``lanes_in``).
Under a ``Coordinator`` every name also carries its incarnation (``fr_i<N>_...``,
``fr_agent_i<N>...``): a restarted coordinator numbers epochs and members from 0 again, so
without it a second failure's dumps would overwrite the first's and the analysis would
merge two failures into one epoch. Each (incarnation, lane) is analyzed on its own.

The analysis, per epoch that ended in a failure: the collective the survivors were waiting
in (the newest seq any dumping rank started and did not complete) and the members that never
reached it: no dump at all (the process is gone or frozen) or a newest seq below it.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import time

STATES = ("started", "completed", "failed", "aborted")


class FlightRecorder:
    def __init__(self, capacity: int = 512):
        self._ring: collections.deque[dict] = collections.deque(maxlen=capacity)
        self._seq: dict[int, int] = collections.defaultdict(int)

    def start(self, op: str, tensors, epoch: int, rank: int) -> dict:
        entry = {"seq": self._seq[epoch], "op": op, "sizes": [int(t.numel()) for t in tensors],
                 "dtype": str(tensors[0].dtype).removeprefix("torch.") if tensors else None,
                 "epoch": epoch, "rank": rank, "start": time.time(), "end": None,
                 "state": "started"}
        self._seq[epoch] += 1
        self._ring.append(entry)
        return entry

    @staticmethod
    def finish(entry: dict, state: str) -> None:
        assert state in STATES
        entry["state"], entry["end"] = state, time.time()

    def entries(self) -> list[dict]:
        return [dict(e) for e in self._ring]

    def dump(self, directory: str, *, member: int, epoch: int, members: list[int],
             reason: str, dead: dict[int, str], lane: int = 0,
             incarnation: int | None = None) -> str:
        os.makedirs(directory, exist_ok=True)
        doc = {"member": member, "pid": os.getpid(), "epoch": epoch, "members": members,
               "reason": reason, "dead": {str(k): v for k, v in dead.items()},
               "lane": lane, "incarnation": incarnation, "time": time.time(),
               "entries": self.entries()}
        path = os.path.join(directory,
                            f"{_lane_prefix(lane, incarnation)}e{epoch}_m{member}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)  # a reader never sees half a dump
        return path


def _tags(lane: int, incarnation: int | None) -> str:
    return (f"i{incarnation}_" if incarnation is not None else "") + \
        (f"l{lane}_" if lane else "")


def _lane_prefix(lane: int, incarnation: int | None = None) -> str:
    return f"fr_{_tags(lane, incarnation)}"


def _agent_name(lane: int, incarnation: int | None = None) -> str:
    return f"fr_agent_{_tags(lane, incarnation)}".rstrip("_") + ".json"


def write_agent_dump(directory: str, deaths: dict[int, str], epochs: dict[int, dict],
                     lane: int = 0, incarnation: int | None = None) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, _agent_name(lane, incarnation))
    with open(path + ".tmp", "w") as f:
        json.dump({"dead": {str(k): v for k, v in deaths.items()}, "incarnation": incarnation,
                   "epochs": {str(k): v for k, v in epochs.items()}}, f)
    os.replace(path + ".tmp", path)


_NAME = re.compile(r"fr_(?:agent_?)?(?:i(\d+)_?)?(?:l(\d+)_?)?(?:e\d+_m\d+)?\.json")


def groups_in(directory: str) -> list[tuple[int | None, int]]:
    """The (incarnation, lane) pairs that left dumps in ``directory`` (incarnation None:
    ``xvendor run``'s agent, which is never restarted), oldest incarnation first."""
    found = set()
    for p in glob.glob(os.path.join(directory, "fr_*.json")):
        m = _NAME.fullmatch(os.path.basename(p))
        if m:
            found.add((int(m.group(1)) if m.group(1) else None, int(m.group(2) or 0)))
    return sorted(found, key=lambda g: (-1 if g[0] is None else g[0], g[1]))


def lanes_in(directory: str) -> list[int]:
    """The lanes that left dumps in ``directory`` (0 for the plain names)."""
    return sorted({lane for _, lane in groups_in(directory)})


def analyze(directory: str, lane: int = 0, incarnation: int | None = None) -> dict:
    """Per failed epoch of ``lane`` under coordinator ``incarnation``: what the survivors
    waited in and who never reached it."""
    pattern = f"{_lane_prefix(lane, incarnation)}e*_m*.json"
    dumps = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(directory, pattern)))]
    agent_path = os.path.join(directory, _agent_name(lane, incarnation))
    agent = json.load(open(agent_path)) if os.path.exists(agent_path) else {"dead": {}}
    dead: dict[str, str] = dict(agent.get("dead", {}))
    for d in dumps:
        dead.update(d["dead"])
    by_epoch: dict[int, list[dict]] = collections.defaultdict(list)
    for d in dumps:
        by_epoch[d["epoch"]].append(d)
    epochs = []
    for e in sorted(by_epoch):
        ds = by_epoch[e]
        members = max((d["members"] for d in ds), key=len)
        newest = {d["member"]: max((x for x in d["entries"] if x["epoch"] == e),
                                   key=lambda x: x["seq"], default=None) for d in ds}
        stuck = [x for x in newest.values() if x is not None and x["state"] != "completed"]
        waited = max(stuck, key=lambda x: x["seq"]) if stuck else None
        missing = [m for m in members if m not in newest]
        behind = [m for m, x in newest.items() if waited is not None
                  and (x is None or x["seq"] < waited["seq"])]
        never = sorted(set(missing) | set(behind))
        epochs.append({
            "epoch": e, "members": members, "dumped": sorted(newest),
            "reasons": sorted({d["reason"] for d in ds}),
            "waited_in": None if waited is None else
            {k: waited[k] for k in ("seq", "op", "sizes", "dtype")},
            "never_reached": never, "no_dump": sorted(missing),
            "declared_dead": {m: dead[str(m)] for m in members if str(m) in dead},
        })
    return {"directory": directory, "lane": lane, "incarnation": incarnation,
            "epochs": epochs, "dead": dead}


def format_analysis(result: dict) -> str:
    lines = [f"flight recorder dumps in {result['directory']}"
             + (f", coordinator incarnation {result['incarnation']}"
                if result.get("incarnation") is not None else "")
             + (f", lane {result['lane']}" if result.get("lane") else "")]
    if not result["epochs"]:
        lines.append("  no dumps: no failure was recorded")
    for ep in result["epochs"]:
        lines.append(f"epoch {ep['epoch']}: members {ep['members']} (rank order); "
                     f"dumps from {ep['dumped']}; why: {'; '.join(ep['reasons'])}")
        w = ep["waited_in"]
        if w is None:
            lines.append("  survivors were not inside a collective")
        else:
            lines.append(f"  survivors were waiting in collective #{w['seq']} {w['op']} "
                         f"sizes={w['sizes']} dtype={w['dtype']}")
        for m in ep["never_reached"]:
            why = ep["declared_dead"].get(m, "no death notice")
            how = "no dump (process gone or frozen)" if m in ep["no_dump"] else "behind"
            lines.append(f"  member {m} never reached it: {how}; agent: {why}")
        for m, why in ep["declared_dead"].items():
            if m not in ep["never_reached"]:
                lines.append(f"  member {m} reached it, then failed; agent: {why}")
    return "\n".join(lines)
