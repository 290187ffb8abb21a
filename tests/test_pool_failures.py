"""run_bounded when several items fail together (a full disk fails every commit in flight): the first
failure is raised, and asyncio reports none of the others as "never retrieved"."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from osmosis_ai._pool import run_bounded


async def _unretrieved(run: Any) -> list[str]:
    """What asyncio's exception handler was told while ``run()`` ran and its garbage was collected."""
    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        with pytest.raises(OSError, match="No space left on device"):
            await run()
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    return reported


async def test_failures_beside_the_first_are_not_reported_as_never_retrieved() -> None:
    full = asyncio.Event()

    async def work(item: int) -> None:
        await full.wait()  # every item in flight meets the full disk at once
        raise OSError(28, "No space left on device")

    async def run() -> None:
        async def fill() -> None:
            await asyncio.sleep(0)
            full.set()

        filler = asyncio.create_task(fill())
        try:
            await run_bounded(range(6), work, concurrency=6)
        finally:
            await filler

    assert await _unretrieved(run) == []
