"""The in-process executor: an agent loop run in this process, its model calls answered by a client.

This is what ``osmosis test`` and ``osmosis eval`` run. For each item it builds the request
(:func:`~osmosis_ai.evaluation.requests.dataset_row_to_request`), asks the agent for its tools (user
code, called the one way: :func:`osmosis_ai._usercode.call_user`) and checks them, and runs the agent
with a :class:`~osmosis_ai.rollout.RolloutContext` whose LLM is the item's model client (one per model
tag: the model under test, and a baseline). How the attempt ended:

* the agent completed after calling the model → ``completed``; without calling it → ``no_model_calls``;
* the agent reported an error, or raised (``SystemExit`` included) → ``agent_error`` (its message
  kept), unless a model call of this item failed → ``model_error``;
* invalid tools → ``agent_error``; the item's time limit passed → ``timeout``;
* a systemic provider failure → ``infra_error``, marked ``systemic``: the run stops there.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osmosis_ai._usercode import UserCodeRaised, UserThreads, call_user, contain
from osmosis_ai.evaluation.errors import ProviderError, SystemicProviderError, ToolValidationError
from osmosis_ai.evaluation.outcome import Outcome
from osmosis_ai.evaluation.requests import dataset_row_to_request
from osmosis_ai.runs.items import Deadline, WorkItem
from osmosis_ai.runs.result import Attempt

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-compatible providers accept


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


@dataclass(frozen=True)
class LocalModel:
    """One model an in-process run talks to: its client, and how its requests are labelled."""

    client: Any
    rollout_id_prefix: str = "local"
    metadata: Mapping[str, Any] = field(default_factory=dict)


class InProcessExecutor:
    """Runs ``agent_loop`` in-process on each item with the item's model (see the module docstring).

    ``models`` maps a model tag (``primary``, ``baseline``) to its :class:`LocalModel`. ``debug_dir``
    is where ``ctx.log_event`` writes ``<rollout id>.jsonl`` traces (``None``: nowhere).
    """

    def __init__(
        self,
        agent_loop: Any,
        models: Mapping[str, LocalModel],
        *,
        max_turns: int = 10,
        completion_params: Mapping[str, Any] | None = None,
        debug_dir: str | None = None,
        threads: UserThreads | None = None,
    ) -> None:
        self.agent_loop = agent_loop
        self.models = dict(models)
        self.max_turns = max_turns
        self.completion_params = dict(completion_params or {})
        self.debug_dir = debug_dir
        self.threads = threads

    async def run(self, item: WorkItem, *, deadline: Deadline | None = None) -> Attempt:
        """Run the agent on ``item``; never raises for the item's own failure (see the module docstring)."""
        model = self.models[item.model_tag]
        client = model.client
        client.reset_metrics()
        started = time.monotonic()
        attempt = Attempt(Outcome.AGENT_ERROR)
        try:
            request = dataset_row_to_request(
                item.row,
                item.row_index,
                max_turns=self.max_turns,
                completion_params=self.completion_params,
                rollout_id_prefix=model.rollout_id_prefix,
                metadata_overrides=model.metadata,
            )
            remaining = None if deadline is None else deadline.remaining()
            await asyncio.wait_for(self._run_agent(request, client, attempt), remaining)
        except SystemicProviderError as exc:
            attempt.outcome, attempt.error, attempt.systemic = Outcome.INFRA_ERROR, str(exc), str(exc)
        except ToolValidationError as exc:
            attempt.error = f"tool validation error: {exc}"
        except asyncio.TimeoutError:
            attempt.outcome = Outcome.TIMEOUT
            attempt.error = f"the agent did not finish within {deadline.seconds:g}s" if deadline else None
        except ProviderError as exc:
            attempt.outcome, attempt.error = Outcome.MODEL_ERROR, str(exc)
        except UserCodeRaised as exc:  # SystemExit, KeyboardInterrupt... from the agent
            attempt.error = str(exc)
        except Exception as exc:  # the agent's own code failed: this item's outcome, not the run's end
            attempt.error = f"{type(exc).__name__}: {exc}"
        finally:
            client.clear_tools()
        self._count(client, attempt, started)
        return attempt

    async def _run_agent(self, request: Any, client: Any, attempt: Attempt) -> None:
        from osmosis_ai.rollout import RolloutContext

        tools = validate_tools(await call_user(self.agent_loop.get_tools, request, threads=self.threads))
        client.set_tools(tools)
        context = RolloutContext(
            request=request, tools=tools, llm=client, _start_time=time.time(), _debug_dir=self.debug_dir
        )
        answer = await contain(lambda: self.agent_loop.run(context))
        attempt.finish_reason = getattr(answer, "finish_reason", None)
        attempt.final_messages = list(getattr(answer, "final_messages", None) or [])
        if getattr(answer, "status", None) == "COMPLETED":
            calls = client.get_metrics().num_llm_calls
            attempt.outcome = Outcome.COMPLETED if calls else Outcome.NO_MODEL_CALLS
            attempt.agent_reward = getattr(answer, "reward", None)
            if not calls:
                attempt.error = "the agent finished without calling the model"
            return
        attempt.outcome = Outcome.MODEL_ERROR if getattr(client, "failed_calls", 0) else Outcome.AGENT_ERROR
        attempt.error = (
            getattr(answer, "error_message", None) or "the agent reported an error without a message"
        )

    @staticmethod
    def _count(client: Any, attempt: Attempt, started: float) -> None:
        metrics = client.get_metrics()
        attempt.duration_ms = (time.monotonic() - started) * 1000
        attempt.prompt_tokens = metrics.prompt_tokens
        attempt.completion_tokens = metrics.response_tokens
        attempt.num_llm_calls = metrics.num_llm_calls
        attempt.retries = getattr(client, "retries", 0)
