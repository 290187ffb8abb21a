"""Running an agent loop in-process over dataset rows, each row ending in a typed outcome.

:class:`LocalRunner` is what ``osmosis test`` runs: for each row it builds the request
(:func:`~osmosis_ai.evaluation.requests.dataset_row_to_request`), asks the agent for its tools and
checks them, and runs the agent with a :class:`~osmosis_ai.rollout.RolloutContext` whose LLM is the
shared :class:`~osmosis_ai.evaluation.llm_client.ExternalLLMClient`. How the row ended:

* the agent completed after calling the model → ``completed``; without calling it → ``no_model_calls``;
  a reward it gives that is not a score (NaN, inf, a bool, ... by the one score rule) → ``reward_error``;
* the agent reported an error, or raised → ``agent_error`` (its message kept), unless a model call of
  this row failed → ``model_error``;
* invalid tools → ``agent_error``; the row's time limit passed → ``timeout``;
* a systemic provider failure → ``infra_error``, and the run stops there (no later row could succeed).

Rows run one after another (interactive inspection and a readable log want that order).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai.errors import RewardReturnError
from osmosis_ai.evaluation.errors import ProviderError, SystemicProviderError, ToolValidationError
from osmosis_ai.evaluation.outcome import Outcome, OutcomeCounts
from osmosis_ai.evaluation.requests import dataset_row_to_request
from osmosis_ai.rewards.score import to_score

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-compatible providers accept


@dataclass
class RowResult:
    """How one row ended and what it cost."""

    row_index: int
    outcome: Outcome
    error: str | None = None
    duration_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_llm_calls: int = 0
    retries: int = 0
    reward: float | None = None
    finish_reason: str | None = None
    final_messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.outcome is Outcome.COMPLETED

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """The row in the JSON results file (0.2's keys, plus ``outcome``)."""
        return {
            "row_index": self.row_index,
            "success": self.success,
            "outcome": self.outcome.value,
            "error": self.error,
            "duration_ms": round(self.duration_ms, 3),
            "token_usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.tokens,
                "num_llm_calls": self.num_llm_calls,
            },
            "retried_calls": self.retries,
            "reward": self.reward,
            "finish_reason": self.finish_reason,
        }


