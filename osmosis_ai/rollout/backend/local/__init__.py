"""The in-process 0.3 backend (``LocalBackend``) at its 0.3 import path."""

from __future__ import annotations

from osmosis_ai.rollout.backend.local.backend import LocalBackend

__all__ = ["LocalBackend"]
