"""OpenTelemetry spans of rollouts: one per rollout, children for its chat calls, tool calls and scoring.

Off unless configured. Spans are made when a tracer provider is set — by the application, or here,
once per process, when the standard variables ask for an exporter (``OTEL_TRACES_EXPORTER``, or an
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true``
wins): OTLP over HTTP/protobuf (``otlp``) or ``console``, batched, with the service name of
``OTEL_SERVICE_NAME`` (default ``osmosis-ai``) and ``OTEL_RESOURCE_ATTRIBUTES``. Without either,
OpenTelemetry is never imported and every hook is a dictionary lookup.

Names and attributes follow the GenAI semantic conventions: ``invoke_agent {agent}`` for a rollout,
``chat {model}`` (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
``gen_ai.response.finish_reasons``) for a chat call, ``execute_tool {name}`` for a tool call and
``score`` for reward scoring. The hooks: the rollout server's executor and chat client, the run
engine's pipeline, the model seam :func:`osmosis_ai.models.complete.complete`, and
``RolloutContext.record_tool_call``. A rollout whose init carries a W3C ``traceparent`` header
continues the trainer's trace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

logger = logging.getLogger(__name__)

INSTALL = "pip install 'osmosis-ai[otel]'"
_EXPORTERS = ("otlp", "console")

_configured = False
_cached: tuple[Any, Any] = (None, None)  # (the provider, our tracer from it)


def requested() -> bool:
    """Whether the ``OTEL_*`` variables ask for traces to be exported."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER")
    if exporter is not None:
        return exporter.strip().lower() not in ("", "none")
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def _configure() -> None:
    """Install a tracer provider with the exporters the variables name, unless one is set already."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        logger.warning("the OTEL_* variables ask for traces, but OpenTelemetry is not installed: %s", INSTALL)
        return
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return  # the application configured its own
    names = [
        n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()
    ]
    unknown = sorted(set(names) - set(_EXPORTERS))
    if unknown:
        logger.warning(
            "OTEL_TRACES_EXPORTER names %s; osmosis-ai exports to %s",
            ", ".join(unknown),
            " or ".join(_EXPORTERS),
        )
    named = "service.name" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(
        resource=Resource.create(
            {} if os.environ.get("OTEL_SERVICE_NAME") or named else {"service.name": "osmosis-ai"}
        )
    )
    if "otlp" in names:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        if protocol != "http/protobuf":
            logger.warning("OTLP protocol %r is not supported; sending traces over http/protobuf", protocol)
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning("the OTLP/HTTP trace exporter is not installed: %s", INSTALL)
        else:
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if "console" in names:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


def tracer() -> Any:
    """The tracer spans are made with, or ``None`` when tracing is off."""
    global _configured, _cached
    if not _configured:
        _configured = True
        if requested():
            _configure()
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if provider is _cached[0]:
        return _cached[1]
    on = not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    from osmosis_ai.consts import PACKAGE_VERSION

    _cached = (provider, provider.get_tracer("osmosis_ai", PACKAGE_VERSION) if on else None)
    return _cached[1]


# -- hooks ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def rollout(agent: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """The span of one rollout, current while the block runs (so its calls' spans are its children);
    yields ``None`` when tracing is off."""
    active = tracer()
    if active is None:
        yield None
        return
    with active.start_as_current_span(
        f"invoke_agent {agent}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, **attributes},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


@contextlib.contextmanager
def child(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """A span under the current one, current while the block runs (``None`` when tracing is off)."""
    active = tracer()
    if active is None:
        yield None
        return
    with active.start_as_current_span(name, attributes=attributes) as span:
        yield span


def ended(span: Any, status: str, error: str | None = None, **attributes: Any) -> None:
    """Record how a rollout ended on its span: ``osmosis.outcome``, and an error status with ``error``."""
    if span is None:
        return
    span.set_attribute("osmosis.outcome", status)
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(f"osmosis.{key}", value)
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", status)
        span.set_status(Status(StatusCode.ERROR, error))


def chat_started(model: str, provider: str) -> Any:
    """The span of one chat call (a child of the current span), or ``None`` when tracing is off."""
    active = tracer()
    if active is None:
        return None
    from opentelemetry.trace import SpanKind

    return active.start_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": provider,
        },
    )


def chat_finished(
    span: Any, usage: Mapping[str, Any] | None, finish_reason: str | None, response_model: Any = None
) -> None:
    """End a chat span with the reply's token counts and finish reason."""
    if usage:
        for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
            value = usage.get(key)
            if type(value) is int:
                span.set_attribute(f"gen_ai.usage.{name}", value)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if isinstance(response_model, str) and response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    span.end()


def failed(span: Any, exc: BaseException) -> None:
    """End ``span`` (if any) as failed by ``exc``."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    kind = getattr(exc, "kind", None)
    span.set_attribute("error.type", kind if isinstance(kind, str) and kind else type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, str(exc) or type(exc).__name__))
    span.end()


def tool_call(name: str | None, latency_ms: float) -> None:
    """A span for a tool call that has just ended after ``latency_ms`` (it is reported afterwards)."""
    active = tracer()
    if active is None:
        return
    end = time.time_ns()
    attributes = {"gen_ai.operation.name": "execute_tool"}
    if name:
        attributes["gen_ai.tool.name"] = name
    span = active.start_span(
        f"execute_tool {name}" if name else "execute_tool",
        start_time=end - int(max(latency_ms, 0.0) * 1e6),
        attributes=attributes,
    )
    span.end(end_time=end)


def attach_remote(traceparent: bytes | None, tracestate: bytes | None) -> object | None:
    """Make the trace an incoming request names the current one; a token for :func:`detach`, or ``None``."""
    if traceparent is None or tracer() is None:
        return None
    from opentelemetry import context, propagate

    carrier = {"traceparent": traceparent.decode("latin-1")}
    if tracestate is not None:
        carrier["tracestate"] = tracestate.decode("latin-1")
    return context.attach(propagate.extract(carrier))


def detach(token: object | None) -> None:
    if token is not None:
        from opentelemetry import context

        context.detach(token)  # type: ignore[arg-type]


def inject(headers: dict[str, str]) -> None:
    """Add the current trace's ``traceparent`` to outgoing ``headers`` (nothing when tracing is off)."""
    if tracer() is None:
        return
    from opentelemetry import propagate

    propagate.inject(headers)
