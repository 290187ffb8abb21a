"""Chat templates rendered without transformers, byte for byte as ``apply_chat_template`` renders them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from benchmarks import chat_model as chat_models
from osmosis_ai.traingate.chat_template import ChatTemplate
from osmosis_ai.traingate.errors import TrainGateError
from osmosis_ai.traingate.tokenizer import ChatTokenizer, HFTokenizer, load_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers — exactly",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }
]
CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are careful."},
    {"role": "user", "content": "What is 2 + 3? Ünïcode <b>too</b>."},
    {"role": "assistant", "content": None, "reasoning_content": "I should add.", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_0", "content": "5"},
    {"role": "assistant", "content": "The answer is #### 5", "thinking": "Done."},
    {"role": "user", "content": "Thanks"},
]


def as_transformers_reads(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with each reasoning also under ``reasoning_content``, the one name every
    transformers release passes to templates (the releases verl allows, < 5.11, do not map
    ``thinking`` to it); the renderer under test gets the conversation as it is."""
    return [
        {**m, "reasoning_content": m["thinking"]} if "thinking" in m and "reasoning_content" not in m else m
        for m in messages
    ]


# Exercises special-token variables, raise_exception, namespace, loop controls, tojson options,
# the generation block and whitespace control, beside the project's own templates.
FEATURES = (
    "{{ bos_token }}{% set ns = namespace(n=0) %}"
    "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
    "{% set ns.n = ns.n + 1 %}"
    "  {% if m.role not in ['user', 'assistant', 'tool'] %}{{ raise_exception('bad role') }}{% endif %}\n"
    "[{{ ns.n }}:{{ m.role }}]{% if m.role == 'assistant' %}{% generation %}{{ m.content or '' }}"
    "{% if m.tool_calls %}{{ m.tool_calls | tojson(indent=2, sort_keys=True) }}{% endif %}"
    "{% endgeneration %}{{ eos_token }}{% else %}{{ m.content }}{% endif %}\n"
    "{% endfor %}{% if tools %}{{ tools | tojson(separators=(',', ':')) }}{% endif %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)
TEMPLATES = {
    "well_behaved": chat_models.WELL_BEHAVED,
    "reasoning_stripped": chat_models.REASONING_STRIPPED,
    "newline_swallowed": chat_models.NEWLINE_SWALLOWED,
    "arguments_respaced": chat_models.ARGUMENTS_RESPACED,
    "last_turn_different": chat_models.LAST_TURN_DIFFERENT,
    "features": FEATURES,
}


@pytest.fixture(autouse=True)
def _quiet_transformers() -> None:
    logging.getLogger("transformers").setLevel(logging.ERROR)


def _hf(directory: Path) -> Any:
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(directory))


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@pytest.mark.parametrize("as_file", [False, True], ids=["config", "jinja_file"])
def test_rendering_equals_transformers_byte_for_byte(tmp_path: Path, name: str, as_file: bool) -> None:
    directory = chat_models.write_model(
        tmp_path / name, TEMPLATES[name], as_file=as_file, bos_token="<|endoftext|>"
    )
    ours = ChatTokenizer.from_directory(directory)
    theirs = _hf(directory)
    for end in range(2, len(CONVERSATION) + 1):
        for tools in (TOOLS, None):
            for generation_prompt in (True, False):
                kwargs = {"tools": tools, "add_generation_prompt": generation_prompt}
                rendered = ours.render(CONVERSATION[:end], **kwargs)
                expected = theirs.apply_chat_template(
                    as_transformers_reads(CONVERSATION[:end]), tokenize=False, **kwargs
                )
                assert rendered == expected, (end, tools is not None, generation_prompt)
                ids = theirs.apply_chat_template(
                    as_transformers_reads(CONVERSATION[:end]), tokenize=True, return_dict=False, **kwargs
                )
                assert ours.encode(rendered) == list(ids)


