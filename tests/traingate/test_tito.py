"""Token-in-token-out traces: the incremental sequence, its loss mask, and drift found with the right cause."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import chat_model as chat_models
from osmosis_ai.traingate import drift
from osmosis_ai.traingate.tito import TokenTrace
from osmosis_ai.traingate.tokenizer import ChatTokenizer

Message = dict[str, Any]
TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Add two numbers", "parameters": {}}}
]


@functools.cache
def model(template_name: str) -> ChatTokenizer:
    """One tokenizer directory per template, shared by every test and hypothesis example."""
    directory = Path(tempfile.mkdtemp(prefix="osmosis-tito-")) / template_name
    chat_models.write_model(directory, getattr(chat_models, template_name))
    return ChatTokenizer.from_directory(directory)


def call(index: int, a: int, b: int, *, spaced: bool = True) -> Message:
    arguments = json.dumps({"a": a, "b": b}, separators=(", ", ": ") if spaced else (",", ":"))
    return {"id": f"call_{index}", "type": "function", "function": {"name": "add", "arguments": arguments}}


def play(
    trace: TokenTrace, conversation: list[Message], sampled: dict[int, str] | None = None
) -> list[list[int]]:
    """Serve every assistant message of ``conversation`` as a turn; ``sampled[i]`` is the text the
    backend generated for message ``i`` (its ids are then used verbatim). Returns each turn's prompt."""
    prompts = []
    for index, message in enumerate(conversation):
        if message["role"] != "assistant":
            continue
        history = conversation[:index]
        prompt = trace.extend(history)
        trace.check(history, prompt, turn=len(prompts))
        ids = None
        if sampled and index in sampled:
            ids = trace.tokenizer.encode(sampled[index])
            trace.check_completion(history, message, ids, turn=len(prompts))
        trace.add_completion(message, ids)
        prompts.append(prompt)
    return prompts


TOOL_CONVERSATION: list[Message] = [
    {"role": "system", "content": "You are a careful calculator."},
    {"role": "user", "content": "What is 12 + 7?"},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Use the add tool.",
        "tool_calls": [call(0, 12, 7)],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "19"},
    {"role": "assistant", "content": "The answer is #### 19"},
    {"role": "user", "content": "And 19 + 1?"},
    {"role": "assistant", "content": None, "tool_calls": [call(1, 19, 1)]},
    {"role": "tool", "tool_call_id": "call_1", "content": "20"},
    {"role": "assistant", "content": "#### 20"},
]


@pytest.mark.parametrize(
    ("template", "cause", "line_has"),
    [
        ("REASONING_STRIPPED", drift.REASONING_REMOVED, "loop.last"),
        ("NEWLINE_SWALLOWED", drift.WHITESPACE_AT_BOUNDARY, "message.tool_calls"),
        ("LAST_TURN_DIFFERENT", drift.SPECIAL_TOKEN_DIFFERS, "<|endoftext|>"),
    ],
)
def test_drifting_templates_are_caught_with_their_cause(template: str, cause: str, line_has: str) -> None:
    trace = TokenTrace(model(template), tools=TOOLS)
    play(trace, TOOL_CONVERSATION)
    assert trace.events, "the drift went unnoticed"
    first = trace.events[0]
    assert (first.kind, first.cause, first.turn) == (drift.TEMPLATE, cause, 1)
    assert first.message in (2, 3)  # the first assistant turn or the boundary after it
    assert first.trajectory != first.rendered
    assert first.template_text is not None and line_has in first.template_text
    # The well-behaved template serves the same conversation without a single event.
    clean = TokenTrace(model("WELL_BEHAVED"), tools=TOOLS)
    play(clean, TOOL_CONVERSATION)
    assert clean.events == []


