"""The processes backend: a run's work items in local worker processes that can be killed.

With ``--backend local`` the items run in the run's own process, so an agent stuck in a C call that
holds the GIL for good stops every thread, the clock of ``--timeout`` included. Here each item runs
in a worker process of the reward runtime (:mod:`osmosis_ai.rewards.runtime`), which keeps every
item's deadline from outside: a worker whose item is still running past it is killed and replaced.

Each worker builds, once, the same pipeline a Ray worker builds from the
:class:`~osmosis_ai.runs.backends.ray.WorkerSpec` (:func:`build`, the runtime's setup), and runs
its share of the items at once on the event loop it was built on (:func:`run_item`, a raw target).
The run's process keeps the dataset, the journal, the progress and the outputs; it journals only
the results that came back, so no item counts twice.

How an item ends that its worker did not finish:

* still running :data:`GRACE` seconds past the plan's time limit per item: ``timeout``, as in the
  run's process (where the pipeline's own deadline ends it first, the worker's answer is that same
  ``timeout``);
* its worker died under it (``os._exit``, a crash, the kernel's kill): ``infra_error``, which a
  resumed run runs again. The other items the worker held run again, those running beside it
  each alone first, so only the item that kills its worker alone fails.

What an agent prints in a worker is not shown, as on Ray's workers.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import pickle

from osmosis_ai.errors import EvaluationError
from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.runtime.errors import WorkerStartError
from osmosis_ai.rewards.runtime.scoring import RewardRuntime, default_workers
from osmosis_ai.runs.backends.ray import WorkerSpec
from osmosis_ai.runs.engine import ProcessItem
from osmosis_ai.runs.executors.local import ABANDON_GRACE_SECONDS
from osmosis_ai.runs.items import WorkItem
from osmosis_ai.runs.result import Attempt, Result

GRACE = 2 * ABANDON_GRACE_SECONDS + 1.0
"""Seconds past the item's time limit before its worker is stopped: the pipeline in the worker ends
an item past its deadline itself (an agent that does not stop is cancelled, closed, then left, a
grace apart), unless the worker's every thread is stuck."""

_pipeline: ProcessItem | None = None
_stack = contextlib.AsyncExitStack()  # the worker's pipeline: ends with the worker process


async def build(spec: WorkerSpec, share: int) -> None:
    """In a worker: build the pipeline ``spec`` names, ``share`` items in flight (the runtime's setup)."""
    global _pipeline
    from osmosis_ai.rewards.runtime import worker

    # This worker runs the SDK's pipeline, not a reward: its scoring functions get worker processes
    # of their own, as in the run's process (this worker's keeper ends them with it).
    worker.IN_WORKER = False
    module, _, attribute = spec.factory.rpartition(":")
    factory = getattr(importlib.import_module(module), attribute)
    _pipeline = await _stack.enter_async_context(factory(spec.settings, share))


async def run_item(item: WorkItem) -> Result | Exception:
    """In a worker: ``item``'s result, or the exception the pipeline raised, as it travels back."""
    assert _pipeline is not None, "build() first"
    try:
        result = await _pipeline(item)
    except Exception as exc:
        try:
            pickle.dumps(exc)
        except Exception:
            return EvaluationError(f"{type(exc).__name__}: {exc}")
        return exc
    result.attempt.source = None  # the executor's own object stays in the worker
    try:
        pickle.dumps(result)
    except Exception as exc:
        error = f"its result cannot be sent back from its worker process: {type(exc).__name__}: {exc}"
        return Result(item, Attempt(Outcome.INFRA_ERROR, error=error), Outcome.INFRA_ERROR)
    return result


class ItemProcesses:
    """Runs work items in worker processes (see the module docstring); ``await pool(item)`` is its result."""

    def __init__(self, spec: WorkerSpec, *, concurrency: int, timeout: float | None) -> None:
        self.workers = max(1, min(default_workers(), concurrency))
        share = math.ceil(concurrency / self.workers)
        self._timeout = timeout
        self._runtime = RewardRuntime(
            f"{__name__}:run_item",
            timeout=timeout + GRACE if timeout else None,
            workers=self.workers,
            concurrency=share,
            kind="work item",
            raw=True,
            setup=f"{__name__}:build",
            setup_args=(spec, share),
        )

    async def start(self) -> None:
        """Start the workers, each with its pipeline built."""
        try:
            await self._runtime.start()
        except WorkerStartError as exc:
            raise EvaluationError(f"the processes backend cannot start its workers: {exc}") from None

    async def __call__(self, item: WorkItem) -> Result:
        ran = await self._runtime.call(item)
        value = ran.value
        if ran.outcome is Outcome.COMPLETED and isinstance(value, Exception):
            raise value  # the pipeline's own error, the run's to handle as in one process
        if ran.outcome is Outcome.COMPLETED:
            value.item = item
            return value
        if ran.outcome is Outcome.REWARD_TIMEOUT:
            error = f"it did not finish within {self._timeout:g}s; its worker process was killed"
            return Result(item, Attempt(Outcome.TIMEOUT, error=error), Outcome.TIMEOUT)
        return Result(item, Attempt(Outcome.INFRA_ERROR, error=ran.error), Outcome.INFRA_ERROR)

    async def aclose(self) -> None:
        """End every worker process."""
        await self._runtime.close()
