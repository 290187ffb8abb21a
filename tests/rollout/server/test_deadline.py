"""The per-rollout deadline (``executor._Deadline``) on a real event loop: what the body sees, what the caller
sees afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

from osmosis_ai.rollout.server.executor import _Deadline


async def test_an_expired_body_raises_timeout_error_and_leaves_no_cancel_behind():
    deadline = _Deadline(0.01)
    with pytest.raises(TimeoutError):
        async with deadline:
            await asyncio.sleep(5)
    assert deadline.expired
    await asyncio.sleep(0)  # the caller goes on normally
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_result_produced_as_the_deadline_fires_reaches_the_caller():
    # The timer firing between the body's last await and its return: the cancel is still pending when
    # __aexit__ runs. It must not surface at the caller's next await (where the callback is sent).
    async with _Deadline(5) as deadline:
        await asyncio.sleep(0)
        deadline._fire()
        result = "produced"
    assert deadline.expired
    await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert result == "produced"
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_body_that_swallows_the_deadline_keeps_its_result_and_the_task_is_not_left_cancelling():
    async with _Deadline(0.01) as deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(5)
    assert deadline.expired
    await asyncio.sleep(0.01)
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 cannot tell whose cancel it is")
async def test_a_cancel_requested_by_someone_else_too_propagates():
    async def body() -> None:
        async with _Deadline(0.01):
            try:
                await asyncio.sleep(5)
            finally:
                asyncio.current_task().cancel()  # type: ignore[union-attr]  # e.g. shutdown, at the same time
                await asyncio.sleep(0)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(body())


async def test_no_deadline_schedules_no_timer():
    async with _Deadline(None) as deadline:
        await asyncio.sleep(0.01)
    assert deadline._handle is None and not deadline.expired
