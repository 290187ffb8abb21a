"""The reward runtime: score samples with a reward in a warm pool of worker processes that a hung,
crashing or memory-hungry reward cannot stall, each sample ending in a typed outcome.

* :class:`RewardRuntime` — one per run: ``await runtime.score(sample)`` from many tasks, or
  ``runtime.stream(rows)``; ``async with`` closes it.
* :func:`score_batch` / :func:`ascore_batch` — a list of results in row order.
* :func:`score_stream` — results as they finish, rows taken lazily.

Modules, one concern each: ``target`` (which reward, how it is called), ``sample`` (what is scored
and what comes back), ``scoring`` (the runtime), ``batch`` (the one-call forms), ``pool`` (the
worker pool: batches, deadlines, deaths), ``process`` (one worker process seen from the parent),
``worker`` (the worker process itself), ``protocol`` (frames and slots between them), ``capture``
(bounded output), ``inprocess`` (``workers=0``), ``stats``, ``errors``. Importing this package is free.
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "RewardRuntime": "osmosis_ai.rewards.runtime.scoring",
    "DEFAULT_TIMEOUT": "osmosis_ai.rewards.runtime.scoring",
    "score_batch": "osmosis_ai.rewards.runtime.batch",
    "ascore_batch": "osmosis_ai.rewards.runtime.batch",
    "score_stream": "osmosis_ai.rewards.runtime.batch",
    "Sample": "osmosis_ai.rewards.runtime.sample",
    "SampleResult": "osmosis_ai.rewards.runtime.sample",
    "RuntimeStats": "osmosis_ai.rewards.runtime.stats",
    "RewardRuntimeError": "osmosis_ai.rewards.runtime.errors",
    "RewardLoadError": "osmosis_ai.rewards.runtime.errors",
    "RewardSettingError": "osmosis_ai.rewards.runtime.errors",
    "RewardInputError": "osmosis_ai.rewards.runtime.errors",
    "WorkerStartError": "osmosis_ai.rewards.runtime.errors",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

TYPE_CHECKING = False
if TYPE_CHECKING:
    from osmosis_ai.rewards.runtime.batch import ascore_batch, score_batch, score_stream
    from osmosis_ai.rewards.runtime.errors import (
        RewardInputError,
        RewardLoadError,
        RewardRuntimeError,
        RewardSettingError,
        WorkerStartError,
    )
    from osmosis_ai.rewards.runtime.sample import Sample, SampleResult
    from osmosis_ai.rewards.runtime.scoring import DEFAULT_TIMEOUT, RewardRuntime
    from osmosis_ai.rewards.runtime.stats import RuntimeStats
del TYPE_CHECKING
