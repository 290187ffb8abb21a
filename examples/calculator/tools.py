"""The calculator's tools: their OpenAI function schemas and a synchronous executor.

Tools never raise on bad input: the model gets an ``Error: ...`` text it can recover from.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from typing import Any

_OPERATIONS: dict[str, tuple[str, Callable[[float, float], float]]] = {
    "add": ("Add two numbers: a + b.", operator.add),
    "subtract": ("Subtract b from a: a - b.", operator.sub),
    "multiply": ("Multiply two numbers: a * b.", operator.mul),
    "divide": ("Divide a by b: a / b.", operator.truediv),
}


def _schema(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "The first operand."},
                    "b": {"type": "number", "description": "The second operand."},
                },
                "required": ["a", "b"],
            },
        },
    }


# One shared list: the server serializes it once and reuses the bytes for every rollout.
TOOLS: list[dict[str, Any]] = [_schema(name, desc) for name, (desc, _) in _OPERATIONS.items()]


def format_number(value: float) -> str:
    """``3.0`` -> ``"3"``, ``2.5`` -> ``"2.5"``: integral results are shown without a fraction."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


def _operand(arguments: dict[str, Any], name: str) -> float:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"argument {name!r} must be a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"argument {name!r} must be a number, got {value!r}") from None


def run_tool(name: str, arguments: str | dict[str, Any] | None) -> str:
    """Execute tool ``name`` with its JSON (or already decoded) arguments; the result as tool-message text."""
    operation = _OPERATIONS.get(name)
    if operation is None:
        return f"Error: unknown tool {name!r}; available tools: {', '.join(_OPERATIONS)}"
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
        if not isinstance(decoded, dict):
            raise ValueError("arguments must be a JSON object with numbers 'a' and 'b'")
        a, b = _operand(decoded, "a"), _operand(decoded, "b")
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return f"Error: invalid arguments for {name}: {exc}"
    if name == "divide" and b == 0:
        return "Error: division by zero"
    try:
        return format_number(operation[1](a, b))
    except OverflowError:
        return "Error: result out of range"
