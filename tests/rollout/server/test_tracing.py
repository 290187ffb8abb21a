"""OpenTelemetry spans: the SDK's in-memory exporter behind a real tracer provider for the server under
uvicorn and for `osmosis test`/`eval`, and the OTLP/HTTP exporter the OTEL_* variables configure,
sending to a receiver stand-in on loopback from a real `osmosis test` process."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once

from osmosis_ai.observe import tracing
from osmosis_ai.rollout.agent_workflow import AgentWorkflow
from osmosis_ai.rollout.backend.local import LocalBackend
from osmosis_ai.rollout.context import AgentWorkflowContext, GraderContext
from osmosis_ai.rollout.grader import Grader
from osmosis_ai.rollout.server import create_rollout_server
from osmosis_ai.rollout.server.config import ServerConfig
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, REPO, cli, subprocess_env
from tests.support.server import RunningServer, ScriptedAgent, chat_then_fail, fast_config, init_body
from tests.support.trainer import TrainerStandIn
from tests.support.waiting import wait_until

REWARD = "examples.calculator.reward:calculator_reward"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


def _reset_global_provider() -> None:
    # The API sets its global provider once per process and has no public way to unset it; its own
    # test helpers reset these two globals the same way. Tracing is on only inside these tests.
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        _reset_global_provider()
        provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


def test_tracing_is_off_without_a_provider_or_the_variables() -> None:
    assert not tracing.requested()
    assert tracing.tracer() is None


def test_a_server_rollout_continues_the_trainers_trace(
    spans: InMemorySpanExporter, serve, http: httpx.Client, trainer: TrainerStandIn
) -> None:
    server = serve(ScriptedAgent(chat_then_fail), config=fast_config())
    headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    assert http.post(f"{server.url}/v1/rollout/init", json=init_body("t-1", trainer.url), headers=headers)
    trainer.wait_completed("t-1")
    (rollout,) = wait_until(lambda: named(spans, "invoke_agent"), what="the rollout span")
    assert rollout.name == "invoke_agent scripted"
    assert rollout.context is not None and rollout.parent is not None
    assert format(rollout.context.trace_id, "032x") == TRACE_ID
    assert format(rollout.parent.span_id, "016x") == PARENT_ID
    assert rollout.attributes is not None and rollout.attributes["osmosis.rollout.id"] == "t-1"
    assert rollout.status.status_code is StatusCode.ERROR  # the agent raised after its chat call
    (chat,) = named(spans, "chat ")
    assert chat.parent is not None and chat.parent.span_id == rollout.context.span_id
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "default"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10  # the stand-in: 10 per request message
    assert chat.attributes["gen_ai.usage.output_tokens"] == 8
    (tool,) = named(spans, "execute_tool")
    assert tool.parent is not None and tool.parent.span_id == rollout.context.span_id
    assert tool.end_time is not None and tool.start_time is not None
    assert tool.end_time - tool.start_time == 2_000_000  # the 2 ms the agent reported


class Answers4(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> list[dict[str, Any]]:
        return [*ctx.prompt, {"role": "assistant", "content": "4"}]


class Exactly(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


def test_a_0_3_rollout_continues_the_controllers_trace(
    spans: InMemorySpanExporter, http: httpx.Client
) -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=Answers4, grader=Exactly), configure_logging=False,
                                config=ServerConfig(state=":memory:"))  # fmt: skip
    server = RunningServer(app).start()
    try:
        submit = {"rollout_id": "t03-1", "initial_messages": [{"role": "user", "content": "2+2?"}],
                  "chat_completions_url": "http://127.0.0.1:9/v1", "label": "4"}  # fmt: skip
        headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        admitted = http.post(f"{server.url}/rollout", json=submit, headers=headers)
        assert admitted.status_code == 202, admitted.text
        (rollout,) = wait_until(lambda: named(spans, "invoke_agent"), what="the rollout span")
    finally:
        server.stop()
    assert rollout.name == "invoke_agent Answers4"
    assert rollout.context is not None and rollout.parent is not None
    assert format(rollout.context.trace_id, "032x") == TRACE_ID
    assert format(rollout.parent.span_id, "016x") == PARENT_ID
    assert rollout.attributes is not None
    assert (rollout.attributes["osmosis.rollout.id"], rollout.attributes["osmosis.outcome"]) == (
        "t03-1",
        "success",
    )
    assert rollout.attributes["osmosis.reward"] == 1.0


def test_eval_traces_each_item_with_its_chat_tool_and_score_spans(spans: InMemorySpanExporter) -> None:
    ran = cli(
        "eval", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--eval-fn", REWARD, "--model", "scripted"
    )
    assert ran.returncode == 0, ran.stderr
    rollouts = named(spans, "invoke_agent calculator")
    rows = len(CALCULATOR_DATASET.read_text().splitlines())
    assert len(rollouts) == rows
    assert {span.attributes["osmosis.outcome"] for span in rollouts if span.attributes} == {"completed"}
    ids = {span.context.span_id for span in rollouts if span.context}
    for kind in ("chat scripted", "execute_tool", "score"):
        children = named(spans, kind)
        assert children, kind
        assert all(span.parent is not None and span.parent.span_id in ids for span in children), kind
    chat = named(spans, "chat scripted")[0]
    assert chat.attributes is not None and chat.attributes["gen_ai.provider.name"] == "scripted"
    assert named(spans, "execute_tool add") or named(spans, "execute_tool multiply")
    score = named(spans, "score")[0]
    assert score.attributes is not None and score.attributes["osmosis.outcome"] == "completed"


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: POST /v1/traces with a protobuf ExportTraceServiceRequest."""

    names: list[str]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        if self.path == "/v1/traces":
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.server.names.extend(span.name for span in scope.spans)  # type: ignore[attr-defined]
        self.send_response(200 if self.path == "/v1/traces" else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.names = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.names  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def test_the_otel_variables_send_a_runs_spans_over_otlp_http(receiver: tuple[str, list[str]]) -> None:
    url, names = receiver
    env = subprocess_env(OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_SERVICE_NAME="osmosis-test")
    argv = [sys.executable, "-m", "osmosis_ai", "test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET),
            "--model", "scripted", "--limit", "2"]  # fmt: skip
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the batch is flushed when the process exits: everything is in by now
    assert names.count("invoke_agent calculator") == 2
    assert "chat scripted" in names