def test_tool_call_arguments_re_serialised_are_caught_against_the_sampled_ids() -> None:
    tokenizer = model("ARGUMENTS_RESPACED")
    trace = TokenTrace(tokenizer, tools=TOOLS)
    # What the model sampled: spaced JSON; the template prints the arguments without spaces.
    sampled = (
        "<think>\nUse the add tool.\n</think>\n\n"
        '<tool_call>\n{"name": "add", "arguments": {"a": 12, "b": 7}}\n</tool_call><|im_end|>'
    )
    play(trace, TOOL_CONVERSATION[:5], sampled={2: sampled})
    kinds = [(e.kind, e.cause, e.turn) for e in trace.events]
    assert (drift.BACKEND_COMPLETION, drift.TOOL_CALL_RERENDERED, 0) in kinds
    assert (drift.TEMPLATE, drift.TOOL_CALL_RERENDERED, 1) in kinds
    backend = next(e for e in trace.events if e.kind == drift.BACKEND_COMPLETION)
    assert backend.message == 2 and '"a": 12' in backend.trajectory and '"a":12' in backend.rendered
    assert backend.template_text is not None and "arguments" in backend.template_text


def test_prompts_extend_and_the_mask_marks_exactly_the_generated_tokens() -> None:
    tokenizer = model("WELL_BEHAVED")
    trace = TokenTrace(tokenizer, tools=TOOLS)
    prompts = play(trace, TOOL_CONVERSATION)
    completions = [
        trace.tokenizer.encode(trace.completion_text(m))
        for m in TOOL_CONVERSATION
        if m["role"] == "assistant"
    ]
    for k in range(1, len(prompts)):
        assert (
            prompts[k][: len(prompts[k - 1]) + len(completions[k - 1])] == prompts[k - 1] + completions[k - 1]
        )
    assert prompts[-1] == tokenizer.encode(
        tokenizer.render(TOOL_CONVERSATION[:-1], tools=TOOLS, add_generation_prompt=True)
    )
    assert trace.ids == prompts[-1] + completions[-1]
    generated = [i for i, bit in enumerate(trace.mask) if bit]
    expected = [
        i
        for prompt, completion in zip(prompts, completions, strict=True)
        for i in range(len(prompt), len(prompt) + len(completion))
    ]
    assert generated == expected
    assert (
        tokenizer.decode(completions[-1]) == "#### 20<|im_end|>"
    )  # the end-of-turn is generated, the newline is not


def test_the_incremental_path_and_the_check_are_timed_apart() -> None:
    trace = TokenTrace(model("WELL_BEHAVED"))
    play(trace, TOOL_CONVERSATION)
    assert trace.incremental_seconds > 0 and trace.check_seconds > 0


# -- no false positives -----------------------------------------------------------------------------

_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,;:?!#'\"()[]{}-+*/=éüß中"
texts = st.text(alphabet=_ALPHABET, min_size=1, max_size=30).filter(lambda t: not t[0].isspace())


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(texts)})
    messages.append({"role": "user", "content": draw(texts)})
    rounds = draw(st.integers(1, 5))
    calls = 0
    for round_index in range(rounds):
        message: Message = {"role": "assistant", "content": draw(st.one_of(st.none(), texts))}
        if draw(st.booleans()):
            message["reasoning_content"] = draw(texts)
        tool_calls = [
            call(calls + i, draw(st.integers(-99, 999)), draw(st.integers(0, 99)), spaced=draw(st.booleans()))
            for i in range(draw(st.integers(0, 2)))
        ]
        calls += len(tool_calls)
        if tool_calls:
            message["tool_calls"] = tool_calls
        messages.append(message)
        if tool_calls:
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": draw(texts)} for c in tool_calls
            )
        elif round_index < rounds - 1:
            messages.append({"role": "user", "content": draw(texts)})
    if messages[-1]["role"] != "assistant":
        messages.append({"role": "assistant", "content": draw(texts)})
    return messages


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=conversations(), with_tools=st.booleans())
def test_a_well_behaved_template_never_drifts(conversation: list[Message], with_tools: bool) -> None:
    trace = TokenTrace(model("WELL_BEHAVED"), tools=TOOLS if with_tools else None)
    prompts = play(trace, conversation)
    assert trace.events == []
    assert len(prompts) == sum(1 for m in conversation if m["role"] == "assistant")
    last = len(prompts[-1])
    assert trace.ids[:last] == prompts[-1] and trace.mask[last:] == [1] * (len(trace.ids) - last)
