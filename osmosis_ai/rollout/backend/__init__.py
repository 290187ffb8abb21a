"""0.3 execution backends: ``LocalBackend`` runs a workflow and grader in this process."""

from __future__ import annotations

from osmosis_ai.rollout.backend.local.backend import LocalBackend

__all__ = ["LocalBackend"]
