"""The stored form of an epoch record (``control.encode_record`` / ``decode_record``, NOTE
[compact epoch record]): members as runs of consecutive ids when shorter, the same record
read back."""

import json
import random

import pytest

from xvendor.distributed import authstore as A
from xvendor.distributed import control as cp

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("members", [
    list(range(10000)),                                   # founders: one run
    [m for m in range(10000) if m not in (1, 5000)],      # two kills: three runs
    list(range(3, 10)) + [20, 21, 22, 40],                # a grow: newer ids appended
    [7, 3, 9, 1, 4, 8],                                   # no runs: the list is kept
    [0, 1],                                               # short: the list is kept
    [],
])
def test_a_record_reads_back_as_it_was_proposed(members):
    rec = {"members": members, "joins": 2, "why": "w", "epoch": 3, "incarnation": 1}
    raw = cp.encode_record(rec)
    assert cp.decode_record(raw) == rec
    assert cp.decode_record(raw.encode()) == rec


def test_founders_and_a_shrink_of_ten_thousand_fit_in_a_few_bytes():
    """The record was ~60 KB at 10,000 members; each member reads it at each formation."""
    founders = {"members": list(range(10000)), "joins": 0, "why": "founders", "epoch": 0}
    assert len(cp.encode_record(founders)) < 120
    assert len(json.dumps(founders)) > 48000
    shrink = dict(founders, members=[m for m in range(10000) if m != 4321])
    assert len(cp.encode_record(shrink)) < 140
    shuffled = list(range(200))
    random.Random(0).shuffle(shuffled)
    assert cp.decode_record(cp.encode_record({"members": shuffled}))["members"] == shuffled


def test_proposals_and_reads_go_through_the_compact_form():
    """``Control.propose`` stores the compact form and returns the winner as a list; a
    second proposal loses to it; ``Control.record`` reads it back."""
    ctl = cp.Control(A.LocalStore(A.KV(), prefix="p"))
    won = ctl.propose(0, {"members": list(range(1000)), "joins": 0, "why": "founders"})
    assert won["members"] == list(range(1000)) and won["epoch"] == 0
    raw = ctl.get(cp.key_epoch(0))
    assert "runs" in raw and len(raw) < 120
    assert ctl.propose(0, {"members": [1, 2], "joins": 0})["members"] == list(range(1000))
    assert ctl.record(0) == won
