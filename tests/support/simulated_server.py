"""A model server and its clients in simulated time, to test the adaptive limit deterministically.

:class:`Simulation` runs a discrete-event simulation: no real time passes and a seeded random
generator draws the latencies, so a run is the same every time. Its server serves ``capacity``
requests at once (one service time each, drawn around ``latency``), queues the next ones in order
(latency grows past the capacity, as on a continuous-batching server), and refuses with 429 and a
``Retry-After`` any request that finds ``refuse_past * capacity`` already inside (twice, unless told).
With ``batch_slowdown`` ``s``, a request served beside ``r`` others takes ``1 + s * r / capacity`` times
longer, as a batch step slows with the batch: latency rises before any queue. ``workers`` clients each take
one slot of the limit per item, send, and report every answer to the limit as the model-call seam
will (:meth:`AdaptiveLimit.observe`); a refused request is retried while
the item keeps its slot, at most ``attempts`` times in all, waiting as the SDK's retry policy does.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from osmosis_ai._http import RetryPolicy
from osmosis_ai.models.concurrency import AdaptiveLimit, CallOutcome, ServerLoad

_RETRY = RetryPolicy(jitter=False)  # the SDK's policy, its back-off drawn at the top of its range


@dataclass
class Served:
    """What happened in one window of simulated time."""

    completed: int = 0
    refused: int = 0
    failed: int = 0
    timed_out: int = 0


@dataclass
class _Request:
    sent: float
    attempt: int
    answered: bool = False


@dataclass(order=True)
class _Event:
    at: float
    order: int
    action: Callable[[], None] = field(compare=False)


class Simulation:
    """A simulated server of ``capacity`` and ``workers`` clients sharing one :class:`AdaptiveLimit`."""

    def __init__(
        self,
        *,
        capacity: int,
        latency: float = 1.0,
        jitter: float = 0.2,
        workers: int = 400,
        retry_after: float | None = 1.0,
        attempts: int = 4,
        timeout: float | None = None,
        refuse_past: float | None = 2.0,
        batch_slowdown: float = 0.0,
        metrics_every: float | None = None,
        seed: int = 1,
        limit: Callable[[Callable[[], float]], AdaptiveLimit] | None = None,
    ) -> None:
        self.now = 0.0
        self.capacity = capacity
        self.latency = latency
        self.jitter = jitter
        self.retry_after = retry_after
        self.attempts = attempts
        self.timeout = timeout
        self.refuse_past = refuse_past
        self.batch_slowdown = batch_slowdown
        self.refuse_everything = False
        self.slowdown = 1.0  # service times times this (the work itself getting slower)
        self.limit = limit(self.clock) if limit is not None else AdaptiveLimit(clock=self.clock)
        self.preemptions = 0
        self._random = random.Random(seed)
        self._events: list[_Event] = []
        self._order = itertools.count()
        self._serving = 0
        self._queue: deque[tuple[_Request, float]] = deque()
        self._waiting_items = workers
        self._window = Served()
        self.samples: list[tuple[float, int, int]] = []  # (time, limit, in flight at the server)
        self.answers: list[tuple[float, CallOutcome]] = []  # every answer the clients got, in order
        if metrics_every is not None:
            self._every(metrics_every, self._report_metrics)
        self._every(0.01, self._admit)
        self._every(latency / 4, self._sample)

    def clock(self) -> float:
        return self.now

    # -- running -------------------------------------------------------------------------------------

    def run_for(self, seconds: float) -> Served:
        """Advance ``seconds`` of simulated time; what was served meanwhile."""
        self._window = Served()
        end = self.now + seconds
        self._admit()
        while self._events and self._events[0].at <= end:
            event = heapq.heappop(self._events)
            self.now = event.at
            event.action()
        self.now = end
        return self._window

    def limits_between(self, start: float, end: float) -> list[int]:
        """The limit as sampled four times per latency from ``start`` to ``end``."""
        return [limit for at, limit, _ in self.samples if start <= at <= end]

    def full_rate(self, seconds: float) -> float:
        """Answers the server gives in ``seconds`` when always busy: capacity over mean latency at a full batch."""
        batch = 1 + self.batch_slowdown * (self.capacity - 1) / self.capacity
        return self.capacity * seconds / (self.latency * self.slowdown * batch)

    def in_server(self) -> int:
        return self._serving + len(self._queue)

    # -- the clients ---------------------------------------------------------------------------------

    def _admit(self) -> None:
        while self._waiting_items and self.limit.try_acquire():
            self._waiting_items -= 1
            self._send(1)

    def _send(self, attempt: int) -> None:
        request = _Request(sent=self.now, attempt=attempt)
        full = self.refuse_past is not None and self.in_server() >= self.refuse_past * self.capacity
        if self.refuse_everything or full:
            self._at(self.now + 0.001 * self.latency, lambda: self._refused(request))
            return
        if self.timeout is not None:
            self._at(self.now + self.timeout, lambda: self._timed_out(request))
        if self._serving < self.capacity and not self._queue:
            self._serve(request)
        else:
            self._queue.append((request, self.now))

    def _refused(self, request: _Request) -> None:
        self._window.refused += 1
        self.answers.append((self.now, CallOutcome.REFUSED))
        self.limit.observe(CallOutcome.REFUSED, self.now - request.sent, retry_after=self.retry_after)
        if request.attempt >= self.attempts:
            self._window.failed += 1
            self._finish_item()
            return
        wait = _RETRY.delay(request.attempt, self.retry_after)
        self._at(self.now + wait, lambda: self._send(request.attempt + 1))

    def _timed_out(self, request: _Request) -> None:
        if request.answered:
            return
        request.answered = True
        self._window.timed_out += 1
        self.answers.append((self.now, CallOutcome.TIMEOUT))
        self._window.failed += 1
        self.limit.observe(CallOutcome.TIMEOUT, self.now - request.sent)
        self._finish_item()

    def _answered(self, request: _Request) -> None:
        if request.answered:
            return  # the client gave up on it already
        request.answered = True
        self._window.completed += 1
        self.answers.append((self.now, CallOutcome.SUCCESS))
        self.limit.observe(CallOutcome.SUCCESS, self.now - request.sent)
        self._finish_item()

    def _finish_item(self) -> None:
        self.limit.release()
        self._waiting_items += 1
        self._admit()

    # -- the server ----------------------------------------------------------------------------------

    def _serve(self, request: _Request) -> None:
        self._serving += 1
        spread = self._random.uniform(1 - self.jitter, 1 + self.jitter)
        batch = 1 + self.batch_slowdown * (self._serving - 1) / self.capacity
        self._at(self.now + self.latency * self.slowdown * batch * spread, lambda: self._served(request))

    def _served(self, request: _Request) -> None:
        self._serving -= 1
        while self._queue and self._serving < self.capacity:
            queued, _ = self._queue.popleft()
            self._serve(queued)
        self._answered(request)

    def _report_metrics(self) -> None:
        self.limit.observe_metrics(
            ServerLoad(
                waiting=float(len(self._queue)),
                running=float(self._serving),
                kv_usage=self._serving / self.capacity,
                preemptions=float(self.preemptions),
            )
        )

    def _sample(self) -> None:
        self.samples.append((self.now, self.limit.limit, self.in_server()))

    # -- scheduling ----------------------------------------------------------------------------------

    def _at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._events, _Event(when, next(self._order), action))

    def _every(self, interval: float, action: Callable[[], None]) -> None:
        def tick() -> None:
            action()
            self._at(self.now + interval, tick)

        self._at(self.now + interval, tick)
