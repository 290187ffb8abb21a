"""The scripted policy: the arithmetic it finds, the tool call it makes, then the answer."""

from __future__ import annotations

import json

import pytest

from osmosis_ai.traingate.policy.scripted import ScriptedPolicy, find_expression


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is 12 + 7?", ("add", 12, 7)),
        ("What is 45 - 18?", ("subtract", 45, 18)),
        ("Compute 2.5 * -4 please", ("multiply", 2.5, -4)),
        ("What is 9 / 3?", ("divide", 9, 3)),
        ("Add them: 3 + 1.", ("add", 3, 1)),
        ("What is 1 + 2 + 3?", None),
        ("no maths here", None),
    ],
)
def test_find_expression(text: str, expected: object) -> None:
    assert find_expression(text) == expected


async def test_scripted_policy_calls_the_tool_then_answers() -> None:
    policy = ScriptedPolicy()
    tools = [{"type": "function", "function": {"name": "multiply"}}]
    messages = [{"role": "user", "content": "What is 6 * 7?"}]
    first = await policy.generate(messages, tools=tools, params={})
    call = first.message["tool_calls"][0]
    assert first.finish_reason == "tool_calls"
    assert call["function"] == {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}
    messages += [first.message, {"role": "tool", "tool_call_id": call["id"], "content": "42"}]
    final = await policy.generate(messages, tools=tools, params={})
    assert final.message == {"role": "assistant", "content": "The answer is #### 42"}
    missing = await policy.generate(messages[:1], tools=[], params={})
    assert "multiply" in missing.message["content"] and "tool_calls" not in missing.message


NUMBER = {"type": "number"}


@pytest.mark.parametrize(
    ("parameters", "arguments"),
    [
        ({"type": "object", "properties": {"x": NUMBER, "y": NUMBER}}, {"x": 1.5, "y": 3}),
        (  # an optional number (anyOf with null) counts as a number; integers take whole floats
            {"properties": {"p": {"anyOf": [NUMBER, {"type": "null"}]}, "q": {"type": "integer"}}},
            {"p": 1.5, "q": 3},
        ),
        ({"properties": {"values": {"type": "array", "items": NUMBER}}}, {"values": [1.5, 3]}),
        (  # a required string: the operation's enum member, or else the expression; optional ones are left out
            {
                "properties": {
                    "op": {"type": "string", "enum": ["plus", "*", "minus"]},
                    "text": {"type": "string"},
                    "note": {"type": "string"},
                    "left": NUMBER,
                    "right": NUMBER,
                },
                "required": ["op", "text", "left", "right"],
            },
            {"op": "*", "text": "1.5 * 3.0", "left": 1.5, "right": 3},
        ),
        (
            {"type": "object", "properties": {}},
            {"a": 1.5, "b": 3},
        ),  # nothing declared: the calculator's names
    ],
)
async def test_the_arguments_follow_the_tools_schema(parameters: dict, arguments: dict) -> None:
    tools = [{"type": "function", "function": {"name": "multiply", "parameters": parameters}}]
    first = await ScriptedPolicy().generate(
        [{"role": "user", "content": "What is 1.5 * 3.0?"}], tools=tools, params={}
    )
    assert json.loads(first.message["tool_calls"][0]["function"]["arguments"]) == arguments
