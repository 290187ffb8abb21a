"""What a runtime counts about its own work, for reports and tests to read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RuntimeStats:
    """Counters since the runtime started.

    ``workers_started`` includes replacements; ``killed`` counts workers stopped because a sample
    ran past its timeout; ``died`` counts workers that ended on their own (a crash); ``requeued``
    counts samples sent again after their worker went away with them unfinished.
    """

    workers_started: int = 0
    killed: int = 0
    died: int = 0
    requeued: int = 0
