"""Token-in-token-out from the command line: ``rollout run --tokenizer DIR`` and ``rollout check``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import chat_model as chat_models
from osmosis_ai.traingate.policy.scripted import find_expression
from osmosis_ai.traingate.tokenizer import ChatTokenizer
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, Ran, cli
from tests.support.openai_server import OpenAIServer, Reply

ROWS = len(CALCULATOR_DATASET.read_text().splitlines())


def rollout(*args: str) -> Ran:
    return cli("rollout", *args, env={"COLUMNS": "200"})


def check(*args: str) -> Ran:
    """``osmosis rollout check`` on the calculator example."""
    return rollout("check", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), *args)


def assert_trajectory(record: dict[str, Any]) -> None:
    """The trajectory of a two-turn record is the last prompt + completion, generated tokens masked in."""
    first, second = record["turns"]
    trajectory = record["trajectory"]
    assert trajectory["token_ids"] == second["prompt_token_ids"] + second["token_ids"]
    start = len(first["prompt_token_ids"])
    generated = set(range(start, start + len(first["token_ids"])))
    generated |= set(range(len(second["prompt_token_ids"]), len(trajectory["token_ids"])))
    assert [i for i, bit in enumerate(trajectory["loss_mask"]) if bit] == sorted(generated)


def _model(tmp_path: Path, template: str) -> Path:
    return chat_models.write_model(tmp_path / template.lower(), getattr(chat_models, template))


def test_calculator_end_to_end_with_the_models_template(tmp_path: Path) -> None:
    model = _model(tmp_path, "WELL_BEHAVED")
    out = tmp_path / "records.jsonl"
    common = ("-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted")
    result = rollout("run", *common, "--tokenizer", str(model), "--fail-on-drift", "-q", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "template drift: 0 in 0 rollout(s); append-only violations: 0" in result.stdout
    tokenizer = ChatTokenizer.from_directory(model)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == ROWS
    for record in records:
        assert record["drift_events"] == [] and record["append_only_violations"] == []
        first, second = record["turns"]
        assert {first["token_source"], second["token_source"]} == {f"template:{model}"}
        # The prompts are the template's render of the messages, and each extends the one before.
        messages = record["final_messages"]
        tools = served_tools()
        assert first["prompt_token_ids"] == tokenizer.encode(
            tokenizer.render(messages[:2], tools=tools, add_generation_prompt=True)
        )
        prefix = first["prompt_token_ids"] + first["token_ids"]
        assert second["prompt_token_ids"][: len(prefix)] == prefix
        assert tokenizer.decode(first["token_ids"]).startswith("<tool_call>\n")
        assert tokenizer.decode(second["token_ids"]).endswith("<|im_end|>")
        assert_trajectory(record)

    # Without --tokenizer nothing of this appears.
    plain = tmp_path / "plain.jsonl"
    result = rollout("run", *common, "-q", "-o", str(plain))
    assert result.returncode == 0 and "template drift" not in result.stdout
    assert "drift_events" not in json.loads(plain.read_text().splitlines()[0])


def served_tools() -> list[dict[str, Any]]:
    """The calculator's tools as the gateway holds them: read from the init response."""
    from examples.calculator.tools import TOOLS
    from osmosis_ai.rollout.core.schemas import InitResponse

    init = InitResponse(rollout_id="r", tools=TOOLS)
    return [tool.model_dump(mode="json", exclude_none=True) for tool in init.tools]


def test_fail_on_drift_fails_the_run_with_the_first_drift(tmp_path: Path) -> None:
    model = _model(tmp_path, "NEWLINE_SWALLOWED")
    common = (
        "-m",
        CALCULATOR,
        "-d",
        str(CALCULATOR_DATASET),
        "--model",
        "scripted",
        "--tokenizer",
        str(model),
    )
    result = rollout("run", *common, "-q")
    assert result.returncode == 0, result.stderr  # drift is reported, not fatal, unless asked
    assert (
        f"template drift: {ROWS} in {ROWS} rollout(s) (whitespace at a message boundary {ROWS})"
        in result.stdout
    )
    failed = rollout("run", *common, "-q", "--fail-on-drift")
    assert failed.returncode == 1
    error = failed.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: template drift in {ROWS} rollout(s) (--fail-on-drift); first: ")
    assert "whitespace at a message boundary" in error and "Traceback" not in failed.stderr


