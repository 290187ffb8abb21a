"""What a runtime scores (:class:`Sample`) and what it reports for each (:class:`SampleResult`).

A sample carries either the answer text (``solution_str``) or the whole conversation
(``messages``), the ``ground_truth`` and an optional ``extra_info`` mapping. It is turned into the
reward's three arguments by the reward's shape:

* simple ``fn(solution_str, ground_truth, extra_info)``: ``solution_str`` as given, else the last
  assistant message's content (as ``osmosis eval`` does); ``extra_info`` a fresh ``dict`` (empty
  when the sample has none);
* full ``fn(messages, ground_truth, metadata)``: ``messages`` as given, else one assistant message
  holding ``solution_str``; ``metadata`` is ``extra_info``.

Rows may be given as mappings with those keys (``metadata`` is accepted for ``extra_info``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osmosis_ai.outcome import Outcome
from osmosis_ai.rewards.eval_fn import SIMPLE, last_assistant_text
from osmosis_ai.rewards.runtime.errors import RewardInputError
from osmosis_ai.rewards.score import describe_value


@dataclass(frozen=True)
class Sample:
    """One thing to score. Give ``solution_str`` or ``messages`` (or both)."""

    ground_truth: Any
    solution_str: str | None = None
    messages: Sequence[Mapping[str, Any]] | None = None
    extra_info: Mapping[str, Any] | None = None


@dataclass(slots=True)
class SampleResult:
    """How scoring one sample ended (a plain record: made once per sample, so made cheaply).

    ``outcome`` is ``completed`` (``score`` is a finite float), ``reward_error`` (the reward raised
    or returned no score), ``reward_timeout`` (it ran past the timeout and was stopped) or
    ``reward_crash`` (it took its worker process down, or ran out of memory) or ``infra_error`` (it
    raised :class:`~osmosis_ai.errors.InfrastructureError`: its own machinery failed); ``error`` is the first
    line of what went wrong and ``score`` is ``None`` for all but ``completed``. ``index`` is the
    row's position (or what the caller passed). ``duration`` is how long the reward ran, in seconds,
    measured where it ran. ``output`` is what it printed, bounded. ``value`` is what a ``raw``
    target returned (:meth:`RewardRuntime.call`; its ``score`` is ``None``).
    """

    index: int | None
    outcome: Outcome
    score: float | None = None
    error: str | None = None
    duration: float | None = None
    output: str = ""
    value: Any = None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.COMPLETED


def prepare(row: Sample | Mapping[str, Any], index: int | None, mode: str) -> tuple[Any, Any, dict[str, Any]]:
    """The reward's three arguments for ``row`` in shape ``mode`` (see the module docstring), or
    :class:`RewardInputError` naming the row and the field."""
    if isinstance(row, Sample):
        truth, solution, messages, extra = row.ground_truth, row.solution_str, row.messages, row.extra_info
    elif isinstance(row, Mapping):
        if "ground_truth" not in row:
            raise _bad(index, f"has no 'ground_truth' (its keys: {_keys(row)})")
        truth, solution, messages = row["ground_truth"], row.get("solution_str"), row.get("messages")
        extra = row.get("extra_info", row.get("metadata"))
    else:
        raise _bad(index, f"is a {type(row).__name__}; a row is a mapping or a Sample")
    if solution is None and messages is None:
        raise _bad(index, "has neither 'solution_str' nor 'messages'")
    if solution is not None and not isinstance(solution, str):
        raise _bad(index, f"'solution_str' must be a string, got {describe_value(solution)}")
    if messages is not None and (
        isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence)
    ):
        raise _bad(index, f"'messages' must be a list of messages, got {describe_value(messages)}")
    if extra is None:
        extra = {}
    elif isinstance(extra, Mapping):
        extra = dict(extra)
    else:
        raise _bad(index, f"'extra_info' must be a mapping, got {describe_value(extra)}")
    if mode == SIMPLE:
        return (solution if solution is not None else last_assistant_text(messages or ())), truth, extra
    if messages is None:
        return [{"role": "assistant", "content": solution}], truth, extra
    return list(messages), truth, extra


def _keys(row: Mapping[str, Any]) -> str:
    return ", ".join(map(repr, list(row)[:20])) or "none"


def _bad(index: int | None, problem: str) -> RewardInputError:
    where = f"row {index}" if index is not None else "the sample"
    return RewardInputError(f"{where} {problem}", index=index)
