"""NOTE [offs read once]: on the CPU the op's checks read ``offs`` on the host and leave
``offs[-1]`` for the torch backend's zeros past it; the value is given for that very tensor
only, and never survives a write to it or the next check."""

import pytest
import torch

import xvendor
from xvendor import shapes

pytestmark = pytest.mark.l0


def test_a_noted_end_is_given_only_for_that_tensor_until_the_next_check():
    offs = torch.tensor([2, 5, 7], dtype=torch.int32)
    shapes.note_last_end(offs, 99)  # a value the tensor does not hold: shows where it came from
    other = offs.clone()
    assert shapes.last_end(other) == 7   # another tensor: read from it, the note stays
    assert shapes.last_end(offs) == 99   # the noted tensor: the note
    assert shapes.last_end(offs) == 99   # as often as the kernel asks (a training call: twice)
    shapes.note_last_end(other, 7)       # the next call's check replaces it
    assert shapes.last_end(offs) == 7
    assert shapes.last_end(torch.zeros(0, dtype=torch.int32)) == 0


def test_a_write_to_offs_after_the_check_voids_the_note():
    offs = torch.tensor([2, 5, 7], dtype=torch.int32)
    shapes.note_last_end(offs, 7)
    offs[-1] = 6  # in place: the version counter moves
    assert shapes.last_end(offs) == 6


def test_the_same_offs_object_changed_between_calls_gives_fresh_zeros():
    # one offs tensor reused and rewritten in place between steps, as routing code does
    torch.manual_seed(0)
    x, w = torch.randn(12, 8), torch.randn(3, 8, 5)
    offs = torch.tensor([4, 8, 12], dtype=torch.int32)
    full = xvendor.grouped_mm(x, w, offs)
    offs.copy_(torch.tensor([3, 5, 9], dtype=torch.int32))
    part = xvendor.grouped_mm(x, w, offs)
    assert not torch.equal(full[9:], torch.zeros(3, 5))
    assert torch.equal(part[9:], torch.zeros(3, 5))
    want = torch.cat([x[0:3] @ w[0], x[3:5] @ w[1], x[5:9] @ w[2]])
    torch.testing.assert_close(part[:9], want)