def test_check_says_safe_for_a_well_behaved_template(tmp_path: Path) -> None:
    result = check(
        "--tokenizer",
        str(_model(tmp_path, "WELL_BEHAVED")),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("SAFE for token-in-token-out training: 5 rollout(s), 10 turn(s)")


@pytest.mark.parametrize(
    ("template", "cause", "line"),
    [
        ("REASONING_STRIPPED", "reasoning removed from history", None),
        ("NEWLINE_SWALLOWED", "whitespace at a message boundary", "if message.tool_calls else"),
        ("LAST_TURN_DIFFERENT", "special token differs", "<|endoftext|>"),
    ],
)
def test_check_names_the_first_drift_its_cause_and_the_template_line(
    tmp_path: Path, template: str, cause: str, line: str | None
) -> None:
    result = check(
        "--rows",
        "2",
        "--tokenizer",
        str(_model(tmp_path, template)),
    )
    if template == "REASONING_STRIPPED":  # the scripted policy never reasons: nothing to strip
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "NOT SAFE for token-in-token-out training: 2 drift event(s) in 2 of 2 rollout(s)."
    assert lines[1].startswith("First drift: ") and cause in lines[1]
    assert any(text.startswith("  template line ") and line in text for text in lines)
    assert lines[-1].startswith("Fix: ")
    assert result.stderr.strip().startswith(f"Error: NOT SAFE for token-in-token-out training: {cause} at ")


def test_check_needs_a_model_directory(tmp_path: Path) -> None:
    model = _model(tmp_path, "WELL_BEHAVED")
    result = check("--tokenizer", str(model / "tokenizer.json"))
    assert result.returncode == 1
    assert (
        result.stderr.strip().startswith("Error: --tokenizer ") and "give a model directory" in result.stderr
    )
    missing = check("--tokenizer", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def _vllm_like(tokenizer: ChatTokenizer, arguments_separators: tuple[str, str]) -> Any:
    """A vLLM-like server: renders the prompt with ``tokenizer``'s template, solves the calculator and
    returns the ids it used (prompt ids on the response, generated ids on the choice)."""

    def handler(request: dict[str, Any]) -> Reply:
        messages, tools = request["messages"], request.get("tools")
        assert request.get("return_token_ids") is True  # the option vLLM documents, sent by the policy
        prompt = tokenizer.encode(tokenizer.render(messages, tools=tools, add_generation_prompt=True))
        if messages[-1]["role"] == "tool":
            sampled = f"The answer is #### {messages[-1]['content']}<|im_end|>"
            message: dict[str, Any] = {"role": "assistant", "content": sampled.removesuffix("<|im_end|>")}
        else:
            found = find_expression(messages[-1]["content"])
            assert found is not None
            name, a, b = found
            arguments = json.dumps({"a": a, "b": b}, separators=arguments_separators)
            sampled = f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps({"a": a, "b": b})}}}\n</tool_call><|im_end|>'
            call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        ids = tokenizer.encode(sampled)
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "served",
            "prompt_token_ids": prompt,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                    "token_ids": ids,
                    "logprobs": {
                        "content": [
                            {"token": f"token_id:{i}", "logprob": -0.5, "top_logprobs": []} for i in ids
                        ]
                    },
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(ids),
                "total_tokens": len(prompt) + len(ids),
            },
        }
        return Reply(body=body)

    return handler


@pytest.mark.parametrize(("separators", "safe"), [((", ", ": "), True), ((",", ":"), False)])
def test_backend_token_ids_are_used_verbatim_and_checked(
    tmp_path: Path, separators: tuple[str, str], safe: bool
) -> None:
    model = _model(tmp_path, "WELL_BEHAVED")
    tokenizer = ChatTokenizer.from_directory(model)
    with OpenAIServer() as server:
        server.handler = _vllm_like(tokenizer, separators)
        result = check(
            "--rows",
            "1",
            "--tokenizer",
            str(model),
            "--model",
            "served",
            "--base-url",
            server.url,
        )
    if safe:  # the parser kept the arguments as sampled: the template gives back the very same ids
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("SAFE")
    else:  # the parser re-serialised the arguments: the ids the model generated are not the ones rendered back
        assert result.returncode == 1
        assert (
            "tool call re-rendered (the generated ids vs the template's render of the parsed message)"
            in result.stdout
        )


def test_backend_ids_fill_the_trajectory_and_its_mask(tmp_path: Path) -> None:
    model = _model(tmp_path, "WELL_BEHAVED")
    tokenizer = ChatTokenizer.from_directory(model)
    out = tmp_path / "records.jsonl"
    with OpenAIServer() as server:
        server.handler = _vllm_like(tokenizer, (", ", ": "))
        result = rollout(
            "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--tokenizer", str(model),
            "--model", "served", "--base-url", server.url, "-q", "-o", str(out),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text().splitlines()[0])
    first, second = record["turns"]
    assert {first["token_source"], second["token_source"]} == {"backend"}
    assert first["logprobs"] == [-0.5] * len(first["token_ids"])
    assert record["drift_events"] == []
    assert_trajectory(record)
