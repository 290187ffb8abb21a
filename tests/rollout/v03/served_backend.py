"""A ``LocalBackend`` instance for ``osmosis serve -m tests.rollout.v03.served_backend:backend``: the
interop project's grader and a workflow making the same one chat call per rollout over one HTTP
client per process (the project's workflow opens a client per rollout, tens of milliseconds of CPU
each: too much for tests running hundreds of rollouts), with a workflow config of its own (16
slots) that the server's worker processes must re-create from this module."""

from __future__ import annotations

from typing import Any

import httpx

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, get_rollout_context
from osmosis_ai.rollout.types.config import AgentWorkflowConfig, ConcurrencyConfig
from tests.rollout.v03.project.main import ExactAnswerGrader

_clients: list[httpx.AsyncClient] = []  # made in the serving event loop, on first use


class SharedClientWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:
        rollout = get_rollout_context()
        assert rollout is not None
        if not _clients:
            _clients.append(httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None)))
        response = await _clients[0].post(
            f"{rollout.chat_completions_url}/chat/completions",
            json={"model": "policy", "messages": ctx.prompt},
        )
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]["content"]
        return [*ctx.prompt, {"role": "assistant", "content": answer}]


CONFIG = AgentWorkflowConfig(name="shared-client", concurrency=ConcurrencyConfig(max_concurrent=16))
backend = LocalBackend(workflow=SharedClientWorkflow, workflow_config=CONFIG, grader=ExactAnswerGrader)
