"""The RolloutServer: ``create_app`` builds the FastAPI app from a ``ServerConfig``, ``serve_agent_loop``
runs it under uvicorn; ``create_rollout_server`` (0.3) serves a ``LocalBackend`` over the 0.3 wire.

Names resolve lazily (PEP 562): importing this package loads neither FastAPI nor uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from osmosis_ai._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AppState": "osmosis_ai.rollout.server.state",
    "DEFAULT_HOST": "osmosis_ai.rollout.server.serve",
    "DEFAULT_PORT": "osmosis_ai.rollout.server.serve",
    "ServeError": "osmosis_ai.rollout.server.errors",
    "ServeStarted": "osmosis_ai.rollout.server.serve",
    "ServerConfig": "osmosis_ai.rollout.server.config",
    "ServerStartError": "osmosis_ai.rollout.server.errors",
    "create_app": "osmosis_ai.rollout.server.app",
    "create_rollout_server": "osmosis_ai.rollout.server.app03",
    "generate_api_key": "osmosis_ai.rollout.server.api_key",
    "serve_agent_loop": "osmosis_ai.rollout.server.serve",
    "validate_and_report": "osmosis_ai.rollout.server.serve",
    "validate_api_key": "osmosis_ai.rollout.server.api_key",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from osmosis_ai.rollout.server.api_key import generate_api_key, validate_api_key
    from osmosis_ai.rollout.server.app import create_app
    from osmosis_ai.rollout.server.app03 import create_rollout_server
    from osmosis_ai.rollout.server.config import ServerConfig
    from osmosis_ai.rollout.server.errors import ServeError, ServerStartError
    from osmosis_ai.rollout.server.serve import (
        DEFAULT_HOST,
        DEFAULT_PORT,
        ServeStarted,
        serve_agent_loop,
        validate_and_report,
    )
    from osmosis_ai.rollout.server.state import AppState
