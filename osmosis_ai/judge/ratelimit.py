"""A requests-per-minute limit shared by every judgment that holds the same limiter.

Requests are spaced evenly (``60 / rpm`` seconds apart) rather than allowed in bursts, which is
what providers' per-minute quotas reward. A caller reserves a slot (a few instructions under a
``threading.Lock``, never held across an ``await``) and then sleeps until it; so one limiter can be
shared by coroutines on any event loop and by threads.
"""

from __future__ import annotations

import asyncio
import threading
import time

from osmosis_ai.judge.errors import JudgeSettingError


class RateLimiter:
    """Space requests so that at most ``requests_per_minute`` start in any minute."""

    def __init__(self, requests_per_minute: float) -> None:
        if not requests_per_minute > 0:
            raise JudgeSettingError(f"requests_per_minute must be positive, got {requests_per_minute!r}")
        self.interval = 60.0 / float(requests_per_minute)
        self._next = 0.0
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Claim the next slot and return how many seconds to wait for it."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        return slot - now

    async def acquire(self) -> None:
        """Wait for the next free slot."""
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)
