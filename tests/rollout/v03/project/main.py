"""A 0.3 project's entrypoint, written as a user of osmosis-ai 0.3.8 writes it (0.3 import paths
only): one chat call per rollout, a grader comparing the answer with the label. The interop tests
run it unchanged under this package and under upstream 0.3.8.
"""

from __future__ import annotations

import os

import httpx
import uvicorn

from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext, get_rollout_context
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server


class OneCallWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict]:
        rollout = get_rollout_context()
        assert rollout is not None
        headers = {"Authorization": f"Bearer {rollout.api_key}"} if rollout.api_key else {}
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(
                f"{rollout.chat_completions_url}/chat/completions",
                json={"model": "policy", "messages": ctx.prompt},
                headers=headers,
            )
            response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        return [*ctx.prompt, {"role": "assistant", "content": message["content"]}]


class ExactAnswerGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        answer = str(ctx.sample.messages[-1]["content"]).strip()
        ctx.set_reward(1.0 if answer == ctx.label else 0.0)


app = create_rollout_server(
    backend=LocalBackend(workflow=OneCallWorkflow, grader=ExactAnswerGrader),
    api_key=os.environ.get("ROLLOUT_SERVER_KEY") or None,
)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
