"""0.2 code that runs unchanged: the names, keywords and behaviours 0.2.17's own suite relies on."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest

from osmosis_ai.rollout.core.schemas import RolloutRequest


def _request(rollout_id: str = "compat-1") -> RolloutRequest:
    return RolloutRequest(
        rollout_id=rollout_id,
        server_url="http://127.0.0.1:1",
        messages=[{"role": "user", "content": "hi"}],
        completion_params={},
    )


class _NoModel:
    def get_metrics(self) -> Any:
        from osmosis_ai.rollout.core.schemas import RolloutMetrics

        return RolloutMetrics()


def test_log_event_outside_an_event_loop_is_in_the_file_when_it_returns(tmp_path: Path) -> None:
    from osmosis_ai.rollout.core.base import RolloutContext

    ctx = RolloutContext(request=_request(), tools=[], llm=_NoModel(), _debug_dir=str(tmp_path))  # type: ignore[arg-type]
    for n in range(50):
        ctx.log_event("step", n=n)
        lines = (tmp_path / "compat-1.jsonl").read_text().splitlines()
        assert len(lines) == n + 1 and json.loads(lines[-1]) == {
            "event": "step",
            "rollout_id": "compat-1",
            "n": n,
        }


async def test_log_event_on_an_event_loop_can_be_awaited(tmp_path: Path) -> None:
    from osmosis_ai.rollout.core.base import RolloutContext

    ctx = RolloutContext(request=_request("compat-2"), tools=[], llm=_NoModel(), _debug_dir=str(tmp_path))  # type: ignore[arg-type]
    assert await ctx.log_event("step", n=1) is True
    assert (tmp_path / "compat-2.jsonl").read_text().count("\n") == 1


async def test_patch_httpx_routes_an_httpx_post_to_the_mock_trainer(monkeypatch: pytest.MonkeyPatch) -> None:
    from osmosis_ai.rollout.testing import (
        RolloutCompletionTracker,
        create_mock_trainer_app,
        patch_httpx_for_mock_trainer,
    )

    tracker = RolloutCompletionTracker()
    patch_httpx_for_mock_trainer(create_mock_trainer_app(tracker=tracker), monkeypatch)
    body = {"rollout_id": "r1", "status": "COMPLETED", "final_messages": [], "finish_reason": "stop"}
    async with httpx.AsyncClient() as client:
        response = await client.post("http://trainer.invalid:9/v1/rollout/completed", json=body)
        chat = await client.post(
            "http://trainer.invalid:9/v1/chat/completions",
            json={"rollout_id": "r1", "messages": [{"role": "user", "content": "add 5 and 3"}]},
        )
    assert response.status_code == 200 and tracker.responses[0]["rollout_id"] == "r1"
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["tool_calls"]


def test_the_local_auth_server_of_0_2_serves_one_callback() -> None:
    from osmosis_ai.auth.config import LOCAL_SERVER_PORT_END, LOCAL_SERVER_PORT_START
    from osmosis_ai.auth.local_server import AuthCallbackHandler, LocalAuthServer, find_available_port

    assert (LOCAL_SERVER_PORT_START, LOCAL_SERVER_PORT_END) == (8976, 8985)
    assert AuthCallbackHandler.__name__
    port = find_available_port()
    if port is None:
        pytest.skip("every port of the callback range is taken on this machine")
    server = LocalAuthServer(port, "expected-state")
    pages: list[tuple[int, str]] = []

    def browser() -> None:
        url = f"http://127.0.0.1:{port}/callback?token=tok&state=expected-state&revoked_count=2"
        try:
            with urllib.request.urlopen(url, timeout=30) as page:
                pages.append((page.status, page.read().decode()))
        except urllib.error.HTTPError as exc:
            pages.append((exc.code, exc.read().decode()))

    thread = threading.Thread(target=browser)
    try:
        # The browser's request is accepted once the server serves, whichever comes first.
        thread.start()
        assert server.wait_for_callback(timeout=30) == ("tok", None)
        assert server.received_token == "tok" and server.revoked_count == 2
        server.set_verification_result(True)
        thread.join(30)
    finally:
        server.shutdown()
    assert pages and pages[0][0] == 200 and "logged in" in pages[0][1]


def test_credentials_store_round_trips_through_0_2s_dict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import datetime, timedelta, timezone

    from osmosis_ai.auth.credentials import CredentialsStore, OrganizationInfo, UserInfo, WorkspaceCredentials

    monkeypatch.setenv("OSMOSIS_CONFIG_DIR", str(tmp_path))
    now = datetime.now(timezone.utc)
    credentials = WorkspaceCredentials(
        access_token="t", token_type="Bearer", expires_at=now + timedelta(days=1),
        user=UserInfo(id="u", email="a@b.c", name="A"), organization=OrganizationInfo(id="o", name="Org", role="admin"),
        created_at=now,
    )  # fmt: skip
    store = CredentialsStore()
    store.add(credentials)
    data = store.to_dict()
    assert data["version"] == 1 and data["active_workspace"] == credentials.workspace_key
    again = CredentialsStore.from_dict(json.loads(json.dumps(data)))
    active = again.get_active_credentials()
    assert active is not None and active.user.email == "a@b.c" and active.organization.name == "Org"


def test_names_and_keywords_of_0_2() -> None:
    from osmosis_ai.rollout.eval.common import REQUIRED_COLUMNS_SET, TOOL_NAME_PATTERN, SystemicProviderError

    from osmosis_ai.runs.executors.interactive import InteractiveLLMClient, InteractiveStep

    assert frozenset({"ground_truth", "user_prompt", "system_prompt"}) == REQUIRED_COLUMNS_SET
    assert TOOL_NAME_PATTERN.match("get_weather") and not TOOL_NAME_PATTERN.match("bad name")
    error = SystemicProviderError()
    assert error.duration_ms is None and error.tokens is None
    step = InteractiveStep(turn=1, step_type="final")
    assert step.message is None and step.tool_calls is None and step.finish_reason is None
    client = InteractiveLLMClient(wrapped_client=object(), on_step=lambda step: True)
    assert client.wrapped is not None


def test_the_schema_validators_are_callable_by_their_0_2_names() -> None:
    from osmosis_ai.rollout.core.schemas import CompletionsRequest, ToolResponse

    assert RolloutRequest.validate_rollout_id_format("r-1") == "r-1"
    with pytest.raises(ValueError, match="whitespace"):
        CompletionsRequest.validate_rollout_id_format("  ")
    with pytest.raises(ValueError, match="http or https"):
        RolloutRequest.validate_server_url_format("ftp://host")
    request = _request()
    assert request.validate_metadata_size() is request
    assert ToolResponse.validate_media_fields({"image": [1]}) == {"image": [1]}
    with pytest.raises(ValueError, match="image must be a list"):
        ToolResponse.validate_media_fields({"image": "one.png"})


def test_errors_of_0_2_take_any_exceptions_arguments() -> None:
    from osmosis_ai.rollout.eval.common.errors import (
        DatasetParseError,
        DatasetValidationError,
        ProviderError,
        SystemicProviderError,
    )

    assert ProviderError("a", "b").args == ("a", "b")
    assert SystemicProviderError("a", 2).args == ("a", 2)
    assert DatasetParseError().args == () and str(DatasetValidationError("bad row")) == "bad row"
    assert ProviderError("a", kind="auth").kind == "auth"


async def test_interactive_client_is_an_async_context_manager_over_the_wrapped_client() -> None:
    from osmosis_ai.rollout.eval.common.llm_client import ExternalLLMClient
    from osmosis_ai.rollout.eval.test_mode.interactive import InteractiveLLMClient

    wrapped = ExternalLLMClient("openai/gpt-5-mini", api_key="k")
    async with InteractiveLLMClient(wrapped, on_step=lambda step: True) as client:
        assert isinstance(client, InteractiveLLMClient)
        client.set_tools([{"type": "function", "function": {"name": "add", "parameters": {}}}])
        assert wrapped._row().tools
    assert wrapped._row().tools is None  # leaving closed the wrapped client, which forgets its tools


def test_the_0_2_command_classes_configure_and_run_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from osmosis_ai.cli_commands import PreviewCommand
    from osmosis_ai.rollout.cli import EvalCommand, ServeCommand, TestCommand, ValidateCommand
    from osmosis_ai.rollout.eval.evaluation.cli import EvalCommand as EvalAtItsPath
    from osmosis_ai.rollout.eval.test_mode.cli import TestCommand as TestAtItsPath

    assert EvalAtItsPath is EvalCommand and TestAtItsPath is TestCommand
    parser = argparse.ArgumentParser(prog="osmosis preview")
    PreviewCommand().configure_parser(parser)
    args = parser.parse_args(["-p", str(Path(__file__).parents[1] / "examples" / "sample_data.jsonl")])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.startswith("Loaded 2 JSONL record(s) from ")
    for command in (ServeCommand(), TestCommand(), ValidateCommand()):  # a plain parser of the caller's
        plain = argparse.ArgumentParser()
        command.configure_parser(plain)
        assert (
            plain.parse_args(
                ["-m", "agent:loop", "-d", "x.jsonl"]
                if not isinstance(command, (ServeCommand, ValidateCommand))
                else ["-m", "agent:loop"]
            ).module
            == "agent:loop"
        )


def test_cli_services_keeps_the_config_and_record_helpers() -> None:
    from osmosis_ai.cli_services import (
        CLIError,
        discover_rubric_config_path,
        load_jsonl_records,
        load_rubric_configs,
        load_rubric_suite,
        render_json_records,
        render_yaml_items,
    )

    examples = Path(__file__).parents[1] / "examples"
    suite = load_rubric_suite(examples / "rubric_configs.yaml")
    assert suite.available_ids() == ["policy_grounding", "support_followup"]
    items = load_rubric_configs(examples / "rubric_configs.yaml")
    assert render_yaml_items(items, "Rubric config").startswith(
        "Rubric config #1 (rubrics[0])\nid: support_followup"
    )
    assert (
        discover_rubric_config_path(None, examples / "sample_data.jsonl")
        == (examples / "rubric_configs.yaml").resolve()
    )
    records = load_jsonl_records(examples / "sample_data.jsonl")
    assert render_json_records(records).splitlines()[0] == "JSONL record #1"
    with pytest.raises(CLIError):
        discover_rubric_config_path(str(examples / "missing.yaml"), examples / "sample_data.jsonl")


def test_cli_services_dataset_loader_reads_0_2_records(tmp_path: Path) -> None:
    from osmosis_ai.cli_services import CLIError, DatasetLoader, DatasetRecord

    data = tmp_path / "records.jsonl"
    lines = [
        {"id": " r-1 ", "conversation_id": " c-1 ", "rubric_id": " grade ", "solution_str": "an  answer\n"},
        {"id": 7, "solution_str": "x" * 200, "metadata": {"m": 1}, "extra_info": {"original_input": "q"}},
    ]
    data.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    first, second = DatasetLoader().load(data)
    assert isinstance(first, DatasetRecord)
    assert (first.rubric_id, first.conversation_id, first.record_id) == ("grade", "c-1", "r-1")
    assert first.assistant_preview() == "an answer" and first.merged_extra_info() is None
    assert first.record_identifier(first.conversation_label(0)) == "r-1"
    assert second.conversation_label(1) == "record[1]" and second.record_identifier("record[1]") == "7"
    preview = second.assistant_preview(max_length=10)
    assert preview == "xxxxxxx..."
    assert second.original_input == "q"
    assert second.merged_extra_info() == {"original_input": "q", "dataset_metadata": {"m": 1}}
    data.write_text(json.dumps({"solution_str": " "}) + "\n")
    with pytest.raises(CLIError, match=r"records\.jsonl:1: 'solution_str'"):
        DatasetLoader().load(data)


def test_cli_services_rubric_config_parser_with_its_own_and_a_callers_schema(tmp_path: Path) -> None:
    from osmosis_ai.cli_services import CLIError, RubricConfigParser
    from osmosis_ai.cli_services.config import (
        BaseRubricConfigSchema,
        RubricConfigDocumentResult,
        RubricConfigDocumentSchema,
        Version1RubricConfigSchema,
    )

    config = Path(__file__).parents[1] / "examples" / "rubric_configs.yaml"
    suite, items = RubricConfigParser().parse(config)
    assert suite.available_ids() == ["policy_grounding", "support_followup"] and len(items) == 2
    assert Version1RubricConfigSchema.version == 1 and BaseRubricConfigSchema.version is None

    with pytest.raises(NotImplementedError):
        RubricConfigDocumentSchema().parse_document({}, path=config, doc_index=0, strict=True)
    result = BaseRubricConfigSchema().parse_document(
        {"rubric": "r", "id": "a", "model_info": {}}, path=config, doc_index=0, strict=True
    )
    assert isinstance(result, RubricConfigDocumentResult) and list(result.configs) == ["a"]

    class Version2(BaseRubricConfigSchema):
        version = 2

    text = config.read_text().replace("version: 1", "version: 2")
    (tmp_path / "v2.yaml").write_text(text)
    with pytest.raises(CLIError, match="version 2"):
        RubricConfigParser().parse(tmp_path / "v2.yaml")
    parser = RubricConfigParser(schemas={None: BaseRubricConfigSchema(), 2: Version2()})
    suite, items = parser.parse(tmp_path / "v2.yaml")
    assert suite.version == 2 and suite.available_ids() == ["policy_grounding", "support_followup"]
    with pytest.raises(ValueError, match="None"):
        RubricConfigParser(schemas={1: Version1RubricConfigSchema()})
