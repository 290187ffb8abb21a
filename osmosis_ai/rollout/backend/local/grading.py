"""A 0.3 grader in the reward runtime's worker processes (``LocalBackend(grader_workers=N)``).

The server's event loop cannot stop a grader that blocks it (``time.sleep`` or a CPU loop inside
``async def grade``), nor survive one that calls ``os._exit`` or crashes the interpreter. So the
grader runs in a warm pool of the reward runtime's workers (:mod:`osmosis_ai.rewards.runtime`):
each worker imports :func:`grade_in_worker` once, and per graded rollout it is sent the grader's
import path, its config, the row's label and metadata and the workflow's sample; it loads the
grader class once, grades on a fresh instance with a :class:`GraderContext` of its own (so
``ctx.set_reward`` and any change to ``ctx.sample`` come back with the graded sample), and answers
with the sample or the typed failure. Each worker grades one rollout at a time, so a grader that
hangs holds only its own worker.

The rollout's grader deadline stays the server's: at it the server stops waiting, and the runtime
(with ``caller_deadlines``) kills the worker still running it and starts another. A worker that
dies under a grader fails that rollout alone (``agent_error``); the other rollouts it would have
graded go to the other workers.

A grader runs here only if a fresh interpreter can import it and its config by name
(:func:`grader_runtime_for`): one defined in ``__main__`` or inside a function grades in the
server's process, as without ``grader_workers``, and the server says so once at start. Each worker
imports the grader's module: one that builds the app on import (``uvicorn main:app``) builds it
there too, without grader workers of its own and without serving it.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import traceback
from typing import Any

from osmosis_ai._usercode import UserCodeRaised, forget_traceback
from osmosis_ai.outcome import Outcome
from osmosis_ai.rollout.backend.local.backend import LocalBackend, grade_sample
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.types.config import GraderConfig
from osmosis_ai.rollout.types.sample import ExecutionRequest, ExecutionResult, RolloutSample
from osmosis_ai.rollout.types.status import RolloutErrorCategory, RolloutStatus, category_of

logger = logging.getLogger(__name__)

WORKER_TARGET = f"{__name__}:grade_in_worker"

Failure = tuple[str, str, str]
"""What a worker answers for a grader that failed: the category, the message, the traceback."""

_graders: dict[str, type[Grader]] = {}
_loop: asyncio.AbstractEventLoop | None = None


def grade_in_worker(
    grader: str,
    config: GraderConfig | None,
    label: str | None,
    metadata: dict[str, Any] | None,
    sample: RolloutSample | None,
) -> RolloutSample | Failure:
    """Run in a worker: grade ``sample`` with the grader named ``grader`` (``'module:Class'``). The
    grader's coroutines run on one event loop per worker, so a client it caches at module level
    stays usable from one rollout to the next."""
    global _loop
    try:
        cls = _graders.get(grader)
        if cls is None:
            from osmosis_ai.rollout.loading import load_attribute

            cls = _graders[grader] = load_attribute(grader, what="grader", example="e.g. 'main:MyGrader'")
        if _loop is None:
            _loop = asyncio.new_event_loop()
        graded = _loop.run_until_complete(grade_sample(cls, config, label, metadata, sample))
    except BaseException as exc:  # the grader's own failure, SystemExit included: typed, the worker lives on
        if not isinstance(exc, Exception) and _loop is not None:  # it may have stopped the loop mid-step
            _loop.close()
            _loop = None
        shown = exc if isinstance(exc, Exception) else UserCodeRaised(exc)
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        failure = (category_of(exc).value, f"grader: {str(shown) or type(exc).__name__}", trace)
        forget_traceback(exc)
        return failure
    try:
        pickle.dumps(graded)
    except Exception:  # what the grader put on it cannot travel, nor be JSON: the wire's reduction
        return RolloutSample(reward=graded.reward, label=graded.label, remove_sample=graded.remove_sample)
    return graded


def importable_name(value: Any) -> str | None:
    """``'module:attribute'`` under which a fresh interpreter finds ``value`` (a class), or ``None``."""
    from osmosis_ai.rewards.runtime.errors import RewardLoadError
    from osmosis_ai.rewards.runtime.target import resolve

    try:
        target = resolve(value, by_name=True, shaped=False)
    except RewardLoadError:
        return None
    if target.module is None or target.module == "__main__":
        return None
    return target.name


class GraderRuntime:
    """The grader of a :class:`LocalBackend` in ``workers`` worker processes; :meth:`start` and
    :meth:`close` with the server, :meth:`grade` per rollout."""

    def __init__(self, grader: str, config: GraderConfig | None, workers: int) -> None:
        from osmosis_ai.rewards.runtime.scoring import RewardRuntime

        self.grader = grader
        self.config = config
        self.runtime = RewardRuntime(
            WORKER_TARGET,
            timeout=None,
            workers=workers,
            kind="grader",
            raw=True,
            caller_deadlines=True,
        )

    async def start(self) -> None:
        await self.runtime.start()

    async def close(self) -> None:
        await self.runtime.close()

    async def grade(
        self, request: ExecutionRequest, sample: RolloutSample | None
    ) -> RolloutSample | ExecutionResult:
        """The graded sample, or the rollout's typed failure."""
        from osmosis_ai.rewards.runtime.errors import RewardInputError, RewardRuntimeError

        try:
            result = await self.runtime.call(
                self.grader, self.config, request.label, request.metadata, sample
            )
        except RewardInputError as exc:
            return _failed(
                RolloutErrorCategory.VALIDATION_ERROR,
                f"grader: the rollout cannot be sent to its grader worker process: {exc}",
            )
        except RewardRuntimeError as exc:
            return _failed(
                RolloutErrorCategory.INTERNAL_ERROR, f"grader: the grader workers cannot grade: {exc}"
            )
        value = result.value
        if result.outcome is Outcome.COMPLETED and isinstance(value, RolloutSample):
            return value
        if result.outcome is Outcome.COMPLETED:
            category, message, trace = value
            logger.error("rollout %s: the grader raised\n%s", request.id, trace.rstrip())
            return _failed(RolloutErrorCategory(category), message)
        said = f"; it printed: {result.output.strip()}" if result.output.strip() else ""
        logger.error("rollout %s: grader: %s%s", request.id, result.error, said)
        category = (
            RolloutErrorCategory.AGENT_ERROR
            if result.outcome is Outcome.REWARD_CRASH
            else RolloutErrorCategory.INTERNAL_ERROR
        )
        return _failed(category, f"grader: {result.error}")


