"""osmosis_ai._deadline.Deadline: one time limit shared by every step of one piece of work."""

from __future__ import annotations

import time

from osmosis_ai._deadline import Deadline


def test_a_passed_deadline_has_nothing_left() -> None:
    assert Deadline.after(0).remaining() == 0
    assert Deadline(1, time.monotonic() - 5).remaining() == 0  # never negative


def test_within_keeps_the_sooner_end_and_the_shorter_limit() -> None:
    far = Deadline(3600, time.monotonic() + 3600)
    near = far.within(10)
    assert near.seconds == 10 and near.end < far.end
    spent = Deadline(5, time.monotonic() + 1)  # a 5 s limit, 1 s of it left
    assert spent.within(10) == Deadline(5, spent.end)


def test_postpone_moves_the_end_for_everyone_holding_it() -> None:
    deadline = Deadline(1, 100.0)
    held = deadline
    deadline.postpone(2.5)
    assert held.end == 102.5 and held.seconds == 1
