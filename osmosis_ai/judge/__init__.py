"""LLM-as-judge rubric scoring through LiteLLM.

Modules, one concept each: ``prompt`` (messages and sentinels), ``parsing`` (verdict extraction),
``keys`` (API key resolution), ``routing`` (LiteLLM model ids, timeouts, output format), ``call``
(the LiteLLM seam), ``retry``, ``ratelimit``, ``cache`` (SQLite judgment cache), ``evaluate``
(one judgment), ``batch`` (many), ``rubric`` (a configured rubric judging one record). The ``eval-rubric`` command built on them is
:mod:`osmosis_ai.cli.eval_rubric`.

Names are loaded on first use, so importing this package does not import LiteLLM.
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS = {
    "aevaluate_rubric": "osmosis_ai.judge.evaluate",
    "evaluate_rubric": "osmosis_ai.judge.evaluate",
    "aevaluate_rubric_batch": "osmosis_ai.judge.batch",
    "evaluate_rubric_batch": "osmosis_ai.judge.batch",
    "JudgmentCache": "osmosis_ai.judge.cache",
    "RateLimiter": "osmosis_ai.judge.ratelimit",
    "RetryPolicy": "osmosis_ai.judge.retry",
    "ModelInfo": "osmosis_ai.judge.types",
    "RewardRubricRunResult": "osmosis_ai.judge.types",
    "MissingAPIKeyError": "osmosis_ai.judge.errors",
    "ProviderRequestError": "osmosis_ai.judge.errors",
    "ModelNotFoundError": "osmosis_ai.judge.errors",
    "JudgeTimeoutError": "osmosis_ai.judge.errors",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
