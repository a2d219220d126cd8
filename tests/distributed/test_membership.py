"""Who receives the state when an epoch forms (``membership.plan_transfer``), from the
members' ready flags: "0" no state, "1:<step>" state at that committed step, "1:<step>:synced"
the group's state (the member formed an epoch before)."""

import pytest

from xvendor.distributed.membership import plan_transfer


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
