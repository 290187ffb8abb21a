"""A 0.3 workflow and grader (a ``LocalBackend``) as a 0.2 ``RolloutAgentLoop``.

Whatever runs 0.2 agent loops then runs a 0.3 pair: ``osmosis serve`` / ``create_app`` for a 0.2
trainer, ``osmosis test`` / ``osmosis eval`` in-process. Per rollout:

* the workflow runs with the 0.3 rollout context (``get_rollout_context()``) pointing at a
  :class:`~osmosis_ai.rollout.bridge.relay.ChatRelay`, so its model calls are the rollout's own
  ``ctx.chat`` calls (to the 0.2 trainer, or the model under test);
* its prompt is the request's messages; its ``label`` is the request metadata's ``label``, else its
  ``ground_truth`` (where ``osmosis test``/``eval`` put the dataset's);
* the grader, when there is one, grades the workflow's sample, and its reward is the completion's
  ``reward`` (the 0.2 side then applies the score rule to it as to any agent's reward);
* a chat call that failed is raised as the chat's own error even when the workflow's HTTP client
  turned it into something else; anything else the workflow or grader raises is raised unchanged,
  so each runner classifies it as it classifies a 0.2 agent's failure.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import quote

from osmosis_ai.rollout.backend.local.backend import LocalBackend
from osmosis_ai.rollout.bridge.relay import ChatRelay
from osmosis_ai.rollout.context import RolloutContext as AmbientContext
from osmosis_ai.rollout.core.base import RolloutAgentLoop, RolloutContext, RolloutResult
from osmosis_ai.rollout.core.schemas import OpenAIFunctionToolSchema, RolloutRequest
from osmosis_ai.rollout.types.sample import ExecutionRequest


def served_backend(value: Any) -> Any:
    """The backend of an app ``create_rollout_server`` built, or ``None`` for anything else."""
    state = vars(value).get("state") if hasattr(value, "__dict__") else None
    return getattr(state, "rollout_backend", None) if state is not None else None


def _label(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("label", metadata.get("ground_truth"))
    return None if value is None else str(value)


class WorkflowAgentLoop(RolloutAgentLoop):
    """``backend``'s workflow and grader run as one 0.2 rollout each (see the module docstring);
    its ``name`` is the workflow class's unless given."""

    name = "agent_workflow"

    def __init__(self, backend: LocalBackend, name: str | None = None) -> None:
        if not isinstance(backend, LocalBackend):
            raise TypeError(f"WorkflowAgentLoop takes a LocalBackend, got {type(backend).__name__}")
        self.backend = backend
        self.name = name or backend.named.__name__

    def reference(self) -> tuple[str, str | None]:
        """``-m`` and ``--grader`` that load this loop again in a fresh process (``serve --workers``,
        ``--reload``): the module attribute holding the backend or the app serving it, else the
        workflow and grader classes (``ValueError`` when configs would be lost that way)."""
        backend = self.backend
        workflow = backend.workflow_cls
        if workflow.__module__ == "__main__":
            raise ValueError(
                "a fresh process imports the workflow by name: keep it in an importable module (not "
                "__main__) and name it with -m module:attribute"
            )
        module = sys.modules.get(workflow.__module__)
        for name, value in vars(module).items() if module is not None else ():
            if value is backend or served_backend(value) is backend:
                return f"{workflow.__module__}:{name}", None
        if backend.workflow_config is not None or backend.grader_config is not None:
            raise ValueError(
                "a LocalBackend with configs is loaded again by name: keep it (or its app) in a "
                "module attribute and name that with -m"
            )
        grader = backend.grader_cls
        return (
            f"{workflow.__module__}:{workflow.__qualname__}",
            None if grader is None else f"{grader.__module__}:{grader.__qualname__}",
        )

    def get_tools(self, request: RolloutRequest) -> list[OpenAIFunctionToolSchema]:
        """None: a workflow sends its own tools with each chat call."""
        return []

    async def run(self, ctx: RolloutContext) -> RolloutResult:
        request = ctx.request
        metadata = dict(request.metadata or {})
        job = ExecutionRequest(  # a 0.3 id is one path segment; a 0.2 one may hold a '/'
            id=quote(request.rollout_id, safe=""),
            prompt=list(request.messages),
            label=_label(metadata),
            metadata=metadata,
        )
        backend = self.backend
        relay = ChatRelay(ctx.chat)
        async with relay.serving():
            ambient = AmbientContext(
                chat_completions_url=relay.base_url, api_key=relay.api_key, rollout_id=request.rollout_id
            )
            try:
                with ambient:
                    sample = await backend.run_workflow(job)
                    if backend.grader_cls is not None:
                        sample = await backend.grade(job, sample)
            except Exception:
                if relay.failure is not None:
                    raise relay.failure from None
                raise
        messages = ctx.conversation if sample is None else [dict(m) for m in sample.messages]
        return ctx.complete(messages, reward=None if sample is None else sample.reward)
