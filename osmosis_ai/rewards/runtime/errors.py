"""Errors of the reward runtime, rooted at :class:`RewardRuntimeError`.

A reward that fails on a sample is never an exception here: it is that sample's typed outcome
(``reward_error``, ``reward_timeout``, ``reward_crash``). These errors are about everything else —
a reward that cannot be loaded, settings or rows that make no sense, worker processes that cannot be
started — and are raised before any work is lost. The whole tree is drawn in :mod:`osmosis_ai.errors`.
"""

from __future__ import annotations

from osmosis_ai.errors import OsmosisError


class RewardRuntimeError(OsmosisError, RuntimeError):
    """The reward runtime cannot score: it is closed, or its worker processes are gone for good."""


class RewardLoadError(RewardRuntimeError, ValueError):
    """The reward named cannot be used: it does not import, is not callable, fits no shape, or cannot
    be imported by name in a worker process. The cause (what the import raised) is ``__cause__``."""


class RewardSettingError(RewardRuntimeError, ValueError):
    """A runtime setting is out of range (timeout, workers, memory limit, concurrency)."""


class RewardInputError(RewardRuntimeError, ValueError):
    """A row cannot be scored as given: a field is missing or of the wrong type, or it cannot be sent
    to a worker process. ``index`` is the row's position (``None`` when not known)."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class WorkerStartError(RewardRuntimeError):
    """A worker process could not be started or could not import the reward (a fresh interpreter
    can fail where the parent did not, e.g. when the module depends on state set up by the caller)."""
