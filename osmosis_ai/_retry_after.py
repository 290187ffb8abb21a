"""Reading a server's ``Retry-After`` hint: shared by the rollout client and the judge's retries."""

from __future__ import annotations

import time


def parse_retry_after(value: str) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds (fractions too) or an HTTP date.

    ``None`` when the value is neither; never negative (a date in the past means "now").
    """
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return max(seconds, 0.0)
