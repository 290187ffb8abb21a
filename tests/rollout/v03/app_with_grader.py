"""A project module that builds its app on import with its grader beside it (served as
``uvicorn app_with_grader:app``): each grader worker imports it, and so builds the app again."""

from __future__ import annotations

import os

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.server.config import ServerConfig
from tests.rollout.v03.graders import Answers


class InItsOwnProcess(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.sample.metrics["graded_in"] = os.getpid()
        ctx.set_reward(1.0)


app = create_rollout_server(
    backend=LocalBackend(workflow=Answers, grader=InItsOwnProcess, grader_workers=1),
    configure_logging=False,
    config=ServerConfig(state=":memory:"),
)
