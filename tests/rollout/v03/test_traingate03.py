"""``osmosis rollout run --url`` against a 0.3 server: told from a 0.2 one by its ``/health`` and driven
over 0.3's wire (``POST /rollout``, the rollout-scoped chat base on the TrainGate, the leased result
poll), both this package's server and upstream 0.3.8's own running the unchanged ``project/main.py``;
the policy is the OpenAI-compatible stand-in answering ``what is A + B?`` with the sum."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.rollout.v03.served import KEY, Served, without_this_repo
from tests.support.cli import Ran, cli
from tests.support.openai_server import OpenAIServer

ROWS = 6


def _dataset(tmp_path: Path) -> Path:
    """Even rows' ground truth is the sum (reward 1), odd rows' is not (reward 0)."""
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(
        json.dumps({"system_prompt": "Answer with the number only.", "user_prompt": f"what is {i} + 2?",
                    "ground_truth": str(i + 2 if i % 2 == 0 else i + 3)}) + "\n"
        for i in range(ROWS)
    ))  # fmt: skip
    return data


def _run(server: Served, policy: OpenAIServer, data: Path, tmp_path: Path, *extra: str) -> Ran:
    return cli(
        "rollout", "run", "--url", server.url, "--server-api-key", KEY, "-d", str(data),
        "--model", "openai/policy", "--base-url", policy.url, "--api-key", "sk-policy",
        "--journal", str(tmp_path / "journal.jsonl"), *extra,
        cwd=tmp_path, env={"COLUMNS": "120"},
    )  # fmt: skip


def _rollout_chats(policy: OpenAIServer) -> list[Any]:
    """The policy's chat calls made for rollouts (not the run's preflight of the policy)."""
    return [r for r in policy.requests if "what is" in json.dumps((r.json or {}).get("messages"))]


def _records(out: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["row_index"])


def _assert_every_row_completed_with_the_graders_reward(out: Path) -> None:
    records = _records(out)
    assert [r["row_index"] for r in records] == list(range(ROWS))
    for record in records:
        assert (record["status"], record["outcome"]) == ("COMPLETED", "completed"), record
        assert record["agent_reward"] == record["reward"] == (1.0 if record["row_index"] % 2 == 0 else 0.0)
        assert record["append_only_violations"] == [] and record["rejected_calls"] == []
        (turn,) = record["turns"]  # served by the gateway's rollout-scoped chat endpoint, with token ids
        assert turn["token_ids"] and turn["prompt_token_ids"]
        assert record["final_messages"][-1] == {"role": "assistant", "content": str(record["row_index"] + 2)}


def test_rollout_run_drives_this_packages_0_3_server_with_journal_resume_and_report(
    serve_main: Callable[..., Served], arithmetic: OpenAIServer, tmp_path: Path
) -> None:
    server = serve_main()
    data, out, page = _dataset(tmp_path), tmp_path / "records.jsonl", tmp_path / "report.html"
    ran = _run(server, arithmetic, data, tmp_path, "-o", str(out), "--report", str(page))
    assert ran.returncode == 0, ran.stderr + ran.stdout
    _assert_every_row_completed_with_the_graders_reward(out)
    assert len(_rollout_chats(arithmetic)) == ROWS
    assert "<html" in page.read_text().lower()
    again = _run(server, arithmetic, data, tmp_path, "-q")  # resumed from the journal: nothing runs again
    assert again.returncode == 0, again.stderr
    assert len(_rollout_chats(arithmetic)) == ROWS
    assert f"{ROWS} rollouts: {ROWS} completed" in again.stdout


def test_rollout_run_drives_upstreams_own_0_3_server(
    upstream_python: Path,
    serve_main: Callable[..., Served],
    arithmetic: OpenAIServer,
    tmp_path: Path,
) -> None:
    server = serve_main(upstream_python, without_this_repo(), _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(tmp_path))
    out = tmp_path / "records.jsonl"
    ran = _run(server, arithmetic, _dataset(tmp_path), tmp_path, "-o", str(out), "-q")
    assert ran.returncode == 0, ran.stderr + ran.stdout + server.log.read_text()[-3000:]
    _assert_every_row_completed_with_the_graders_reward(out)
    assert "RolloutServer starting" not in server.log.read_text()  # upstream's server, not this package's
