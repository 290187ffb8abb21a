"""A 0.2 ``RolloutAgentLoop`` as a 0.3 backend, so ``create_rollout_server(backend=...)`` serves it
over the 0.3 wire.

Per rollout, the workflow phase runs the agent loop with a 0.2 ``RolloutContext`` whose ``ctx.chat``
goes to the rollout's ``{chat_completions_url}/chat/completions`` with its ``llm_api_key``, through
the client a 0.2 agent always has (``OsmosisLLMClient``: its retries, timeouts and counters), in
OpenAI's body with the agent's tools in every request, as an OpenAI-compatible endpoint needs them.
Its request is the rollout's: the prompt as ``messages``, the metadata, and the label as
``metadata["ground_truth"]`` unless the metadata has one (where 0.2 agents read it). A result with
status ``ERROR`` fails the rollout (``agent_error``) with its message; a chat call that failed,
``http_error``.

The grader phase is the agent's reward: what it reported (``ctx.complete(..., reward=x)``) passes
the score rule (:func:`osmosis_ai.rewards.score.agent_reward`) there, so a rollout asked not to be
graded carries none, and an agent that reported none or a non-number fails the graded rollout
(``validation_error``) rather than getting a reward it never gave.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import PrivateAttr

from osmosis_ai._usercode import call_user
from osmosis_ai.rewards.score import agent_reward
from osmosis_ai.rollout.backend.local.backend import LocalBackend
from osmosis_ai.rollout.client import OsmosisLLMClient
from osmosis_ai.rollout.context import get_rollout_context
from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext
from osmosis_ai.rollout.core.schemas import RolloutRequest
from osmosis_ai.rollout.types.sample import ExecutionRequest, RolloutSample


class ReportedSample(RolloutSample):
    """The agent loop's sample, holding the reward it reported until the grader phase takes it
    (private: never on the wire)."""

    _reported: object = PrivateAttr(default=None)


def _tool_dicts(tools: Any) -> list[dict[str, Any]]:
    return [t.model_dump(exclude_none=True) if hasattr(t, "model_dump") else dict(t) for t in tools or []]


class AgentLoopBackend(LocalBackend):
    """``agent_loop`` run as a 0.3 workflow and its reward as the grader (see the module docstring).

    ``max_concurrent``: rollouts at once (``None``: the server's ``max_concurrent_rollouts``).
    """

    def __init__(self, agent_loop: RolloutAgentLoop, *, max_concurrent: int | None = None) -> None:
        if not isinstance(agent_loop, RolloutAgentLoop):
            raise TypeError(f"AgentLoopBackend takes a RolloutAgentLoop, got {type(agent_loop).__name__}")
        self.agent_loop = agent_loop
        self.named = type(agent_loop)
        self.workflow_config = None
        self.grader_cls = None
        self.grader_config = None
        self.grader_workers = 0  # its reward is graded where the agent ran
        self.max_concurrent = max_concurrent

    async def run_workflow(self, request: ExecutionRequest) -> RolloutSample | None:
        rollout = get_rollout_context()
        if rollout is None or not rollout.chat_completions_url:
            raise RuntimeError("an AgentLoopBackend runs inside a 0.3 rollout (create_rollout_server)")
        metadata = dict(request.metadata or {})
        if request.label is not None:
            metadata.setdefault("ground_truth", request.label)
        loop_request = RolloutRequest(
            rollout_id=request.id,
            server_url=rollout.chat_completions_url,
            messages=request.prompt,
            completion_params={},
            metadata=metadata,
        )
        tools = list(await call_user(self.agent_loop.get_tools, loop_request) or [])
        base = rollout.chat_completions_url.rstrip("/")
        client = OsmosisLLMClient(
            base, request.id, rollout.api_key, chat_url=f"{base}/chat/completions", tools=_tool_dicts(tools)
        )
        ctx = RolloutContext(request=loop_request, tools=tools, llm=client, _start_time=time.time())
        result = await self.agent_loop.run(ctx)
        if getattr(result, "status", None) != "COMPLETED":
            message = getattr(result, "error_message", None) or "it reported an error without a message"
            raise RuntimeError(f"the agent loop failed: {message}")
        sample = ReportedSample(messages=list(result.final_messages), label=request.label)
        sample._reported = result.reward
        return sample

    def cannot_grade(self, request: ExecutionRequest) -> str | None:
        return None  # the agent's own reward needs neither a label nor metadata

    async def grade(self, request: ExecutionRequest, sample: RolloutSample | None) -> RolloutSample:
        if not isinstance(sample, ReportedSample):
            raise ValueError("the agent loop produced no sample to reward")
        reward = agent_reward(sample._reported)
        if reward is None:
            raise ValueError("the agent loop reported no reward: return ctx.complete(messages, reward=x)")
        sample.reward = reward
        return sample
