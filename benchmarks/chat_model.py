"""Local model directories for the tokenization benchmark and the chat-template tests: a byte-level
BPE ``tokenizer.json`` trained here in milliseconds (no downloads) and chat templates written for
this project.

``WELL_BEHAVED`` renders every message the same wherever it stands, so token-in-token-out never
drifts. The other templates each model one failure mode seen in real models' templates:
``REASONING_STRIPPED`` drops ``<think>`` blocks from earlier turns, ``NEWLINE_SWALLOWED`` omits the
newline after an assistant turn that called tools, ``ARGUMENTS_RESPACED`` re-serialises tool-call
arguments without spaces, ``LAST_TURN_DIFFERENT`` closes the final assistant turn with another token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

_CORPUS = [
    "You are a careful calculator. Use the tools for arithmetic, then give the final answer.",
    "What is 12 + 7? The answer is #### 19",
    '{"name": "add", "arguments": {"a": 12, "b": 7}}',
    '{"type": "function", "function": {"name": "multiply", "description": "Multiply two numbers"}}',
    "system user assistant tool tools think reasoning result",
]

_SYSTEM = (
    "{%- if messages[0].role == 'system' or tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}{% endif %}"
    "{%- if tools %}{{- '\\n# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{% endfor %}"
    "{{- '\\n</tools>' }}{% endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}\n"
)
_ASSISTANT = (
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- if message.reasoning_content REASONING_CONDITION %}"
    "{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' }}{% endif %}\n"
    "{%- if message.content %}{{- message.content }}{% endif %}\n"
    "{%- for call in message.tool_calls or [] %}"
    '{{- \'<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' '
    "+ (call.function.arguments ARGUMENTS_FILTER) + '}\\n</tool_call>' }}{% endfor %}\n"
    "{{- END_OF_TURN }}\n"
)
_TEMPLATE = (
    _SYSTEM
    + "{%- for message in messages %}\n"
    + "{%- if message.role == 'assistant' %}\n"
    + _ASSISTANT
    + "{%- elif message.role != 'system' or not loop.first %}\n"
    + "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    + "{%- endif %}\n"
    + "{%- endfor %}\n"
    + "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{% endif %}\n"
)


def _template(*, reasoning: str = "", arguments: str = "", end_of_turn: str = "'<|im_end|>\\n'") -> str:
    return (
        _TEMPLATE.replace("REASONING_CONDITION", reasoning)
        .replace("ARGUMENTS_FILTER", arguments)
        .replace("END_OF_TURN", end_of_turn)
    )


WELL_BEHAVED = _template()
REASONING_STRIPPED = _template(reasoning="and loop.last")
NEWLINE_SWALLOWED = _template(end_of_turn="'<|im_end|>' if message.tool_calls else '<|im_end|>\\n'")
ARGUMENTS_RESPACED = _template(arguments="| replace('\": ', '\":') | replace(', \"', ',\"')")
LAST_TURN_DIFFERENT = _template(
    end_of_turn="'<|endoftext|>' if loop.last and not add_generation_prompt else '<|im_end|>\\n'"
)


def write_tokenizer(directory: Path) -> Path:
    """Train a small byte-level BPE with the chat special tokens and save ``tokenizer.json`` in ``directory``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 10, trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def write_model(
    directory: Path, template: str | None = WELL_BEHAVED, *, as_file: bool = False, **config: Any
) -> Path:
    """A model directory: ``tokenizer.json`` + ``tokenizer_config.json`` holding (or beside) ``template``."""
    write_tokenizer(directory)
    settings: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        **config,
    }
    if template is not None and as_file:
        (directory / "chat_template.jinja").write_text(template, encoding="utf-8")
    elif template is not None:
        settings["chat_template"] = template
    (directory / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    return directory
