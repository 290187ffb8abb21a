"""The 0.3 program both servers run in ``benchmarks.v03_servers``: one model call per rollout through
one shared HTTP client, an exact-answer grader. It uses only 0.3's public names, so upstream 0.3.8
and this package serve the same file; ``$_OSMOSIS_ROLLOUT_PORT`` is its port."""

from __future__ import annotations

import os

import httpx
import uvicorn

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.types import AgentWorkflowConfig, ConcurrencyConfig

CLIENT = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=512))


class OneCall(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict]:
        rollout = get_rollout_context()
        assert rollout is not None
        response = await CLIENT.post(
            f"{rollout.chat_completions_url}/chat/completions",
            json={"model": "policy", "messages": ctx.prompt},
            headers={"Authorization": f"Bearer {rollout.api_key}"},
        )
        response.raise_for_status()
        return [*ctx.prompt, response.json()["choices"][0]["message"]]


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


config = AgentWorkflowConfig(name="bench", concurrency=ConcurrencyConfig(max_concurrent=512))
app = create_rollout_server(backend=LocalBackend(workflow=OneCall, grader=Exact, workflow_config=config))

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["_OSMOSIS_ROLLOUT_PORT"]), log_level="warning")
