"""Reading the judge's verdict out of its reply text.

Judges do not always reply with bare JSON, above all when only ``json_object`` mode (or nothing)
is available: they wrap it in code fences, put prose around it, or think aloud in ``<think>``
blocks first. :func:`parse_verdict` tries the whole text as JSON, then every balanced ``{...}``
object in it, and takes the first object that has a ``"score"``. What is not a usable verdict
raises :class:`VerdictError`, which the caller may answer with a corrective retry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from osmosis_ai.judge.errors import VerdictError

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_START = re.compile(r"^```(?:json)?\s*", re.IGNORECASE)
_FENCE_END = re.compile(r"\s*```$")
_MAX_OBJECT_STARTS = 256  # bounds the scan of long prose replies

__all__ = ["Verdict", "VerdictError", "clamp", "parse_verdict"]


class Verdict(NamedTuple):
    score: float
    explanation: str


def _json_objects(text: str) -> Iterator[Any]:
    """Every JSON value that starts at a ``{`` in ``text``, left to right (nested ones included)."""
    decoder = json.JSONDecoder()
    index = text.find("{")
    for _ in range(_MAX_OBJECT_STARTS):
        if index == -1:
            return
        try:
            value, _ = decoder.raw_decode(text, index)
        except ValueError:
            pass
        else:
            yield value
        index = text.find("{", index + 1)


def _candidates(text: str) -> Iterator[Any]:
    """The whole reply as JSON (fences and ``<think>`` blocks removed), then each object inside it."""
    text = _THINK.sub("", text).strip()
    unfenced = _FENCE_END.sub("", _FENCE_START.sub("", text)).strip()
    try:
        whole = json.loads(unfenced)
    except ValueError:
        pass
    else:
        yield whole
    yield from _json_objects(text)


def _score(value: Any) -> float:
    if isinstance(value, bool):
        raise VerdictError(f'"score" must be a number, got the boolean {json.dumps(value)}')
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise VerdictError(f'"score" must be a number, got the string {value!r}') from None
    if not isinstance(value, (int, float)):
        raise VerdictError(f'"score" must be a number, got {type(value).__name__}')
    score = float(value)
    if not math.isfinite(score):
        raise VerdictError(f'"score" must be finite, got {score}')
    return score


def _explanation(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise VerdictError(f'"explanation" must be a string, got {type(value).__name__}')
    return value.strip()


def parse_verdict(text: str) -> Verdict:
    """Extract the verdict from the judge's reply ``text``.

    Raises:
        VerdictError: no JSON object with a ``"score"`` key, or its values have the wrong types.
    """
    verdict = next((obj for obj in _candidates(text) if isinstance(obj, dict) and "score" in obj), None)
    if verdict is None:
        raise VerdictError(
            'the judge reply did not contain a JSON object with a "score" key; '
            "consider making the rubric ask for the JSON verdict more explicitly"
        )
    return Verdict(_score(verdict["score"]), _explanation(verdict.get("explanation")))


def clamp(score: float, low: float, high: float) -> float:
    """``score`` limited to ``[low, high]``."""
    return max(low, min(high, score))
