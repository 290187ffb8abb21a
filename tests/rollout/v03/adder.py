"""What the agent-framework adapter tests share: a policy stand-in that solves ``what is A + B?`` with
an ``add`` tool (the first turn asks for the tool, the second answers with its result), the rows it
solves, and the two ways a rollout is driven (0.3's wire directly; ``osmosis rollout run --url``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from osmosis_ai.rollout.types.protocol import POLLING_LEASE_HEADER
from tests.support.cli import Ran, cli
from tests.support.openai_server import Reply, completion_body

ROWS = 3
SYSTEM = "Add with the add tool, then answer with the number only."


def tool_call_reply(a: int, b: int) -> Reply:
    body = completion_body(None)
    choice = body["choices"][0]
    choice["finish_reason"] = "tool_calls"
    choice["message"]["tool_calls"] = [
        {
            "id": f"call_add_{a}_{b}",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})},
        }
    ]
    return Reply(body=body)


def adding_policy(payload: Any) -> Reply | str:
    """A user question gets a call of ``add``; the tool's result gets the result as the answer."""
    last = payload["messages"][-1]
    if last["role"] == "tool":
        content = last["content"]
        text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
        return text.strip()
    found = re.search(r"what is (\d+) \+ (\d+)\?", json.dumps(last.get("content")))
    return tool_call_reply(int(found.group(1)), int(found.group(2))) if found else "?"


def prompt(i: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"what is {i} + 2?"}]


def dataset(tmp_path: Path) -> Path:
    """Even rows' ground truth is the sum (reward 1), odd rows' is not (reward 0)."""
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(
        json.dumps({"system_prompt": SYSTEM, "user_prompt": f"what is {i} + 2?",
                    "ground_truth": str(i + 2 if i % 2 == 0 else i + 3)}) + "\n"
        for i in range(ROWS)
    ))  # fmt: skip
    return data


def run_over_wire(server_url: str, chat_url: str, rollout_id: str, i: int) -> dict[str, Any]:
    """Submit row ``i`` over 0.3's wire and long-poll its result."""
    submitted = httpx.post(
        f"{server_url}/rollout",
        json={"rollout_id": rollout_id, "initial_messages": prompt(i), "label": str(i + 2),
              "chat_completions_url": chat_url, "llm_api_key": "sk-rollout"},
    )  # fmt: skip
    assert submitted.status_code == 202, submitted.text
    lease = {POLLING_LEASE_HEADER: submitted.json()["polling_lease_token"]}
    for _ in range(20):
        answer: dict[str, Any] = httpx.get(
            f"{server_url}/rollout/{rollout_id}/result", headers=lease, timeout=60
        ).json()
        if answer["status"] in ("success", "failure", "cancelled"):
            return answer
    raise AssertionError(f"rollout {rollout_id} did not finish")


def run_through_traingate(
    server_url: str, policy_url: str, tmp_path: Path
) -> tuple[Ran, list[dict[str, Any]]]:
    """``osmosis rollout run --url`` over :func:`dataset`: how it ended and its records, in row order."""
    out = tmp_path / "records.jsonl"
    ran = cli(
        "rollout", "run", "--url", server_url, "-d", str(dataset(tmp_path)), "--model", "openai/policy",
        "--base-url", policy_url, "--api-key", "sk-policy", "-o", str(out), "-q", cwd=tmp_path,
    )  # fmt: skip
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return ran, sorted(records, key=lambda r: r["row_index"])
