"""The tiny local model: built offline, read alike by transformers and by TrainGate's tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.traingate.tokenizer import ChatTokenizer, load_tokenizer
from tests.train.agents import TOOLS

pytestmark = pytest.mark.xdist_group("trl")

CONVERSATION = [
    {"role": "system", "content": "Use the calculator."},
    {"role": "user", "content": "What is 4 + 15?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "4 + 15"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "content": "19"},
    {"role": "assistant", "content": "The answer is 19."},
]


def test_transformers_and_traingate_render_and_encode_it_alike(tiny_model: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(tiny_model)
    ours = load_tokenizer(str(tiny_model))
    assert isinstance(ours, ChatTokenizer) and ours.eos_token == "<|im_end|>"
    for end in range(2, len(CONVERSATION) + 1):
        for tools in (TOOLS, None):
            for prompt in (True, False):
                kwargs = {"tools": tools, "add_generation_prompt": prompt}
                rendered = ours.render(CONVERSATION[:end], **kwargs)
                assert rendered == theirs.apply_chat_template(CONVERSATION[:end], tokenize=False, **kwargs)
                assert ours.encode(rendered) == theirs.encode(rendered, add_special_tokens=False)
    assert (
        '<tool_call>{"name": "calculator", "arguments": {"expression": "4 + 15"}}</tool_call><|im_end|>'
        in rendered
    )
    parameters = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny_model).parameters())
    assert 50_000 < parameters < 200_000


def test_the_same_seed_builds_the_same_model(tiny_model: Path, tmp_path: Path) -> None:
    from osmosis_ai.train.tiny import build_tiny_model

    again = build_tiny_model(tmp_path / "again")
    for name in ("tokenizer.json", "model.safetensors", "chat_template.jinja"):
        assert (again / name).read_bytes() == (tiny_model / name).read_bytes(), name