def test_named_templates_are_chosen_like_transformers(tmp_path: Path) -> None:
    named = [
        {"name": "default", "template": "D{% for m in messages %}|{{ m.content }}{% endfor %}"},
        {
            "name": "tool_use",
            "template": "T{{ tools | length }}{% for m in messages %}|{{ m.content }}{% endfor %}",
        },
    ]
    directory = chat_models.write_model(tmp_path / "named", None, chat_template=named)
    ours = ChatTokenizer.from_directory(directory)
    theirs = _hf(directory)
    messages = [{"role": "user", "content": "hi"}]
    for tools in (None, TOOLS):
        assert ours.render(messages, tools=tools) == theirs.apply_chat_template(
            messages, tools=tools, tokenize=False
        )
    assert ours.render(messages, tools=TOOLS) == "T1|hi"
    assert ours.template.render(messages, name="default") == "D|hi"


def test_additional_template_files_and_override(tmp_path: Path) -> None:
    directory = chat_models.write_model(tmp_path / "m", "{% for m in messages %}{{ m.content }}{% endfor %}")
    (directory / "additional_chat_templates").mkdir()
    (directory / "additional_chat_templates" / "tool_use.jinja").write_text("tools:{{ tools | length }}")
    template = ChatTemplate.from_directory(directory)
    assert sorted(template.templates) == ["default", "tool_use"]
    assert template.render([{"role": "user", "content": "x"}], tools=TOOLS) == "tools:1"
    override = tmp_path / "mine.jinja"
    override.write_text("{{ eos_token }}{{ messages | length }}")
    tokenizer = load_tokenizer(str(directory), chat_template=str(override))
    assert isinstance(tokenizer, ChatTokenizer)
    assert tokenizer.render([{"role": "user", "content": "x"}]) == "<|im_end|>1"
    # A bare tokenizer.json keeps its old meaning; with a template file it renders that template.
    assert isinstance(load_tokenizer(str(directory / "tokenizer.json")), HFTokenizer)
    assert isinstance(
        load_tokenizer(str(directory / "tokenizer.json"), chat_template=str(override)), ChatTokenizer
    )


def test_template_failures_are_one_line_errors(tmp_path: Path) -> None:
    refusing = ChatTemplate({"default": "{{ raise_exception('Only user and assistant roles') }}"}, source="m")
    with pytest.raises(TrainGateError, match="refused the conversation: Only user and assistant roles"):
        refusing.render([{"role": "tool", "content": "x"}])
    escaping = ChatTemplate({"default": "{{ ''.__class__.__mro__ }}"}, source="m")
    with pytest.raises(TrainGateError, match="refused"):
        escaping.render([])
    mutating = ChatTemplate({"default": "{% set x = [] %}{{ x.append(1) }}"}, source="m")
    with pytest.raises(TrainGateError, match="refused"):
        mutating.render([])
    with pytest.raises(TrainGateError, match="does not compile"):
        ChatTemplate({"default": "{% for %}"}, source="m").render([])
    with pytest.raises(TrainGateError, match="no chat template in"):
        ChatTokenizer.from_directory(chat_models.write_model(tmp_path / "none", None))
    with pytest.raises(TrainGateError, match=r"--chat-template needs --tokenizer DIR"):
        load_tokenizer(None, chat_template="x.jinja")
    with pytest.raises(TrainGateError, match=r"no tokenizer\.json in"):
        load_tokenizer(str(tmp_path))


def test_special_tokens_come_from_the_config_as_strings_or_added_tokens(tmp_path: Path) -> None:
    added = {"__type": "AddedToken", "content": "<|endoftext|>", "special": True}
    directory = chat_models.write_model(
        tmp_path / "m", "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}", bos_token=added
    )
    template = ChatTemplate.from_directory(directory)
    assert template.render([]) == "<|endoftext|>|<|im_end|>|<|endoftext|>"
    assert json.loads((directory / "tokenizer_config.json").read_text())["bos_token"] == added
