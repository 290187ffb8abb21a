"""A tiny Qwen2-style model built offline: for running a training loop end to end on a CPU.

:func:`build_tiny_model` writes a model directory that ``transformers`` loads
(``AutoModelForCausalLM``/``AutoTokenizer``) and the local TrainGate reads
(:func:`~osmosis_ai.traingate.tokenizer.load_tokenizer`): a byte-level BPE tokenizer trained with
``tokenizers`` on a small built-in corpus (calculator problems and tool calls), Qwen's special tokens
(``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``), a chat template rendering tools and
Hermes-style ``<tool_call>`` blocks, and a randomly initialised ``Qwen2ForCausalLM`` of about 100k
parameters. Nothing is downloaded. The model knows nothing: it is for exercising machinery.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "build_tiny_model"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Written as one token each, as Qwen's tokenizer does, so a tool call costs few generated tokens.
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
VOCAB_SIZE = 640
# Qwen2's pre-tokenization (one digit per piece, letters and punctuation split apart): transformers
# rebuilds a Qwen2 tokenizer's pipeline with it whatever tokenizer.json says, so the tokenizer is
# trained with it too, or transformers and TrainGate would encode the same text differently.
QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call a tool with <tool_call>{"name": <name>, "arguments": <args>}</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}
{%- if message.content or not loop.first %}
{% endif %}<tool_call>{"name": "{{ call.function.name }}", "arguments": \
{% if call.function.arguments is string %}{{ call.function.arguments }}\
{% else %}{{ call.function.arguments | tojson }}{% endif %}}</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def _corpus(seed: int) -> list[str]:
    """Calculator problems, answers and tool calls: what the tokenizer's merges are learnt from."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(400):
        a, b = rng.randint(0, 999), rng.randint(1, 99)
        op = rng.choice(["+", "-", "*", "/"])
        lines += [
            f"What is {a} {op} {b}? Use the calculator tool and answer with the number.",
            f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{a} {op} {b}"}}}}</tool_call>',
            f"<tool_response>{a + b}</tool_response> The answer is {a + b}.",
            f'{{"type": "function", "function": {{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}}}',
            "You are a helpful assistant. Solve the problem step by step. Hello! Please continue.",
        ]
    return lines


def build_tiny_model(directory: str | Path, seed: int = 0) -> Path:
    """Write the tiny model (see the module docstring) into ``directory``; return its path.

    Deterministic for a ``seed``: the same tokenizer and the same initial weights.
    """
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(seed), trainer=trainer)
    bpe.add_tokens(MARKUP_TOKENS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    return folder
