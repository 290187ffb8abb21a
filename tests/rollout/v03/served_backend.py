"""A ``LocalBackend`` instance for ``osmosis serve -m tests.rollout.v03.served_backend:backend``: the
interop project's workflow and grader, with a workflow config of its own (3 slots), which the
server's worker processes must re-create from this module."""

from __future__ import annotations

from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.types.config import AgentWorkflowConfig, ConcurrencyConfig
from tests.rollout.v03.project.main import ExactAnswerGrader, OneCallWorkflow

CONFIG = AgentWorkflowConfig(name="one-call", concurrency=ConcurrencyConfig(max_concurrent=3))
backend = LocalBackend(workflow=OneCallWorkflow, workflow_config=CONFIG, grader=ExactAnswerGrader)
