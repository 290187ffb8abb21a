"""The rollout server's Prometheus figures, served at ``GET /metrics`` in the text format.

Counters and histograms are moved by the server's code where the event happens (one call each, with
the label's child looked up once); the gauges (running, queued, pending deliveries, the concurrency
limit) are read from the server's own state instead, at scrape time, so the hot path never keeps
them. Under ``osmosis serve --workers N`` the workers' figures are summed: with
``PROMETHEUS_MULTIPROC_DIR`` set (by ``serve`` for its children) every worker writes its values to
files there, the scraped worker reads them all (``MultiProcessCollector``), and each worker refreshes
its gauges once a second (``livesum``: the figures of live workers only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
GAUGE_REFRESH_SECONDS = 1.0
ROLLOUT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, float("inf"))
CHAT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, float("inf"))


@dataclass(frozen=True)
class Gauges:
    """The live figures of one server process, as ``/health`` has them."""

    running: int
    queued: int
    pending_deliveries: int
    max_concurrent: int


def multiprocess() -> bool:
    """Whether figures are kept in files shared by the server's worker processes."""
    return bool(os.environ.get(MULTIPROC_ENV))


class ServerMetrics:
    """The figures of one RolloutServer app (module docstring); ``gauges`` reads its live state."""

    def __init__(self, gauges: Callable[[], Gauges]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self._gauges = gauges
        self.multiprocess = multiprocess()
        # Each app has its own registry (tests build many apps in one process); in multiprocess mode
        # the values live in the shared files and the scrape's collector reads them from there.
        own = None if self.multiprocess else CollectorRegistry()
        self.registry = own if own is not None else _multiprocess_registry()

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
            return Counter(name, doc, labels, namespace="osmosis_rollout", registry=own)

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, namespace="osmosis_rollout", registry=own, multiprocess_mode="livesum")

        self._started = counter("started", "Rollouts accepted (inits that started a rollout)")
        self._finished = counter("finished", "Rollouts whose terminal report was committed", ("status",))
        self._inits = counter("init_responses", "Answers to POST /v1/rollout/init", ("code",))
        self._agent_errors = counter("agent_errors", "Rollouts ended with ERROR, by cause", ("kind",))
        self._callback_attempts = counter("callback_attempts", "POSTs of terminal reports to TrainGate")
        self._callback_failures = counter(
            "callback_failures", "Terminal report POSTs not acknowledged", ("reason",)
        )
        self._rollout_seconds = Histogram(
            "duration_seconds",
            "Rollout run time, from its concurrency slot to its outcome",
            namespace="osmosis_rollout",
            buckets=ROLLOUT_BUCKETS,
            registry=own,
        )
        self._chat_seconds = Histogram(
            "chat_call_duration_seconds",
            "Answered chat calls to TrainGate (the answering attempt)",
            namespace="osmosis_rollout",
            buckets=CHAT_BUCKETS,
            registry=own,
        )
        self._running = gauge("in_flight", "Rollouts holding a concurrency slot")
        self._queued = gauge("queued", "Accepted rollouts waiting for a concurrency slot")
        self._pending = gauge("pending_deliveries", "Terminal reports not acknowledged by TrainGate yet")
        self._limit = gauge("max_concurrent", "Rollouts allowed to run at once (summed over workers)")
        self._children: dict[int, dict[Any, Any]] = {}

    def _child(self, metric: Any, value: Any) -> Any:
        """The child of ``metric`` labelled ``value``, looked up by the registry once."""
        children = self._children.setdefault(id(metric), {})
        child = children.get(value)
        if child is None:
            child = children[value] = metric.labels(str(value))
        return child

    # -- events ---------------------------------------------------------------------------------------

    def rollout_started(self) -> None:
        self._started.inc()

    def rollout_ran(self, seconds: float) -> None:
        self._rollout_seconds.observe(seconds)

    def init_answered(self, code: int) -> None:
        self._child(self._inits, code).inc()

    def finished(self, status: str) -> None:
        self._child(self._finished, status).inc()

    def agent_error(self, kind: str) -> None:
        self._child(self._agent_errors, kind).inc()

    def chat_call(self, seconds: float) -> None:
        self._chat_seconds.observe(seconds)

    def callback_attempt(self, status: int | None) -> None:
        """One POST of a terminal report ended: ``status`` is TrainGate's answer, ``None`` for none."""
        self._callback_attempts.inc()
        if status is None or not 200 <= status < 300:
            self._child(self._callback_failures, "no_answer" if status is None else status).inc()

    # -- scraping -------------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Set the gauges from the server's live state."""
        now = self._gauges()
        self._running.set(now.running)
        self._queued.set(now.queued)
        self._pending.set(now.pending_deliveries)
        self._limit.set(now.max_concurrent)

    def render(self) -> bytes:
        """The text exposition of every figure (of all workers in multiprocess mode); reads files then,
        so call it off the event loop."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def _multiprocess_registry() -> Any:
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def content_type() -> str:
    from prometheus_client import CONTENT_TYPE_LATEST

    return str(CONTENT_TYPE_LATEST)
