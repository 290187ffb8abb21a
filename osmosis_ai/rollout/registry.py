"""A name -> agent loop registry (thread-safe), plus a process-wide default instance.

The server and CLI do not consult it; it is for applications that pick an agent loop by name.
"""

from __future__ import annotations

import threading

from osmosis_ai.rollout.core.base import RolloutAgentLoop
from osmosis_ai.rollout.core.exceptions import AgentLoopNotFoundError, RolloutValueError


class AgentLoopRegistry:
    """Agent loops by ``name``, in registration order."""

    def __init__(self) -> None:
        self._loops: dict[str, RolloutAgentLoop] = {}
        self._lock = threading.Lock()

    def register(self, loop: RolloutAgentLoop) -> None:
        """Add ``loop`` under its ``name``; ``RolloutValueError`` (a ``ValueError``) if the name is taken."""
        with self._lock:
            if loop.name in self._loops:
                raise RolloutValueError(
                    f"An agent loop named {loop.name!r} is already registered; "
                    "unregister it first or choose another name"
                )
            self._loops[loop.name] = loop

    def unregister(self, name: str) -> bool:
        """Remove ``name``; returns whether it was registered."""
        with self._lock:
            return self._loops.pop(name, None) is not None

    def get(self, name: str) -> RolloutAgentLoop | None:
        """The agent loop registered as ``name``, or ``None``."""
        with self._lock:
            return self._loops.get(name)

    def list_names(self) -> list[str]:
        """Registered names in registration order."""
        with self._lock:
            return list(self._loops)

    def clear(self) -> None:
        """Forget every agent loop."""
        with self._lock:
            self._loops.clear()


_registry = AgentLoopRegistry()


def register_agent_loop(loop: RolloutAgentLoop) -> None:
    """Register ``loop`` in the default registry (``ValueError`` on a duplicate name)."""
    _registry.register(loop)


def unregister_agent_loop(name: str) -> bool:
    """Remove ``name`` from the default registry; returns whether it was there."""
    return _registry.unregister(name)


def get_agent_loop(name: str) -> RolloutAgentLoop:
    """The agent loop registered as ``name``; ``AgentLoopNotFoundError`` lists the available names."""
    agent_loop = _registry.get(name)
    if agent_loop is None:
        raise AgentLoopNotFoundError(name, _registry.list_names())
    return agent_loop


def list_agent_loops() -> list[str]:
    """Names in the default registry, in registration order."""
    return _registry.list_names()
