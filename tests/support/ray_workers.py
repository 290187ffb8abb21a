"""Ray worker factories for the Ray backend's tests (named ``MODULE:ATTR``, as the commands' are)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result


@contextlib.asynccontextmanager
async def held(settings: Mapping[str, Any], share: int) -> AsyncIterator[Any]:
    """Completes each item with its row's ``value`` as the reward; an item of a row with ``hold``
    first writes this worker's pid to ``settings["pids"]/<row>`` and waits for ``settings["release"]``
    to exist (so a test can kill the worker while the item runs); one with ``boom`` raises
    ``ValueError`` (a pipeline that fails, not its item)."""
    pids, release = Path(settings["pids"]), Path(settings["release"])

    async def process(item: WorkItem) -> Result:
        if item.row.get("boom"):
            raise ValueError(f"boom at row {item.row_index}")
        if item.row.get("hold") and not release.exists():
            (pids / str(item.row_index)).write_text(str(os.getpid()))
            while not release.exists():
                await asyncio.sleep(0.01)
        attempt = Attempt(Outcome.COMPLETED, agent_reward=item.row["value"])
        return Result(item, attempt, Outcome.COMPLETED, reward=float(item.row["value"]))

    yield process
