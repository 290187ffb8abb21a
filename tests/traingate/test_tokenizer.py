"""The tokenizers: byte prompts extend the previous prompt plus completion; tokenizer.json files load."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.models.rendering import render_completion, render_prompt
from osmosis_ai.traingate.errors import TrainGateError
from osmosis_ai.traingate.tokenizer import ByteTokenizer, load_tokenizer


def test_byte_tokenizer_prompt_extends_previous_prompt_plus_completion() -> None:
    tok = ByteTokenizer()
    first = [{"role": "user", "content": "héllo"}]
    answer = {"role": "assistant", "content": "hi"}
    prompt0 = tok.encode(render_prompt(first))
    completion = tok.encode(render_completion(answer))
    prompt1 = tok.encode(render_prompt([*first, answer, {"role": "user", "content": "again"}]))
    assert prompt1[: len(prompt0) + len(completion)] == prompt0 + completion
    assert bytes(completion).decode() == "hi\n"


def test_hf_tokenizer_from_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hi": 1, "<|assistant|>": 2}
    hf = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = load_tokenizer(str(path))
    assert tok.encode("hi hi") == [1, 1]
    with pytest.raises(TrainGateError, match="tokenizer file not found"):
        load_tokenizer(str(tmp_path / "nope.json"))