@dataclass
class BatchResult:
    """Every row's result, in order, and whether the run stopped before the last row."""

    results: list[RowResult] = field(default_factory=list)
    stopped_early: bool = False
    stop_reason: str | None = None

    @property
    def counts(self) -> OutcomeCounts:
        return OutcomeCounts.of(r.outcome for r in self.results)

    @property
    def total_duration_ms(self) -> float:
        return sum(r.duration_ms for r in self.results)

    @property
    def total_tokens(self) -> int:
        return sum(r.tokens for r in self.results)

    @property
    def total_retries(self) -> int:
        """Model calls that failed transiently and were asked again."""
        return sum(r.retries for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        """The JSON results file: 0.2's ``summary`` and ``results``, plus the outcome counts and the stop."""
        counts = self.counts
        return {
            "summary": {
                "total": counts.total,
                "passed": counts.completed,
                "failed": counts.failed,
                "total_duration_ms": round(self.total_duration_ms, 3),
                "total_tokens": self.total_tokens,
                "retried_calls": self.total_retries,
                "outcomes": counts.to_dict(),
                "stopped_early": self.stopped_early,
                "stop_reason": self.stop_reason,
            },
            "results": [r.to_dict() for r in self.results],
        }


def validate_tools(tools: Any) -> list[Any]:
    """Check the agent's tools: each a function tool with a provider-acceptable name and object parameters."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ToolValidationError(f"get_tools must return a list, got {type(tools).__name__}")
    for position, tool in enumerate(tools):
        data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else tool
        function = data.get("function") if isinstance(data, dict) else None
        if not isinstance(function, dict):
            raise ToolValidationError(f"tool {position} has no 'function' object")
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ToolValidationError(
                f"tool {position} has the name {name!r}; use 1-64 letters, digits, '_' or '-'"
            )
        parameters = function.get("parameters")
        if parameters is not None and (
            not isinstance(parameters, dict) or parameters.get("type") != "object"
        ):
            raise ToolValidationError(f"tool {name!r}: 'parameters' must be a JSON schema of type 'object'")
    return tools


class LocalRunner:
    """Runs ``agent_loop`` on rows with ``llm_client`` answering its model calls (see the module docstring)."""

    def __init__(
        self,
        agent_loop: Any,
        llm_client: Any,
        *,
        rollout_id_prefix: str = "local",
        request_metadata: Mapping[str, Any] | None = None,
        max_turns: int = 10,
        completion_params: Mapping[str, Any] | None = None,
        row_timeout: float | None = None,
        debug_dir: str | None = None,
    ) -> None:
        self.agent_loop = agent_loop
        self.llm_client = llm_client
        self.rollout_id_prefix = rollout_id_prefix
        self.request_metadata = dict(request_metadata or {})
        self.max_turns = max_turns
        self.completion_params = dict(completion_params or {})
        self.row_timeout = row_timeout
        self.debug_dir = debug_dir  # where ctx.log_event writes <rollout id>.jsonl traces (None: nowhere)

    async def run_row(self, row: Mapping[str, Any], row_index: int) -> RowResult:
        """Run one row; raises :class:`SystemicProviderError` (with ``duration_ms``/``tokens`` set) only."""
        from osmosis_ai.rollout import RolloutContext

        client = self.llm_client
        client.reset_metrics()
        started = time.monotonic()
        result = RowResult(row_index, Outcome.AGENT_ERROR)
        try:
            request = dataset_row_to_request(
                row,
                row_index,
                max_turns=self.max_turns,
                completion_params=self.completion_params,
                rollout_id_prefix=self.rollout_id_prefix,
                metadata_overrides=self.request_metadata,
            )
            tools = self.agent_loop.get_tools(request)
            if inspect.isawaitable(tools):
                tools = await tools
            tools = validate_tools(tools)
            client.set_tools(tools)
            context = RolloutContext(
                request=request, tools=tools, llm=client, _start_time=time.time(), _debug_dir=self.debug_dir
            )
            run = self.agent_loop.run(context)
            answer = await (asyncio.wait_for(run, self.row_timeout) if self.row_timeout else run)
            self._read_answer(answer, result)
        except SystemicProviderError as exc:
            self._count(result, started)
            exc.duration_ms, exc.tokens = result.duration_ms, result.tokens
            raise
        except ToolValidationError as exc:
            result.error = f"tool validation error: {exc}"
        except asyncio.TimeoutError:
            result.outcome = Outcome.TIMEOUT
            result.error = f"the agent did not finish within {self.row_timeout:g}s"
        except ProviderError as exc:
            result.outcome, result.error = Outcome.MODEL_ERROR, str(exc)
        except Exception as exc:  # the agent's own code failed: this row's outcome, not the run's end
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            client.clear_tools()
        self._count(result, started)
        return result

    def _read_answer(self, answer: Any, result: RowResult) -> None:
        result.finish_reason = getattr(answer, "finish_reason", None)
        result.final_messages = list(getattr(answer, "final_messages", None) or [])
        if getattr(answer, "status", None) == "COMPLETED":
            calls = self.llm_client.get_metrics().num_llm_calls
            result.outcome = Outcome.COMPLETED if calls else Outcome.NO_MODEL_CALLS
            if not calls:
                result.error = "the agent finished without calling the model"
            reward = getattr(answer, "reward", None)
            if reward is not None:  # an agent may leave scoring to others; what it gives obeys the score rule
                try:
                    result.reward = to_score(reward, getattr(self.agent_loop, "name", ""), kind="agent loop")
                except RewardReturnError as exc:
                    if calls:
                        result.outcome, result.error = Outcome.REWARD_ERROR, str(exc)
            return
        failed_calls = getattr(self.llm_client, "failed_calls", 0)
        result.outcome = Outcome.MODEL_ERROR if failed_calls else Outcome.AGENT_ERROR
        result.error = (
            getattr(answer, "error_message", None) or "the agent reported an error without a message"
        )

    def _count(self, result: RowResult, started: float) -> None:
        metrics = self.llm_client.get_metrics()
        result.duration_ms = (time.monotonic() - started) * 1000
        result.prompt_tokens = metrics.prompt_tokens
        result.completion_tokens = metrics.response_tokens
        result.num_llm_calls = metrics.num_llm_calls
        result.retries = getattr(self.llm_client, "retries", 0)

    async def run(
        self,
        rows: Iterable[tuple[int, Mapping[str, Any]]],
        *,
        on_result: Callable[[RowResult], Awaitable[None] | None] | None = None,
    ) -> BatchResult:
        """Run ``(row index, row)`` pairs in order; a systemic provider failure ends the run early."""
        batch = BatchResult()
        for row_index, row in rows:
            try:
                result = await self.run_row(row, row_index)
            except SystemicProviderError as exc:
                result = RowResult(row_index, Outcome.INFRA_ERROR, error=str(exc))
                result.duration_ms = exc.duration_ms or 0.0
                batch.stopped_early, batch.stop_reason = True, str(exc)
            batch.results.append(result)
            if on_result is not None:
                done = on_result(result)
                if done is not None:
                    await done
            if batch.stopped_early:
                break
        return batch
