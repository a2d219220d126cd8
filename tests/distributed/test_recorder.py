"""Flight recorder (l0): the ring buffer, dumps, and what ``xvendor fr analyze`` concludes."""

import json

import pytest
import torch

from xvendor.distributed import FlightRecorder, analyze, format_analysis
from xvendor.distributed.recorder import groups_in, lanes_in, write_agent_dump
from xvendor.distributed.cli import main as cli_main

pytestmark = pytest.mark.l0


def _rank(tmp_path, member, n_done, stuck, members=(0, 1, 2), dead=None, capacity=512,
          lane=0, incarnation=None):
    fr = FlightRecorder(capacity)
    t = torch.zeros(8)
    for _ in range(n_done):
        fr.finish(fr.start("all_reduce", [t], epoch=0, rank=member), "completed")
    if stuck:
        fr.finish(fr.start("all_reduce", [t], epoch=0, rank=member), "aborted")
    return fr.dump(str(tmp_path), member=member, epoch=0, members=list(members),
                   reason="agent: member(s) [2] dead", dead=dead or {}, lane=lane,
                   incarnation=incarnation)


def test_ring_buffer_keeps_the_newest_entries():
    fr = FlightRecorder(capacity=4)
    for _ in range(10):
        fr.finish(fr.start("barrier", [], epoch=3, rank=0), "completed")
    assert [e["seq"] for e in fr.entries()] == [6, 7, 8, 9]
    with pytest.raises(AssertionError):
        fr.finish(fr.entries()[0], "weird")


def test_analysis_names_the_waited_collective_and_the_missing_rank(tmp_path):
    # Members 0 and 1 sit in collective #5; member 2 (killed) left no dump.
    _rank(tmp_path, 0, 5, True, dead={2: "process 99 killed by signal 9"})
    _rank(tmp_path, 1, 5, True)
    rep = analyze(str(tmp_path))
    (ep,) = rep["epochs"]
    assert ep["waited_in"] == {"seq": 5, "op": "all_reduce", "sizes": [8], "dtype": "float32"}
    assert ep["never_reached"] == [2] and ep["no_dump"] == [2]
    assert ep["declared_dead"] == {2: "process 99 killed by signal 9"}
    text = format_analysis(rep)
    assert "collective #5 all_reduce" in text and "member 2 never reached it" in text


def test_analysis_names_a_rank_that_lagged_behind(tmp_path):
    # Member 1 dumped, but its newest collective is #3: it never reached #5.
    _rank(tmp_path, 0, 5, True)
    _rank(tmp_path, 1, 3, False)
    _rank(tmp_path, 2, 5, True)
    (ep,) = analyze(str(tmp_path))["epochs"]
    assert ep["waited_in"]["seq"] == 5 and ep["never_reached"] == [1] and ep["no_dump"] == []


def test_fr_analyze_cli_json(tmp_path, capsys):
    _rank(tmp_path, 0, 2, True)
    assert cli_main(["fr", "analyze", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epochs"][0]["never_reached"] == [1, 2]


def test_lanes_dump_side_by_side_and_are_analyzed_apart(tmp_path):
    # HSDP: member ids and epochs are per lane, so lane 0's member 1 of epoch 0 and lane 1's
    # are different processes. Their dumps must not overwrite each other, and each lane's
    # analysis sees its own ranks only: lane 0 lost member 2, lane 1 member 1.
    _rank(tmp_path, 0, 5, True)
    _rank(tmp_path, 1, 5, True)
    _rank(tmp_path, 0, 7, True, lane=1)
    _rank(tmp_path, 2, 7, True, lane=1)
    write_agent_dump(str(tmp_path), {2: "killed"}, {}, lane=0)
    write_agent_dump(str(tmp_path), {1: "straggler"}, {}, lane=1)
    assert len(list(tmp_path.glob("fr_*.json"))) == 6
    assert lanes_in(str(tmp_path)) == [0, 1]
    (e0,) = analyze(str(tmp_path), 0)["epochs"]
    (e1,) = analyze(str(tmp_path), 1)["epochs"]
    def seen(ep):
        return ep["waited_in"]["seq"], ep["never_reached"], ep["declared_dead"]
    assert seen(e0) == (5, [2], {2: "killed"})
    assert seen(e1) == (7, [1], {1: "straggler"})


def test_fr_analyze_cli_reports_every_lane(tmp_path, capsys):
    _rank(tmp_path, 0, 2, True)
    _rank(tmp_path, 0, 3, True, lane=1)
    assert cli_main(["fr", "analyze", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["lane"], r["epochs"][0]["waited_in"]["seq"]) for r in out] == [(0, 2), (1, 3)]
    assert cli_main(["fr", "analyze", str(tmp_path)]) == 0
    assert ", lane 1" in capsys.readouterr().out


def test_coordinator_incarnations_are_kept_apart(tmp_path, capsys):
    # A restarted coordinator numbers epochs and members from 0 again: incarnation 7 lost
    # member 2 in epoch 0, incarnation 9 (after the restart) lost member 0 in its epoch 0.
    # Nothing is overwritten, and each failure names its own member.
    _rank(tmp_path, 0, 5, True, incarnation=7)
    _rank(tmp_path, 1, 5, True, incarnation=7)
    write_agent_dump(str(tmp_path), {2: "killed"}, {}, incarnation=7)
    _rank(tmp_path, 1, 3, True, incarnation=9)
    _rank(tmp_path, 2, 3, True, incarnation=9)
    write_agent_dump(str(tmp_path), {0: "connection closed"}, {}, incarnation=9)
    assert len(list(tmp_path.glob("fr_*.json"))) == 6
    assert groups_in(str(tmp_path)) == [(7, 0), (9, 0)]
    (a,) = analyze(str(tmp_path), 0, 7)["epochs"]
    (b,) = analyze(str(tmp_path), 0, 9)["epochs"]
    assert (a["waited_in"]["seq"], a["never_reached"], a["declared_dead"]) == \
        (5, [2], {2: "killed"})
    assert (b["waited_in"]["seq"], b["never_reached"], b["declared_dead"]) == \
        (3, [0], {0: "connection closed"})
    assert cli_main(["fr", "analyze", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "coordinator incarnation 7" in text and "coordinator incarnation 9" in text
    assert text.index("incarnation 7") < text.index("incarnation 9")
