"""Errors of the remote-rollout SDK.

* OsmosisRolloutError (osmosis_ai.errors.OsmosisError)
  + OsmosisTransportError          the request never got an HTTP answer (connection refused/reset); retried
  + OsmosisServerError             5xx, or a 2xx body that is not a usable answer; ``.status_code``
  + OsmosisValidationError         4xx or an unexpected status; not retried (408/425/429 are, first); ``.status_code``
  + OsmosisTimeoutError            no answer within the timeout; retried
  + AgentLoopNotFoundError         registry lookup failed; ``.name``, ``.available``
  + AgentLoopDefinitionError (TypeError)   a concrete agent loop class lacks a proper ``name``
  + RolloutValueError (ValueError) a bad value: unknown status, a reward that is no score, non-JSON data,
                                   a taken name
  + ToolExecutionError             a tool call failed; ``.tool_call_id``, ``.tool_name``
    - ToolArgumentError            ... because its arguments could not be parsed

Defined next to their users: ``AgentLoopValidationError`` (validator), ``PublicIPDetectionError``
(network), ``ServeError`` (server).
"""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class OsmosisRolloutError(OsmosisError):
    """Root of every remote-rollout error."""


class OsmosisTransportError(OsmosisRolloutError):
    """The request failed below HTTP (refused, reset, DNS); safe to retry."""


class _StatusError(OsmosisRolloutError):
    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class OsmosisServerError(_StatusError):
    """TrainGate failed (5xx) or answered with a body that cannot be used."""


class OsmosisValidationError(_StatusError):
    """TrainGate rejected the request (4xx) or answered with an unexpected status."""


class OsmosisTimeoutError(OsmosisRolloutError):
    """TrainGate did not answer within the timeout; safe to retry."""


class AgentLoopNotFoundError(OsmosisRolloutError):
    """No agent loop is registered under ``name``."""

    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"Agent loop '{name}' not found. Available: {available}")
        self.name = name
        self.available = available


class AgentLoopDefinitionError(OsmosisRolloutError, TypeError):
    """A concrete ``RolloutAgentLoop`` subclass has no usable ``name`` class attribute."""


class RolloutValueError(OsmosisRolloutError, ValueError):
    """A value the SDK cannot use: a status other than COMPLETED/ERROR, a reward the score rule refuses,
    data that is not JSON, an agent-loop name already registered. Also a ``ValueError``, so callers
    that catch the builtin keep working."""


class ToolExecutionError(OsmosisRolloutError):
    """A tool call failed. ``tool_call_id`` and ``tool_name`` say which one."""

    def __init__(self, message: str, tool_call_id: str = "", tool_name: str = "") -> None:
        super().__init__(message)
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name


class ToolArgumentError(ToolExecutionError):
    """A tool call's arguments are not a JSON object."""
