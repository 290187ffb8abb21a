"""Concurrency that tunes itself: a :class:`~osmosis_ai._pool.Limit` that follows the model server.

:class:`AdaptiveLimit` hands slots to :func:`~osmosis_ai._pool.run_bounded` as a fixed limit does,
and learns how many the server can take from what the model-call seam reports after every request
(:meth:`AdaptiveLimit.observe`: the latency and a :class:`CallOutcome`) and, when the base URL serves
vLLM or SGLang Prometheus metrics, from the server's own queue and KV-cache figures. The rules, with
the measurements that chose them, are in docs/design/concurrency.md ("Concurrency that tunes itself"):

* **Rounds.** A decision is taken once per round: when requests sent since the limit last changed
  have answered, half the limit of them (4 at least; the whole limit for the first round and one
  judging growth, since the first answers after a change are those that did not queue) or, when
  their latencies are spread, enough for the round's median to be within about 5% (up to 256).
  Each decision judges the limit in force.
* **Latency.** The round's median over the floor (the lowest round median seen) times the batch
  (below). At most 1.25x that, with the slots in use, the limit grows; above 1.6x it is trimmed in
  proportion, back towards 1.25x (by half at the most). A trim that did not bring the latency down
  means the work got slower, not the queue longer: that latency becomes the floor, the batch 1.
* **Growth.** Doubling per round (slow start) until a round 1.1x over the floor or the first cut,
  then 10% a round (at least one slot), 20% and 40% for further rounds of growth in a row. No growth
  while fewer than 90% of the slots are used: a limit the work never reached says nothing.
* **The batch.** A server batching requests slows each one as its batch grows, with no queue. A
  growth of at least 1.2x in the slots in use whose round median rose by at most the square root of
  that (throughput rose at least half as much as the slots) shows the latency it started from was
  no queue: that latency over the floor becomes the batch (at most 2). A limit held between 1.25x
  and 1.6x steps up 25% to tell (once at that limit, never to where the last refusal or timeout
  came), and goes back if the step queued.
* **Refusals and timeouts** (429, 503, no answer in time) cut the limit to 0.7x at once. A refusal of
  a request sent before the last cut is old news and changes nothing. A ``Retry-After`` holds growth
  until it has passed and, when the server refuses everything (refused again with nothing served
  since the last cut, a typical latency or more after it), new admissions too; it is capped at 60 s (as the retry policy caps it) and
  counted from the refusal that carried it, so refusals never hold the limit longer than the server
  last asked, however long they go on.
* **Server metrics** (``/metrics`` beside ``/v1``), read about once a second while requests flow,
  through the SDK's shared HTTP pool, off the path of every model call: waiting requests over
  running ones count as queueing the way latency does (one trim per reading); rising preemptions
  trim to 0.85x; with no queue and room in the cache (under 90% full), latency may
  rise to twice the thresholds (the batch growing, not a queue). A reading older than 5 s is
  ignored and latency alone decides.

The limit never leaves ``[minimum, maximum]`` and :attr:`AdaptiveLimit.ceiling` is the maximum.
:meth:`AdaptiveLimit.summary` gives the limit over time (bounded in memory) for a run's summary and
``--json``. :func:`concurrency_limit` turns a command-line value (``"auto"`` or a number) into a
limit; a number is a :class:`~osmosis_ai._pool.FixedLimit` and never changes.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from statistics import median
from typing import Any, Protocol, runtime_checkable

from osmosis_ai._pool import FixedLimit, Limit

DEFAULT_MAXIMUM = 256
DEFAULT_INITIAL = 8

MIN_ROUND = 4  # answers a round needs at the least, so its median means something
MAX_ROUND = 256  # ... and at the most, however spread its latencies
ROUND_PRECISION = 0.05  # a round's median should be within about 5% (one standard error)
SLOW_START_BELOW = 1.1  # slow start ends at the first latency this far over the floor
GROW_BELOW = 1.25  # latency over the floor up to which the limit may grow
TRIM_ABOVE = 1.6  # latency over the floor above which it is trimmed
ROOMY = 2.0  # both thresholds times this while the server reports no queue and cache room
IN_USE = 0.9  # share of the slots a round must have used for growth to mean anything
GROWTH = 0.1  # growth per round after slow start, before it accelerates
BATCH_SHARE = 0.5  # a growth whose latency rose by at most this share of it (in logs) bought throughput
MIN_PROBE = 1.2  # ... judged only for growth at least this large (slots in use), above the noise of medians
MAX_BATCH = 2.0  # the most latency over the floor that growth can show to be the batch
PROBE = 0.25  # the step up from a limit held between the thresholds, to tell the batch from a queue
MAX_GROWTH = 0.4
BACKOFF = 0.7  # the cut on a refusal or a timeout
MAX_TRIM = 0.5  # a latency or queue trim never takes more than half
PREEMPTION_BACKOFF = 0.85
KV_FULL = 0.9  # a cache this full leaves no room for a growing batch
MAX_PAUSE = 60.0  # the longest a Retry-After holds admissions
POLL_INTERVAL = 1.0
POLL_TIMEOUT = 5.0
STALE_AFTER = 5.0
INLINE_PARSE = 64 * 1024  # metrics pages up to this many bytes are read on the loop, larger in a thread


class CallOutcome(str, Enum):
    """How a model request ended, as far as the server's capacity is concerned."""

    SUCCESS = "success"
    REFUSED = "refused"  # 429 or 503: the server or provider turned it away
    TIMEOUT = "timeout"  # no answer in time
    ERROR = "error"  # anything else: says nothing about capacity