def _failed(category: RolloutErrorCategory, message: str) -> ExecutionResult:
    return ExecutionResult(status=RolloutStatus.FAILURE, err_category=category, err_message=message)


def grader_runtime_for(backend: LocalBackend) -> GraderRuntime | None:
    """The grader runtime ``backend`` asks for (``grader_workers >= 1``), or ``None`` to grade in
    the server's process: none was asked for, or the grader or its config cannot be loaded by name
    in a worker (said once, with what to change)."""
    from osmosis_ai.rewards.runtime import worker

    grader, config = backend.grader_cls, backend.grader_config
    if not backend.grader_workers or grader is None or worker.IN_WORKER:
        return None  # in a worker: the grader's module built its app on import, which serves nothing there
    name = importable_name(grader)
    problem = None
    if name is None:
        problem = f"the grader {grader.__qualname__} cannot be imported by name in a worker process"
    elif config is not None and importable_name(type(config)) is None:
        problem = (
            f"its config's class {type(config).__qualname__} cannot be imported by name in a worker process"
        )
    else:
        try:
            pickle.dumps(config)
        except Exception as exc:
            problem = f"its config cannot be sent to a worker process ({type(exc).__name__}: {exc})"
    if problem is not None or name is None:
        logger.warning(
            "the grader runs in the server's process, which cannot stop it if it hangs or crashes: %s; "
            "define it (and its config class) at module level in a module other than the script being "
            "run, e.g. graders.py, to grade in %d worker processes",
            problem,
            backend.grader_workers,
        )
        return None
    return GraderRuntime(name, config, backend.grader_workers)
