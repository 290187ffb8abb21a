"""A 0.3 server for the durability tests, run as its own process: its rollouts are stored in
``$DURABLE_STATE`` (an SQLite file or a Redis URL); each workflow run appends its rollout id to
``$DURABLE_RUNS`` (so a test can count runs across processes), and one whose metadata says
``hold`` never finishes."""

from __future__ import annotations

import asyncio
import os

import uvicorn

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.server.config import ServerConfig


class Counted(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict]:
        rollout = get_rollout_context()
        assert rollout is not None
        with open(os.environ["DURABLE_RUNS"], "a") as runs:
            runs.write(rollout.rollout_id + "\n")
        if (ctx.metadata or {}).get("hold"):
            await asyncio.Event().wait()
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


app = create_rollout_server(
    backend=LocalBackend(workflow=Counted, grader=Exact),
    configure_logging=False,
    result_wait_timeout_sec=1.0,
    config=ServerConfig(state=os.environ["DURABLE_STATE"]),
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["DURABLE_PORT"]), log_level="warning")
