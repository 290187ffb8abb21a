"""The time limit shared by everything done for one piece of work: :class:`Deadline`.

A run's item (its executor and scorer both) and a judgment (every request, back-off and corrective
re-ask) each get one, so no step can restart the clock for the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Deadline:
    """``seconds`` from when it was set, ending at ``end`` (a ``time.monotonic()`` reading)."""

    seconds: float
    end: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left, 0 once it has passed."""
        return max(self.end - time.monotonic(), 0.0)

    def within(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now, or this one if it comes first."""
        return Deadline(min(seconds, self.seconds), min(time.monotonic() + seconds, self.end))

    def postpone(self, seconds: float) -> None:
        """Move the end ``seconds`` later: time spent that does not count (queueing for a rate limit)."""
        self.end += seconds
