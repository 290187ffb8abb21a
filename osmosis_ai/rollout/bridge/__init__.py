"""The two programming models on each other's wire: a 0.3 workflow and grader as a 0.2 agent loop
(:class:`WorkflowAgentLoop`), a 0.2 agent loop as a 0.3 backend (:class:`AgentLoopBackend`).

Names resolve lazily (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AgentLoopBackend": "osmosis_ai.rollout.bridge.loop_backend",
    "WorkflowAgentLoop": "osmosis_ai.rollout.bridge.workflow_loop",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from osmosis_ai.rollout.bridge.loop_backend import AgentLoopBackend
    from osmosis_ai.rollout.bridge.workflow_loop import WorkflowAgentLoop
