"""A finished run's record as an ATIF trajectory, and an ATIF trajectory read back as a record.

ATIF (the Agent Trajectory Interchange Format, :data:`ATIF_VERSION`) is the document osmosis-ai 0.3
leaves for each finished rollout; :func:`trajectory_of` writes one from the record every command
keeps for an item (``rollout run``'s, or ``test``/``eval``'s with the item's ``final_messages``):

* each chat message is a step: ``system``/``developer`` a ``system`` step, ``user`` a ``user`` step,
  ``assistant`` an ``agent`` step with its tool calls (arguments as an object) and its
  ``reasoning_content``; a ``tool`` message is an observation result of the agent step that called
  it (``source_call_id``), or of a ``system`` step of its own when no step called it;
* a ``rollout run`` turn (what the TrainGate served) gives the agent step it produced its
  ``metrics``: token counts, ``prompt_token_ids``, ``completion_token_ids`` and ``logprobs``, with
  the turn's finish reason, latency, sampling and token source in the metrics' ``extra``;
* ``final_metrics`` has the token totals and the step count; the outcome, reward, scores, errors,
  the dataset row and the protocol checks are under ``extra["osmosis"]``, where upstream keeps its
  own (``rollout_id``, ``reward``).

The schema the documents are checked against is ``atif-v1.7.schema.json`` beside this module
(:func:`schema`), with the two rules it cannot say (step ids count from 1 in order; an observation
names only its own step's tool calls), which :func:`trajectory_of` keeps by construction.
:func:`record_of` reads a document back as a ``rollout run`` record, which is how ``osmosis
report`` shows a directory of them (:mod:`osmosis_ai.report.readers`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from osmosis_ai.consts import PACKAGE_VERSION, package_name

ATIF_VERSION = "ATIF-v1.7"
SCHEMA_FILE = "atif-v1.7.schema.json"
PRIMARY = "primary"  # the model tag of every item but an eval baseline's (runs.journal.PRIMARY)

_SOURCES = {"system": "system", "developer": "system", "user": "user", "assistant": "agent"}
# The record keys kept under extra["osmosis"] as they are, when present.
_KEPT = ("rollout_id", "row_index", "sample_index", "model_tag", "status", "outcome", "reward", "agent_reward",
         "reward_error", "finish_reason", "scores", "eval_errors", "latency_ms", "duration_ms", "input_record")  # fmt: skip
# The protocol checks of a rollout run, kept when any was recorded.
_CHECKS = ("append_only_violations", "drift_events", "rejected_calls", "gateway_errors")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

Document = dict[str, Any]


def schema() -> dict[str, Any]:
    """The JSON Schema of the ATIF documents written here (draft 2020-12)."""
    from importlib.resources import files

    text = files("osmosis_ai.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def trajectory_id(record: Mapping[str, Any]) -> str:
    """The rollout's id, else ``row<R>-sample<S>`` (prefixed by a baseline's model tag)."""
    if record.get("rollout_id"):
        return str(record["rollout_id"])
    name = f"row{record.get('row_index', 0)}-sample{record.get('sample_index', 0)}"
    tag = record.get("model_tag")
    return name if tag in (None, PRIMARY) else f"{tag}-{name}"


def file_name(record: Mapping[str, Any]) -> str:
    """The file a trajectory is written to: its id, safe as one path part, and ``.json``."""
    return _UNSAFE.sub("_", trajectory_id(record)).lstrip(".") + ".json"


def trajectory_of(record: Mapping[str, Any], *, command: str, model: str | None = None) -> Document:
    """The ATIF document of one finished item's ``record`` (see the module docstring); ``command``
    names what ran it, ``model`` the policy when the record does not."""
    turns = [t for t in _list(record.get("turns")) if isinstance(t, Mapping)]
    by_position = {t.get("num_request_messages"): t for t in turns}
    steps: list[Document] = []
    used: set[int] = set()
    for position, message in enumerate(_messages(record)):
        role = str(message.get("role", ""))
        if role in ("tool", "function"):
            _observe(steps, message)
            continue
        step = _step(len(steps) + 1, message)
        turn = by_position.get(position)
        if step["source"] == "agent" and turn is not None:
            step["metrics"] = _metrics(turn)
            step["llm_call_count"] = 1
            used.add(id(turn))
        steps.append(step)
    if not steps:
        steps.append({"step_id": 1, "source": "system", "message": "", "extra": {"no_messages": True}})
    model_name = _text(record.get("model")) or model
    osmosis = {key: _finite(record[key]) for key in _KEPT if record.get(key) not in (None, {}, [])}
    osmosis["command"] = command
    error = record.get("error") or record.get("error_message")
    if error:
        osmosis["error"] = str(error)
    for key in _CHECKS:
        if _list(record.get(key)):
            osmosis[key] = _finite(record[key])
    unmatched = [_metrics(t) for t in turns if id(t) not in used]
    if unmatched:
        osmosis["unmatched_turns"] = unmatched
    agent: Document = {"name": package_name, "version": PACKAGE_VERSION}
    if model_name:
        agent["model_name"] = model_name
    tools = [str(name) for name in _list(record.get("tools")) if name]
    if tools:
        agent["extra"] = {"tool_names": tools}
    identity = trajectory_id(record)
    return {
        "schema_version": ATIF_VERSION,
        "session_id": identity,
        "trajectory_id": identity,
        "agent": agent,
        "steps": steps,
        "final_metrics": _final_metrics(record, turns, len(steps)),
        "extra": {"osmosis": osmosis},
    }


def dumps(document: Document) -> str:
    """The document as the text of its file (strict JSON, indented, token arrays on one line each)."""
    return _compact_numbers(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


def is_trajectory(document: Any) -> bool:
    """Whether a parsed JSON value is an ATIF document (its ``schema_version`` says so)."""
    return (
        isinstance(document, dict)
        and str(document.get("schema_version", "")).startswith("ATIF-")
        and isinstance(document.get("steps"), list)
    )


def record_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """An ATIF document read back as a ``rollout run`` record: the messages its steps say, each
    agent step's metrics as the turn that produced it, and what ``extra["osmosis"]`` kept. A document
    another tool wrote has no ``osmosis`` part: its outcome is ``unknown``."""
    extra = _mapping(document.get("extra"))
    osmosis = dict(_mapping(extra.get("osmosis")))
    messages: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for step in _list(document.get("steps")):
        if not isinstance(step, Mapping):
            continue
        source = step.get("source")
        if not _mapping(step.get("extra")).get("no_messages"):
            metrics = _mapping(step.get("metrics"))
            if source == "agent" and metrics:
                turns.append(_turn(metrics, index=len(turns), position=len(messages)))
            messages.append(_message(step))
        for result in _list(_mapping(step.get("observation")).get("results")):
            if isinstance(result, Mapping):
                call = result.get("source_call_id") or _mapping(result.get("extra")).get("tool_call_id")
                messages.append(
                    {"role": "tool", "tool_call_id": call, "content": _flat(result.get("content"))}
                )
    final = _mapping(document.get("final_metrics"))
    identity = document.get("trajectory_id") or document.get("session_id")
    record: dict[str, Any] = {
        **osmosis,
        "rollout_id": osmosis.get("rollout_id") or identity,
        "outcome": osmosis.get("outcome") or "unknown",
        "error_message": osmosis.get("error"),
        "final_messages": messages,
        "turns": turns,
        "metrics": {
            "prompt_tokens": final.get("total_prompt_tokens"),
            "completion_tokens": final.get("total_completion_tokens"),
        },
        "model": _mapping(document.get("agent")).get("model_name"),
    }
    if record.get("latency_ms") is None:
        record["latency_ms"] = osmosis.get("duration_ms")
    return record


# -- writing ---------------------------------------------------------------------------------------


def _messages(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The item's conversation; with none recorded, the dataset row's prompts it started from."""
    messages = [
        m for m in _list(record.get("final_messages", record.get("messages"))) if isinstance(m, Mapping)
    ]
    if messages:
        return messages
    row = _mapping(record.get("input_record"))
    return [{"role": role, "content": row[key]}
            for role, key in (("system", "system_prompt"), ("user", "user_prompt")) if isinstance(row.get(key), str)]  # fmt: skip


