"""``scripted``: a stand-in for a model that solves the calculator example by calling its tools.

It is not a model: it reads the single ``A op B`` expression in the last user message, calls the
matching tool (``add``/``subtract``/``multiply``/``divide``) with A and B, and once a tool result is
back answers ``"The answer is #### <tool result>"``. The arguments follow the tool's own JSON Schema
(:func:`_arguments`): A and B go to its numeric parameters in order, so ``x``/``y`` or
``first``/``second`` work as well as the calculator's ``a``/``b``. It is deterministic and needs no
network, key or weights, which makes it the model of ``make demo`` and of the end-to-end tests in
every command that takes ``--model``: the TrainGate's policy (``ScriptedPolicy``) and the agents'
calls in ``osmosis test``/``eval`` (the model seam's ``scripted`` route) both answer with
:func:`reply`.
"""

from __future__ import annotations

import json
import re
from typing import Any

Message = dict[str, Any]

_NUMBER = r"-?\d+(?:\.\d+)?"
_BINARY = re.compile(rf"^({_NUMBER})\s*([-+*/])\s*({_NUMBER})$")
# A maximal chain "N op N op N ...": only a chain of exactly one operator is a binary expression.
_CHAIN = re.compile(rf"(?<![\w.]){_NUMBER}(?:\s*[-+*/]\s*{_NUMBER})+(?!\w|\.\d)")
_TOOL_FOR_OPERATOR = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def find_expression(text: str) -> tuple[str, int | float, int | float] | None:
    """The tool name and operands of the single ``A op B`` in ``text``; ``None`` unless exactly one."""
    chains = _CHAIN.findall(text)
    binary = _BINARY.match(chains[0]) if len(chains) == 1 else None
    if binary is None:
        return None
    left, operator, right = binary.groups()
    return _TOOL_FOR_OPERATOR[operator], _number(left), _number(right)


def _types(schema: Any) -> set[str]:
    """The JSON types a property's schema allows (``anyOf``/``oneOf`` branches included)."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    types = {declared} if isinstance(declared, str) else {t for t in declared or () if isinstance(t, str)}
    for branch in (*(schema.get("anyOf") or ()), *(schema.get("oneOf") or ())):
        types |= _types(branch)
    return types


def _fits(value: int | float, types: set[str]) -> int | float:
    """``value`` as the parameter takes it: a whole float becomes an int for an ``integer`` parameter."""
    if "number" not in types and "integer" in types and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _text_for(schema: dict[str, Any], names: tuple[str, str], expression: str) -> str:
    """A string parameter's value: the enum member naming the operation (one of ``names``, e.g.
    ``add`` or ``+``) if it has an enum, else the expression itself (``"12 + 7"``)."""
    choices = [c for c in schema.get("enum") or () if isinstance(c, str)]
    if not choices:
        return expression
    return next((c for c in choices if c.lower() in names), choices[0])


def _arguments(tool: Message, name: str, a: int | float, b: int | float) -> dict[str, Any]:
    """The arguments of a call of ``tool`` (an OpenAI function tool) computing ``a <name> b``.

    A and B fill the numeric parameters of the tool's ``parameters`` schema in their order (or one
    array-of-numbers parameter as ``[A, B]``); each required string parameter gets the operation's
    enum member or the expression. A tool without declared parameters gets ``{"a": A, "b": B}``.
    """
    schema = tool.get("function", {}).get("parameters")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return {"a": a, "b": b}
    required = set(schema.get("required") or ())
    operator = next(op for op, tool_name in _TOOL_FOR_OPERATOR.items() if tool_name == name)
    expression = f"{a} {operator} {b}"
    numbers: list[int | float] = [a, b]
    filled: dict[str, Any] = {}
    for key, spec in properties.items():
        types = _types(spec)
        if types & {"number", "integer"} and numbers:
            filled[key] = _fits(numbers.pop(0), types)
        elif "array" in types and len(numbers) == 2 and _types(spec.get("items")) & {"number", "integer"}:
            filled[key], numbers = list(numbers), []
        elif "string" in types and key in required:
            filled[key] = _text_for(spec, (name, operator), expression)
    return filled


def _last(messages: list[Message], role: str) -> Message | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def reply(messages: list[Message], tools: list[Message]) -> tuple[Message, str]:
    """The assistant message answering ``messages`` given the offered ``tools``, and its finish reason."""
    if messages and messages[-1].get("role") == "tool":
        result = str(messages[-1].get("content", "")).strip()
        return {"role": "assistant", "content": f"The answer is #### {result}"}, "stop"
    user = _last(messages, "user")
    found = find_expression(str(user.get("content", ""))) if user else None
    if found is None:
        return {
            "role": "assistant",
            "content": "I could not find a single 'A op B' expression to compute.",
        }, "stop"
    tool, a, b = found
    offered = {t.get("function", {}).get("name"): t for t in tools}
    if tool not in offered:
        text = f"I need the tool {tool!r}, but this rollout offers {sorted(n for n in offered if n)}."
        return {"role": "assistant", "content": text}, "stop"
    call_index = sum(1 for m in messages if m.get("role") == "assistant")
    call = {
        "id": f"call_{call_index}",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(_arguments(offered[tool], tool, a, b))},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}, "tool_calls"
