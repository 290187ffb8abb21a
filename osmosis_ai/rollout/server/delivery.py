"""Delivering terminal callbacks: each committed to the outbox, then sent until TrainGate answers it.

:class:`Deliveries` owns everything between a rollout's outcome and TrainGate's acknowledgement, one
:class:`~osmosis_ai.rollout.server.outbox.Delivery` per rollout from commit to removal:

* :meth:`Deliveries.commit` writes it to the outbox before any attempt to send it; a full or broken
  disk does not lose it (it is kept in memory and delivered from there, logged);
* :meth:`Deliveries.deliver` sends it in the caller's task, retrying with back-off (honouring
  ``Retry-After``) for the delivery window; a 2xx, a 409 (TrainGate has it already) or another 4xx
  (it never will) removes it; a window run out leaves it stored for a repeated init or the next start;
* :meth:`Deliveries.resend` is what a repeated init does: it wakes the delivery under way (TrainGate
  is asking, so it is up: retry now) or starts one from the stored row;
* :meth:`Deliveries.start` re-sends what an earlier run left in the same outbox file, and
  :meth:`Deliveries.stop` gives the deliveries still running what is left of the shutdown budget.

A COMPLETED result whose delivery fails is logged, never replaced: TrainGate may have recorded it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError, OsmosisValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from osmosis_ai.rollout.config.settings import RolloutClientSettings
    from osmosis_ai.rollout.server.outbox import Delivery, Outbox

logger = logging.getLogger(__name__)

ALREADY_COMPLETE = 409  # TrainGate's answer for a rollout it already has: delivered


class Deliveries:
    """The terminal callbacks of one server not yet acknowledged by TrainGate (module docstring)."""

    on_attempt: Callable[[int | None], object] | None = None  # the server's metrics hear each POST

    def __init__(
        self,
        outbox: Outbox,
        client_settings: RolloutClientSettings,
        window_seconds: float,
        on_settled: Callable[[str], object] | None = None,
    ) -> None:
        self.outbox = outbox
        self.on_settled = on_settled  # called with the key once a callback is acknowledged or rejected
        self.client_settings = client_settings
        self.window_seconds = window_seconds
        self._running: dict[str, tuple[asyncio.Task[Any], asyncio.Event]] = {}  # by dedup key
        self._unstored: dict[str, Delivery] = {}  # the outbox could not take them (disk full)

    @property
    def pending(self) -> int:
        """Callbacks not acknowledged by TrainGate yet."""
        return self.outbox.pending + len(self._unstored)

    def stored(self, key: str) -> Delivery | None:
        """The unacknowledged callback of ``key``, if there is one."""
        return self._unstored.get(key) or self.outbox.get(key)

    def commit(self, delivery: Delivery) -> None:
        """Store ``delivery`` before anything is sent (replacing an older one of the same key)."""
        try:
            self.outbox.put(delivery)
        except Exception:  # a full or broken disk must not lose the callback: send it from memory
            logger.exception(
                "rollout %s: cannot write the outbox; delivering without it", delivery.rollout_id
            )
            self._unstored[delivery.key] = delivery

    async def deliver(self, delivery: Delivery) -> None:
        """Send ``delivery``, just committed, from the current task (it is not read back)."""
        task = asyncio.current_task()
        assert task is not None
        wake = asyncio.Event()
        self._track(delivery.key, task, wake)
        await self._send(delivery, wake)

    def resend(self, key: str) -> bool:
        """Make sure the stored callback of ``key`` is being delivered now; ``False`` if none is stored."""
        running = self._running.get(key)
        if running is not None:
            running[1].set()  # TrainGate is asking again: it is up, retry now
            return True
        delivery = self.stored(key)
        if delivery is None:
            return False
        wake = asyncio.Event()
        self._track(key, asyncio.get_running_loop().create_task(self._send(delivery, wake)), wake)
        return True

    def start(self, older_than_seconds: float) -> None:
        """Drop stored callbacks older than ``older_than_seconds`` (TrainGate stopped waiting for them)
        and start delivering the rest."""
        dropped = self.outbox.prune(older_than_seconds)
        if dropped:
            logger.warning("outbox: dropped %d callbacks older than the record TTL", dropped)
        stored = self.outbox.all()
        for delivery in stored:
            self.resend(delivery.key)
        if stored:
            logger.info("outbox: re-sending %d terminal callbacks left by an earlier run", len(stored))

    async def stop(self, timeout: float) -> int:
        """Let deliveries run for ``timeout`` seconds more, then stop them; returns how many are left.

        What they did not deliver stays in the outbox for the next start (lost with an in-memory outbox).
        """
        tasks = [task for task, _ in self._running.values()]
        if tasks:
            _, unfinished = await asyncio.wait(tasks, timeout=timeout)
            for task in unfinished:
                task.cancel()
            if unfinished:
                await asyncio.wait(unfinished, timeout=1.0)
        left = self.pending
        if left:
            where = (
                f"kept in {self.outbox.path} for the next start"
                if self.outbox.durable
                else "lost (in-memory outbox)"
            )
            logger.warning("shutdown: %d terminal callbacks not acknowledged by TrainGate; %s", left, where)
        return left

    def close(self) -> None:
        self.outbox.close()

    def _track(self, key: str, task: asyncio.Task[Any], wake: asyncio.Event) -> None:
        self._running[key] = (task, wake)

        def untrack(_: object) -> None:
            if self._running.get(key, (None,))[0] is task:
                del self._running[key]

        task.add_done_callback(untrack)

    async def _send(self, delivery: Delivery, wake: asyncio.Event) -> None:
        client = OsmosisLLMClient(
            delivery.server_url, delivery.rollout_id, api_key=delivery.api_key, settings=self.client_settings
        )
        try:
            await client.send_completion(
                delivery.body, window_seconds=self.window_seconds, wake=wake, on_attempt=self.on_attempt
            )
        except OsmosisValidationError as exc:
            if exc.status_code == ALREADY_COMPLETE:
                logger.info("rollout %s: TrainGate already has its result (409)", delivery.rollout_id)
            else:
                logger.error(
                    "rollout %s: TrainGate rejected the terminal callback: %s", delivery.rollout_id, exc
                )
            self._forget(delivery.key)
        except OsmosisRolloutError as exc:
            logger.error(
                "rollout %s: the terminal callback to %s was not acknowledged within %g s (%s); kept for a "
                "retried init or the next start",
                delivery.rollout_id,
                delivery.server_url,
                self.window_seconds,
                exc,
            )
        else:
            self._forget(delivery.key)
            logger.debug("rollout %s: terminal callback acknowledged", delivery.rollout_id)

    def _forget(self, key: str) -> None:
        self._unstored.pop(key, None)
        try:
            self.outbox.remove(key)
        except Exception:
            logger.exception("cannot remove the delivered callback %r from the outbox", key)
        if self.on_settled is not None:
            self.on_settled(key)