def _step(step_id: int, message: Mapping[str, Any]) -> Document:
    role = str(message.get("role", ""))
    source = _SOURCES.get(role, "user")
    step: Document = {"step_id": step_id, "source": source, "message": _content(message.get("content"))}
    extra: Document = {} if role in _SOURCES else {"original_role": role}
    if role == "developer":
        extra["original_role"] = role
    if not isinstance(message.get("content"), (str, type(None))):
        extra["content"] = _finite(message["content"])
    reasoning = message.get("reasoning_content")
    calls = _tool_calls(message.get("tool_calls"))
    if source == "agent":
        if reasoning is not None:
            step["reasoning_content"] = (
                reasoning if isinstance(reasoning, str) else json.dumps(reasoning, default=str)
            )
        if calls:
            step["tool_calls"] = calls
    elif reasoning is not None or calls:  # ATIF allows these on agent steps only
        extra.update({"reasoning_content": reasoning} if reasoning is not None else {})
        extra.update({"tool_calls": calls} if calls else {})
    if extra:
        step["extra"] = extra
    return step


def _tool_calls(raw: Any) -> list[Document]:
    calls = []
    for number, call in enumerate(_list(raw)):
        if not isinstance(call, Mapping):
            continue
        function = _mapping(call.get("function"))
        entry: Document = {
            "tool_call_id": str(call.get("id") or f"call_{number}"),
            "function_name": str(function.get("name") or ""),
            "arguments": {},
        }
        arguments = function.get("arguments")
        parsed = _parse(arguments) if isinstance(arguments, str) else arguments
        if isinstance(parsed, Mapping):
            entry["arguments"] = _finite(dict(parsed))
        elif arguments not in (None, ""):  # not an object: kept as the model wrote it
            entry["extra"] = {"arguments": arguments if isinstance(arguments, str) else _finite(arguments)}
        calls.append(entry)
    return calls


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _observe(steps: list[Document], message: Mapping[str, Any]) -> None:
    """A tool message as a result of the agent step that called it (or of a step of its own)."""
    call = message.get("tool_call_id")
    owner = steps[-1] if steps and steps[-1]["source"] == "agent" else None
    known = {c["tool_call_id"] for c in (owner or {}).get("tool_calls", ())}
    result: Document = {"content": _content(message.get("content"))}
    if call is not None and str(call) in known:
        result["source_call_id"] = str(call)
    elif call is not None:
        result["extra"] = {"tool_call_id": str(call)}
    if owner is None:
        owner = {"step_id": len(steps) + 1, "source": "system", "message": "",
                 "extra": {"original_role": str(message.get("role"))}}  # fmt: skip
        steps.append(owner)
    owner.setdefault("observation", {"results": []})["results"].append(result)


