"""``Retry-After`` values as the rollout client and the judge read them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from osmosis_ai._retry_after import parse_retry_after


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), (" 0.25 ", 0.25), ("-4", 0.0), ("soon", None), ("nan", None), ("", None)],
)
def testparse_retry_after(value: str, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def testparse_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    parsed = parse_retry_after(when)
    assert parsed is not None and 25 <= parsed <= 31
    past = format_datetime(datetime.now(timezone.utc) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(past) == 0.0