def outcome_for_status(status: int) -> CallOutcome:
    """The outcome an HTTP answer with ``status`` stands for."""
    if 200 <= status < 300:
        return CallOutcome.SUCCESS
    if status in (429, 503):
        return CallOutcome.REFUSED
    if status in (408, 504):
        return CallOutcome.TIMEOUT
    return CallOutcome.ERROR


@runtime_checkable
class CallObserver(Protocol):
    """What the model-call seam tells after each request (each attempt, retries included)."""

    def observe(self, outcome: CallOutcome, latency: float, *, retry_after: float | None = None) -> None:
        """``latency``: seconds from sending the request to its answer (or to giving up on it)."""
        ...


# -- the server's own figures ----------------------------------------------------------------------


@dataclass(frozen=True)
class ServerLoad:
    """One reading of a model server's ``/metrics``; ``None`` where the server does not report it.

    ``waiting``/``running``: requests queued and being served (summed over engines); ``kv_usage``:
    the fullest engine's KV cache, 0 to 1; ``preemptions``: the server's running total.
    """

    waiting: float | None = None
    running: float | None = None
    kv_usage: float | None = None
    preemptions: float | None = None

    @property
    def queue_ratio(self) -> float | None:
        """Requests in the server over those it serves: what latency over its floor is for a queue."""
        if self.waiting is None or self.running is None:
            return None
        return 1.0 + self.waiting / max(self.running, 1.0)


_SERIES: dict[str, str] = {
    "vllm:num_requests_waiting": "waiting",
    "sglang:num_queue_reqs": "waiting",
    "vllm:num_requests_running": "running",
    "sglang:num_running_reqs": "running",
    "vllm:gpu_cache_usage_perc": "kv_usage",  # a fraction despite the name
    "vllm:kv_cache_usage_perc": "kv_usage",
    "sglang:token_usage": "kv_usage",
    "vllm:num_preemptions_total": "preemptions",
    "sglang:num_retracted_requests_total": "preemptions",
    "sglang:num_retracted_reqs_total": "preemptions",
}
_PREFIXES = tuple({name.split(":", 1)[0] + ":" for name in _SERIES})