def _metrics(turn: Mapping[str, Any]) -> Document:
    usage = _mapping(turn.get("usage"))
    prompt_ids, completion_ids = _ints(turn.get("prompt_token_ids")), _ints(turn.get("token_ids"))
    metrics: Document = {
        "prompt_tokens": _count(usage.get("prompt_tokens"), prompt_ids),
        "completion_tokens": _count(usage.get("completion_tokens"), completion_ids),
    }
    if prompt_ids is not None:
        metrics["prompt_token_ids"] = prompt_ids
    if completion_ids is not None:
        metrics["completion_token_ids"] = completion_ids
    logprobs = turn.get("logprobs")
    if isinstance(logprobs, list) and all(_number(v) is not None for v in logprobs):
        metrics["logprobs"] = [float(v) for v in logprobs]
    extra = {key: _finite(turn[key]) for key in ("index", "finish_reason", "latency_ms", "token_source", "sampling")
             if turn.get(key) is not None}  # fmt: skip
    if extra:
        metrics["extra"] = extra
    return {key: value for key, value in metrics.items() if value is not None}


def _final_metrics(record: Mapping[str, Any], turns: list[Mapping[str, Any]], steps: int) -> Document:
    usage = _mapping(record.get("token_usage"))
    prompt: int | None
    completion: int | None
    if turns:
        prompt = sum(_count(_mapping(t.get("usage")).get("prompt_tokens"), None) or 0 for t in turns)
        completion = sum(_count(_mapping(t.get("usage")).get("completion_tokens"), None) or 0 for t in turns)
    else:
        prompt, completion = (
            _count(usage.get("prompt_tokens"), None),
            _count(usage.get("completion_tokens"), None),
        )
    final: Document = {
        "total_prompt_tokens": prompt,
        "total_completion_tokens": completion,
        "total_steps": steps,
    }
    return {key: value for key, value in final.items() if value is not None}


