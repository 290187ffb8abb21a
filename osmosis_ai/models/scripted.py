"""``scripted``: a stand-in for a model that solves the calculator example by calling its tools.

It is not a model: it reads the single ``A op B`` expression in the last user message, calls the
matching tool (``add``/``subtract``/``multiply``/``divide``) with ``{"a": A, "b": B}``, and once a
tool result is back answers ``"The answer is #### <tool result>"``. It is deterministic and needs no
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
    offered = {t.get("function", {}).get("name") for t in tools}
    if tool not in offered:
        text = f"I need the tool {tool!r}, but this rollout offers {sorted(n for n in offered if n)}."
        return {"role": "assistant", "content": text}, "stop"
    call_index = sum(1 for m in messages if m.get("role") == "assistant")
    call = {
        "id": f"call_{call_index}",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps({"a": a, "b": b})},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}, "tool_calls"