def parse_server_metrics(text: str) -> ServerLoad | None:
    """The load figures of a Prometheus text page from vLLM or SGLang; ``None`` if it has none of them."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(_PREFIXES):
            continue
        brace = line.find("{")
        if brace >= 0:
            name, rest = line[:brace], line[line.rfind("}") + 1 :]
        else:
            name, _, rest = line.partition(" ")
        field = _SERIES.get(name.rstrip())
        if field is None:
            continue
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if not math.isfinite(value):
            continue
        if field == "kv_usage":  # the fullest engine's cache is the one that refuses work
            found[field] = max(found.get(field, 0.0), value)
        else:  # requests and preemptions add up across engines
            found[field] = found.get(field, 0.0) + value
    return ServerLoad(**found) if found else None


def metrics_url_for(base_url: str) -> str:
    """Where an OpenAI-compatible server at ``base_url`` serves its metrics: ``/metrics`` beside ``/v1``."""
    root = base_url.split("?", 1)[0].rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return f"{root}/metrics"


# -- the record of the limit -----------------------------------------------------------------------


@dataclass(frozen=True)
class LimitChange:
    """The limit became ``limit`` at ``at`` seconds after it was made, for ``reason``."""

    at: float
    limit: int
    reason: str


class LimitHistory:
    """The changes of a limit, at most ``capacity`` of them: when full, every other one is dropped.

    The first and the latest change are always kept, so the record spans the whole run at a
    resolution that halves each time it fills.
    """

    def __init__(self, capacity: int = 512) -> None:
        if capacity < 4:
            raise ValueError(f"a limit history needs room for at least 4 changes, got {capacity}")
        self.capacity = capacity
        self._changes: list[LimitChange] = []

    def record(self, change: LimitChange) -> None:
        self._changes.append(change)
        if len(self._changes) > self.capacity:
            last = self._changes[-1]
            self._changes = self._changes[:-1:2]
            self._changes.append(last)

    def __iter__(self) -> Iterator[LimitChange]:
        return iter(tuple(self._changes))


# -- the limit ---------------------------------------------------------------------------------------


class AdaptiveLimit:
    """A :class:`~osmosis_ai._pool.Limit` that grows and shrinks with the server (module docstring).

    Args:
        minimum: the fewest slots it ever hands out.
        maximum: the most (``--max-concurrency``); also :attr:`ceiling`.
        initial: where it starts (default 8, within the bounds).
        metrics_url: a vLLM/SGLang ``/metrics`` URL to read (:func:`metrics_url_for` of a base URL);
            ``None`` reads none. A server that answers it with anything but such a page is not asked again.
        clock: seconds, monotonic (tests pass a simulated one).
        history_capacity: how many changes the record keeps (:class:`LimitHistory`).

    One limit belongs to one event loop. :meth:`aclose` stops a metrics reading in progress.
    """

    def __init__(
        self,
        *,
        minimum: int = 1,
        maximum: int = DEFAULT_MAXIMUM,
        initial: int | None = None,
        metrics_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        history_capacity: int = 512,
    ) -> None:
        for name, value in (("minimum", minimum), ("maximum", maximum)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"the {name} concurrency must be a whole number of at least 1, got {value!r}"
                )
        if maximum < minimum:
            raise ValueError(f"the maximum concurrency ({maximum}) is below the minimum ({minimum})")
        start = DEFAULT_INITIAL if initial is None else initial
        if isinstance(start, bool) or not isinstance(start, int):
            raise ValueError(f"the initial concurrency must be a whole number, got {initial!r}")
        self.minimum = minimum
        self.maximum = maximum
        self.metrics_url = metrics_url
        self._clock = clock
        self._born = clock()
        self._level = float(min(max(start, minimum), maximum))
        self._held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._wake_at: asyncio.TimerHandle | None = None
        # control state
        self._slow_start = True
        self._streak = 0  # rounds of growth in a row
        self._changed_at = self._born
        self._samples: list[float] = []
        self._peak = 0
        self._floor = math.inf  # the lowest round median since the floor was last measured again
        self._batch = 1.0  # latency over the floor that growth showed to be the batch, not a queue
        self._grown_from: tuple[int, float] | None = None  # slots used and median before the last growth
        self._probe_from: float | None = None  # the level a probe in progress returns to
        self._probed = False  # the level in force was probed and showed a queue
        self._refused_at = math.inf  # the level in force at the last refusal or timeout
        self._needed = self._least_round()  # answers this round needs
        self._trimmed_at: float | None = None  # the latency ratio of the last decision, if it trimmed
        self._last_cut = -math.inf
        self._grow_after = -math.inf  # a Retry-After holds growth until then
        self._pause_until = -math.inf  # ... and admissions, while nothing gets through
        self._answered_since_cut = True
        # server metrics
        self._load: ServerLoad | None = None
        self._load_at = -math.inf
        self._load_spent = False  # a reading justifies one trim at most
        self._preemptions: float | None = None
        self._fetch: asyncio.Task[None] | None = None
        self._fetched_at = -math.inf
        self._metrics_off: str | None = None if metrics_url else "no metrics URL"
        self._readings = 0
        self._closed = False
        # the record
        self.history = LimitHistory(history_capacity)
        self._counts: dict[str, int] = {}
        self._outcomes = dict.fromkeys((o.value for o in CallOutcome), 0)
        self._area = 0.0  # integral of the limit over time, up to the last change
        self._recorded_at = self._born
        self._lowest = self._highest = self.limit
        self.history.record(LimitChange(0.0, self.limit, "start"))

    # -- the Limit protocol ------------------------------------------------------------------------

    @property
    def ceiling(self) -> int:
        return self.maximum

    @property
    def limit(self) -> int:
        """How many slots it hands out now."""
        return int(self._level)

    @property
    def in_flight(self) -> int:
        """Slots held now (may exceed :attr:`limit` for a while after a cut)."""
        return self._held

    def try_acquire(self) -> bool:
        """Take a slot if one is free now (none while a ``Retry-After`` holds admissions)."""
        if self._waiters or not self._admits():
            return False
        self._take()
        return True

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake_after_pause()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # granted, then cancelled before it could be used
            raise

    def release(self) -> None:
        self._held -= 1
        self._grant()

    # -- what the model-call seam reports ------------------------------------------------------------

    def observe(self, outcome: CallOutcome, latency: float, *, retry_after: float | None = None) -> None:
        """Count one model request: how it ended and how long it took (:class:`CallObserver`)."""
        now = self._clock()
        self._outcomes[outcome.value] += 1
        self._maybe_read_metrics(now)
        sent = now - max(latency, 0.0)
        if outcome is CallOutcome.REFUSED or outcome is CallOutcome.TIMEOUT:
            if sent >= self._last_cut:
                self._cut(now, outcome.value, retry_after)
            return
        if outcome is not CallOutcome.SUCCESS:
            return
        if sent >= self._last_cut:
            self._answered_since_cut = True
        if sent < self._changed_at:
            return
        self._samples.append(latency)
        if len(self._samples) >= self._needed:
            self._needed = self._round_size()
            if len(self._samples) >= self._needed:
                self._decide(now)

    def observe_metrics(self, load: ServerLoad) -> None:
        """Count one reading of the server's metrics (the limit reads them itself given a URL)."""
        now = self._clock()
        before = self._preemptions
        if load.preemptions is not None:
            self._preemptions = load.preemptions  # a total that went down is a restarted server
        preempted = before is not None and load.preemptions is not None and load.preemptions > before
        if preempted and now - self._last_cut >= self._typical_latency():
            self._slow_start = False
            self._last_cut = now
            self._change(now, self._level * PREEMPTION_BACKOFF, "preemption")
        self._load, self._load_at, self._load_spent = load, now, False
        self._readings += 1

    # -- deciding ------------------------------------------------------------------------------------

    def _decide(self, now: float) -> None:
        middle = median(self._samples)
        self._floor = min(self._floor, middle)
        learned = self._learn_batch(middle)
        over_floor = middle / self._floor if self._floor > 0 else 1.0
        ratio = over_floor / self._batch
        load = self._load if now - self._load_at <= STALE_AFTER else None
        queue = None if load is None else load.queue_ratio
        full = load is not None and load.kv_usage is not None and load.kv_usage >= KV_FULL
        # A reading taken under the limit in force that shows no queue and cache to spare: latency
        # rising now is the batch growing, not a queue.
        roomy = load is not None and self._load_at >= self._changed_at and queue is not None and queue <= 1.0
        scale = ROOMY if roomy and not full else 1.0
        trimmed_at, self._trimmed_at = self._trimmed_at, None
        probe_from, self._probe_from = self._probe_from, None
        probe = float(math.ceil(self._level * (1 + PROBE)))  # at least one slot up
        # Once per limit, within the maximum, never to the limit of the last refusal or timeout.
        may_probe = (
            not self._probed and self._batch < MAX_BATCH and probe < min(self._refused_at, self.maximum + 1)
        )
        growing = (
            (queue is None or queue <= GROW_BELOW)
            and self._peak >= math.ceil(IN_USE * self.limit)
            and now >= self._grow_after
        )
        if probe_from is not None and not learned:
            self._probed = True  # the step up queued: back to where it was, for good
            self._change(now, probe_from, "probe")
        elif queue is not None and queue > TRIM_ABOVE and not self._load_spent:
            self._load_spent = True
            self._trim(now, queue, "queue")
        elif ratio > TRIM_ABOVE * scale:
            if trimmed_at is not None and ratio >= 0.9 * trimmed_at:
                # The last trim did not bring the latency down: the work got slower, no queue grew.
                # What it takes now is the floor.
                self._floor, self._batch = middle, 1.0
                self._hold()
            else:
                self._trimmed_at = ratio
                self._trim(now, ratio, "latency")
        elif ratio <= GROW_BELOW * scale and growing:
            self._grow(now, over_floor, middle)
        elif growing and may_probe:
            # Held between the thresholds, latency says nothing of a queue or a batch: a step up does.
            self._probe_from = self._level
            self._grown_from = (max(self._peak, 1), middle)
            self._slow_start = False
            self._change(now, probe, "probe")
        else:
            self._hold()

    def _learn_batch(self, middle: float) -> bool:
        """After growth: latency that rose much less than the slots in use was not a queue before it.

        What it certifies is the latency the growth started from: the one it ended at may have
        crossed the capacity part of the way.
        """
        grown_from, self._grown_from = self._grown_from, None
        if grown_from is None or self._floor <= 0:
            return False
        used, before = grown_from
        rise = self._peak / used
        if rise < MIN_PROBE or middle > before * rise**BATCH_SHARE:
            return False
        self._batch = min(max(self._batch, before / self._floor), MAX_BATCH)
        return True

    def _grow(self, now: float, over_floor: float, middle: float) -> None:
        self._grown_from = (max(self._peak, 1), middle)
        # Slow start ends at the first rise over the floor, even one shown to be the batch: a doubling
        # that crosses the capacity can look like the batch growing.
        self._slow_start = self._slow_start and over_floor <= SLOW_START_BELOW
        if self._slow_start:
            level = self._level * 2
        else:
            share = min(GROWTH * 2**self._streak, MAX_GROWTH)
            level = self._level + max(1.0, self._level * share)
        self._streak += 1
        self._change(now, level, "grow")

    def _trim(self, now: float, ratio: float, reason: str) -> None:
        self._slow_start = False
        self._change(now, self._level * max(GROW_BELOW / ratio, MAX_TRIM), reason)

    def _cut(self, now: float, reason: str, retry_after: float | None) -> None:
        self._slow_start = False
        # Refused again with nothing served since the last cut, though a served answer had time to
        # come (refusals come back faster): the server refuses everything, as a rate limit does.
        refusing = not self._answered_since_cut and now - self._last_cut >= self._typical_latency()
        self._last_cut = now
        self._refused_at = self._level
        self._answered_since_cut = False
        if retry_after is not None and retry_after > 0:
            until = now + min(retry_after, MAX_PAUSE)
            self._grow_after = max(self._grow_after, until)
            if refusing:  # ... so it is asked nothing new until its hint has passed
                self._pause_until = max(self._pause_until, until)
        self._change(now, self._level * BACKOFF, reason)

    def _round_size(self) -> int:
        """Answers the round needs: half the limit (4 at least), more for a median as noisy as its spread."""
        needed = self._least_round()
        if len(self._samples) < needed or self._slow_start:  # a doubling too many is cut back soon
            return needed
        ordered = sorted(self._samples)
        count = len(ordered)
        middle = ordered[count // 2]
        if middle <= 0:
            return needed
        spread = (ordered[(3 * count) // 4] - ordered[count // 4]) / (1.349 * middle)  # IQR as a deviation
        return max(needed, min(MAX_ROUND, math.ceil((1.2533 * spread / ROUND_PRECISION) ** 2)))

    def _least_round(self) -> int:
        # A round judging growth, or the first one, waits for the slots' worth of answers: the first
        # answers after a change are those that did not queue.
        whole = self._grown_from is not None or math.isinf(self._floor)
        return max(MIN_ROUND, math.ceil(self._level if whole else self._level / 2))

    def _new_round(self) -> None:
        self._samples.clear()
        self._peak = self._held
        self._needed = self._least_round()

    def _hold(self) -> None:
        self._streak = 0
        self._new_round()

    def _change(self, now: float, level: float, reason: str) -> None:
        before = self.limit
        self._level = min(max(level, float(self.minimum)), float(self.maximum))
        if reason != "grow":
            self._streak = 0
        if reason not in ("grow", "probe"):
            self._grown_from = self._probe_from = None
            self._probed = False
        self._changed_at = now
        self._new_round()
        after = self.limit
        if after != before:
            self._area += before * (now - self._recorded_at)
            self._recorded_at = now
            self.history.record(LimitChange(now - self._born, after, reason))
            self._counts[reason] = self._counts.get(reason, 0) + 1
            self._lowest, self._highest = min(self._lowest, after), max(self._highest, after)
            self._grant()

    def _typical_latency(self) -> float:
        return 0.0 if math.isinf(self._floor) else self._floor

    # -- slots ---------------------------------------------------------------------------------------

    def _admits(self) -> bool:
        return self._held < self.limit and self._clock() >= self._pause_until

    def _take(self) -> None:
        self._held += 1
        self._peak = max(self._peak, self._held)

    def _grant(self) -> None:
        while self._waiters and self._admits():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._take()
                waiter.set_result(None)
        self._wake_after_pause()  # a timer may fire a little early; it then sets itself again

    def _wake_after_pause(self) -> None:
        wait = self._pause_until - self._clock()
        if not self._waiters or wait <= 0:
            return
        if self._wake_at is not None:
            self._wake_at.cancel()
        self._wake_at = asyncio.get_running_loop().call_later(wait, self._grant)

    # -- reading the server's metrics ----------------------------------------------------------------

    def _maybe_read_metrics(self, now: float) -> None:
        if (
            self._metrics_off is not None
            or self._closed
            or self._fetch is not None
            or now - self._fetched_at < POLL_INTERVAL
        ):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._fetched_at = now
        self._fetch = loop.create_task(self._read_metrics())
        self._fetch.add_done_callback(self._read_done)

    async def _read_metrics(self) -> None:
        from osmosis_ai._http import NoAnswer, shared_pool

        url = self.metrics_url
        assert url is not None
        try:
            response = await shared_pool().request("GET", url, timeout=POLL_TIMEOUT)
        except NoAnswer:
            return  # the last reading goes stale; latency decides meanwhile
        if response.status != 200:
            self._metrics_off = f"{url} answered {response.status}"
            return
        text = response.body.decode("utf-8", "replace")
        if len(text) <= INLINE_PARSE:
            load = parse_server_metrics(text)
        else:
            load = await asyncio.to_thread(parse_server_metrics, text)
        if load is None:
            self._metrics_off = f"{url} has no vLLM or SGLang load figures"
            return
        self.observe_metrics(load)

    def _read_done(self, task: asyncio.Task[None]) -> None:
        self._fetch = None
        if not task.cancelled() and (error := task.exception()) is not None:
            self._metrics_off = f"reading {self.metrics_url} failed: {type(error).__name__}: {error}"

    async def aclose(self) -> None:
        """Stop a metrics reading in progress; the limit keeps working on latency alone."""
        fetch, self._closed = self._fetch, True
        if fetch is not None:
            fetch.cancel()
            await asyncio.gather(fetch, return_exceptions=True)

    # -- the record ----------------------------------------------------------------------------------

    @property
    def metrics_status(self) -> str:
        """``"reading"``, ``"stale"``, ``"waiting"`` for a first reading, or why none are read."""
        if self._metrics_off is not None:
            return self._metrics_off
        if self._load is None:
            return "waiting"
        return "reading" if self._clock() - self._load_at <= STALE_AFTER else "stale"

    def summary(self) -> dict[str, Any]:
        """The limit over the run so far, JSON-ready: bounds, lowest/highest/mean, why it changed, history."""
        now = self._clock()
        elapsed = now - self._born
        area = self._area + self.limit * (now - self._recorded_at)
        return {
            "mode": "auto",
            "minimum": self.minimum,
            "maximum": self.maximum,
            "limit": self.limit,
            "lowest": self._lowest,
            "highest": self._highest,
            "mean": round(area / elapsed, 2) if elapsed > 0 else float(self.limit),
            "changes": dict(sorted(self._counts.items())),
            "requests": dict(self._outcomes),
            "metrics": {"readings": self._readings, "state": self.metrics_status},
            "history": [[round(c.at, 3), c.limit, c.reason] for c in self.history],
        }


def concurrency_limit(value: str | int, *, maximum: int | None = None, base_url: str | None = None) -> Limit:
    """The limit a command-line value stands for: ``"auto"`` adapts, a whole number is fixed.

    ``maximum`` bounds ``auto`` (default :data:`DEFAULT_MAXIMUM`); a fixed number above it is refused.
    ``base_url`` (an OpenAI-compatible ``.../v1``) is where ``auto`` looks for server metrics.
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        url = None if base_url is None else metrics_url_for(base_url)
        return AdaptiveLimit(maximum=DEFAULT_MAXIMUM if maximum is None else maximum, metrics_url=url)
    number: Any = value
    if isinstance(value, str):
        text = value.strip()
        number = int(text) if text.isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"concurrency must be 'auto' or a whole number of at least 1, got {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(f"a concurrency of {number} is above the maximum concurrency of {maximum}")
    return FixedLimit(number)


def observer_of(limit: Limit | int) -> CallObserver | None:
    """The observer a model-call seam should report to for ``limit``: itself if it adapts, else none."""
    return limit if isinstance(limit, CallObserver) else None