def _content(content: Any) -> str:
    """A message's content as ATIF's text: a list of text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if (
        isinstance(content, list)
        and content
        and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content)
    ):
        return "\n".join(str(p.get("text", "")) for p in content)
    return json.dumps(_finite(content), ensure_ascii=False, default=str)


_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
# An indented array of numbers only: its newlines show it is JSON's layout, never inside a string.
_NUMBER_ARRAY = re.compile(rf"\[\n\s*{_NUMBER}(?:,\n\s*{_NUMBER})*\n\s*\]")


def _compact_numbers(text: str) -> str:
    """Arrays of numbers (token ids, logprobs) on one line each, not one line per number."""
    return _NUMBER_ARRAY.sub(lambda m: "[" + ", ".join(re.findall(_NUMBER, m.group(0))) + "]", text)


# -- reading ---------------------------------------------------------------------------------------


def _message(step: Mapping[str, Any]) -> dict[str, Any]:
    extra = _mapping(step.get("extra"))
    role = {"system": "system", "user": "user", "agent": "assistant"}.get(str(step.get("source")), "user")
    message: dict[str, Any] = {
        "role": str(extra.get("original_role") or role),
        "content": _flat(step.get("message")),
    }
    if step.get("reasoning_content") is not None:
        message["reasoning_content"] = step["reasoning_content"]
    calls = [c for c in _list(step.get("tool_calls")) if isinstance(c, Mapping)]
    if calls:
        message["tool_calls"] = [
            {"id": c.get("tool_call_id"), "type": "function",
             "function": {"name": c.get("function_name"), "arguments": json.dumps(c.get("arguments") or {})}}
            for c in calls
        ]  # fmt: skip
    return message


def _turn(metrics: Mapping[str, Any], *, index: int, position: int) -> dict[str, Any]:
    extra = _mapping(metrics.get("extra"))
    return {
        "index": extra.get("index", index),
        "num_request_messages": position,
        "finish_reason": extra.get("finish_reason"),
        "latency_ms": extra.get("latency_ms"),
        "token_ids": _list(metrics.get("completion_token_ids")),
        "prompt_token_ids": _list(metrics.get("prompt_token_ids")),
        "logprobs": metrics.get("logprobs"),
        "usage": {
            "prompt_tokens": metrics.get("prompt_tokens"),
            "completion_tokens": metrics.get("completion_tokens"),
        },
    }


def _flat(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


# -- small tolerant accessors ----------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not value:
        return None
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _count(value: Any, ids: Sequence[int] | None) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return len(ids) if ids else None


def _finite(value: Any) -> Any:
    """JSON data with every non-finite number (which strict JSON cannot hold) as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
