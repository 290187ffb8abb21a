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

A stored callback lives at most ``max_age_seconds`` after it was committed
(``outbox_max_age_seconds``), whatever restarts and repeated inits happen meanwhile: its delivery
window ends then, and a row still unacknowledged is dropped (logged). Trainer URLs change with every
training run; a row the trainer stopped waiting for would otherwise be re-sent at every start.

Callbacks travel over a pool of their own, bounded per trainer endpoint only
(``client.max_connections`` connections to each): a trainer slow to answer them, or an address that
never answers, holds its own connections, never those of chat calls or of other trainers'
callbacks. Failures go through one :class:`~osmosis_ai._http.FailureLog` shared with the server's
chat calls: a trainer that does not answer costs a few lines a minute, not one per rollout and attempt.

A COMPLETED result whose delivery fails is logged, never replaced: TrainGate may have recorded it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from osmosis_ai._http import FailureLog, endpoint_of, get_shared_transport
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.core.exceptions import OsmosisRolloutError, OsmosisValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from osmosis_ai.rollout.config.settings import RolloutClientSettings
    from osmosis_ai.rollout.server.outbox import Delivery, Outbox

logger = logging.getLogger(__name__)

ALREADY_COMPLETE = 409  # TrainGate's answer for a rollout it already has: delivered
DEFAULT_MAX_AGE_SECONDS = 3600.0


class Deliveries:
    """The terminal callbacks of one server not yet acknowledged by TrainGate (module docstring)."""

    on_attempt: Callable[[int | None], object] | None = None  # the server's metrics hear each POST

    def __init__(
        self,
        outbox: Outbox,
        client_settings: RolloutClientSettings,
        window_seconds: float,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        failures: FailureLog | None = None,
        on_settled: Callable[[str], object] | None = None,
    ) -> None:
        self.outbox = outbox
        self.on_settled = on_settled  # called with the key once a callback is acknowledged or rejected
        self.client_settings = client_settings
        self.window_seconds = window_seconds
        self.max_age_seconds = max_age_seconds
        self.failures = failures if failures is not None else FailureLog(logger)
        self._running: dict[str, tuple[asyncio.Task[Any], asyncio.Event]] = {}  # by dedup key
        self._unstored: dict[str, Delivery] = {}  # the outbox could not take them (disk full)
        self._expiry: dict[str, asyncio.TimerHandle] = {}  # kept rows, by when they are dropped

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

    def start(self) -> None:
        """Drop stored callbacks older than the age limit (TrainGate stopped waiting for them) and
        start delivering the rest."""
        dropped = self.outbox.prune(self.max_age_seconds)
        if dropped:
            logger.warning(
                "outbox: dropped %d callbacks older than %g s (outbox_max_age_seconds)",
                dropped,
                self.max_age_seconds,
            )
        stored = self.outbox.all()
        for delivery in stored:
            self.resend(delivery.key)
        if stored:
            logger.info("outbox: re-sending %d terminal callbacks left by an earlier run", len(stored))

    async def stop(self, timeout: float) -> int:
        """Let deliveries run for ``timeout`` seconds more, then stop them; returns how many are left.

        What they did not deliver stays in the outbox for the next start (lost with an in-memory outbox).
        """
        self._cancel_expiry()
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
        self.failures.flush()
        return left

    def close(self) -> None:
        self._cancel_expiry()
        self.outbox.close()

    def _track(self, key: str, task: asyncio.Task[Any], wake: asyncio.Event) -> None:
        self._running[key] = (task, wake)

        def untrack(_: object) -> None:
            if self._running.get(key, (None,))[0] is task:
                del self._running[key]

        task.add_done_callback(untrack)

    def _cancel_expiry(self) -> None:
        for handle in self._expiry.values():
            handle.cancel()
        self._expiry.clear()

    def _age_left(self, delivery: Delivery) -> float:
        return delivery.created + self.max_age_seconds - time.time()

    async def _send(self, delivery: Delivery, wake: asyncio.Event) -> None:
        endpoint = endpoint_of(delivery.server_url)
        window = min(self.window_seconds, self._age_left(delivery))
        if window <= 0:
            self._expire(delivery)
            return
        transport = get_shared_transport(0, per_host=self.client_settings.max_connections)
        client = OsmosisLLMClient(
            delivery.server_url,
            delivery.rollout_id,
            api_key=delivery.api_key,
            settings=self.client_settings,
            transport=transport,
            failures=self.failures,
        )
        try:
            await client.send_completion(
                delivery.body, window_seconds=window, wake=wake, on_attempt=self.on_attempt
            )
        except OsmosisValidationError as exc:
            if exc.status_code == ALREADY_COMPLETE:
                logger.info("rollout %s: TrainGate already has its result (409)", delivery.rollout_id)
            else:
                self.failures.log(
                    logging.ERROR,
                    f"callback rejected ({exc.status_code})",
                    endpoint,
                    "rollout %s: TrainGate rejected the terminal callback: %s",
                    delivery.rollout_id,
                    exc,
                )
            self._forget(delivery.key)
        except OsmosisRolloutError as exc:
            self.failures.log(
                logging.ERROR,
                "callback kept",
                endpoint,
                "rollout %s: the terminal callback to %s was not acknowledged within %g s (%s); kept for a "
                "retried init or the next start, at most %g s after it was made",
                delivery.rollout_id,
                delivery.server_url,
                window,
                exc,
                self.max_age_seconds,
            )
            self._expire_later(delivery)
        else:
            self._forget(delivery.key)
            logger.debug("rollout %s: terminal callback acknowledged", delivery.rollout_id)

    def _expire_later(self, delivery: Delivery) -> None:
        previous = self._expiry.pop(delivery.key, None)
        if previous is not None:
            previous.cancel()
        loop = asyncio.get_running_loop()
        self._expiry[delivery.key] = loop.call_later(
            max(self._age_left(delivery), 0.0), self._expire, delivery
        )

    def _expire(self, delivery: Delivery) -> None:
        """Drop ``delivery`` at its age limit, unless a newer one of its key replaced it or it is being sent."""
        key = delivery.key
        self._expiry.pop(key, None)
        stored = self.stored(key)
        running = self._running.get(key)
        if stored is None or stored.created != delivery.created:
            return
        if running is not None and running[0] is not asyncio.current_task():
            return  # being sent: that delivery's window ends at the age limit
        self.failures.log(
            logging.WARNING,
            "callback dropped",
            endpoint_of(delivery.server_url),
            "rollout %s: dropped the terminal callback to %s, not acknowledged %g s after it was made "
            "(outbox_max_age_seconds)",
            delivery.rollout_id,
            delivery.server_url,
            self.max_age_seconds,
        )
        self._forget(key)

    def _forget(self, key: str) -> None:
        handle = self._expiry.pop(key, None)
        if handle is not None:
            handle.cancel()
        self._unstored.pop(key, None)
        try:
            self.outbox.remove(key)
        except Exception:
            logger.exception("cannot remove the delivered callback %r from the outbox", key)
        if self.on_settled is not None:
            self.on_settled(key)
