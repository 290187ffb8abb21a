"""Judge calls in flight for ``osmosis regrade --rubric`` and ``osmosis reward score --rubric``, through
``main()`` against the judge tests' OpenAI-compatible stand-in: a fixed ``--concurrency N`` never has
more than N judge requests at the server and says so in ``--json``; ``--concurrency auto`` against a
stand-in that refuses (429) whatever comes past its capacity backs off, and every answer still gets
the judge's verdict — a refusal is retried, never a score of 0; ``auto`` without a judge is refused;
a judge whose key is not set stops either command with one line before any row."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply

CAPACITY = 4
LATENCY = 0.05


def _config(tmp_path: Path, server: OpenAIServer) -> Path:
    path = tmp_path / "rubric_configs.yaml"
    path.write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {server.url}\n      timeout: 5\n",
        encoding="utf-8",
    )
    return path


def _judged(tmp_path: Path, server: OpenAIServer, answers: int) -> tuple[Path, Path]:
    """An ``eval-rubric -o`` file of ``answers`` records judged once each, and the isolated home."""
    _config(tmp_path, server)
    records = [
        {"conversation_id": f"c{i}", "rubric_id": "tone", "solution_str": f"reply {i}"}
        for i in range(answers)
    ]
    (tmp_path / "judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "rubric.json"
    result = cli(
        "eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-o", str(out), "-q", cwd=tmp_path, home=home
    )
    assert result.returncode == 0, result.stderr
    return out, home


class Capacity:
    """The stand-in as a server of ``capacity`` requests at once: past it, 429 with Retry-After."""

    def __init__(self, server: OpenAIServer, capacity: int) -> None:
        self.server, self.capacity = server, capacity
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, payload: Any) -> Reply:
        # Called on the server's loop just before the request counts as held: no other request
        # can slip in between the count and the decision.
        if self.server.in_flight.now >= self.capacity:
            with self._lock:
                self.refused += 1
            return Reply(status=429, headers={"retry-after": "0.05"})
        return Reply(content='{"score": 0.75, "explanation": "polite enough"}', delay=LATENCY)


def _verdict(server: OpenAIServer) -> None:
    server.default = Reply(content='{"score": 0.75, "explanation": "polite enough"}', delay=LATENCY)


def test_regrade_rubric_fixed_concurrency_stays_fixed(openai_server: OpenAIServer, tmp_path: Path) -> None:
    source, home = _judged(tmp_path, openai_server, 12)
    _verdict(openai_server)
    openai_server.in_flight.reset()
    result = cli("regrade", str(source), "--rubric", "tone", "--concurrency", "3", "--json",
                 "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, home=home)  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["scored"] == 12 and summary["concurrency"] == {"mode": "fixed", "limit": 3}
    assert 2 <= openai_server.in_flight.peak <= 3
    text = cli("regrade", str(source), "--rubric", "tone", "--concurrency", "3", "--fresh",
               "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, home=home)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert "Concurrency:" not in text.stdout


def test_regrade_rubric_auto_backs_off_on_429_and_scores_every_answer(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    answers = 40
    source, home = _judged(tmp_path, openai_server, answers)
    capacity = Capacity(openai_server, CAPACITY)
    openai_server.handler = capacity
    out = tmp_path / "regraded.jsonl"
    result = cli("regrade", str(source), "--rubric", "tone", "--concurrency", "auto", "--max-concurrency", "16",
                 "--json", "-o", str(out), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, home=home)  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["scored"] == answers and summary["not_scored"] == []
    assert [json.loads(line)["reward"] for line in out.read_text().splitlines()] == [0.75] * answers
    concurrency = summary["concurrency"]
    assert capacity.refused >= 1  # auto starts above the capacity: the server refused some
    assert concurrency["mode"] == "auto" and concurrency["maximum"] == 16
    assert concurrency["requests"]["refused"] == capacity.refused
    assert concurrency["changes"].get("refused", 0) >= 1 and concurrency["lowest"] < 8
    assert 1 <= concurrency["lowest"] <= concurrency["highest"] <= 16 and concurrency["history"]

    openai_server.handler = capacity
    text = cli("regrade", str(source), "--rubric", "tone", "--concurrency", "auto", "--fresh",
               "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, home=home)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert any(line.startswith("Concurrency: auto (1-256): ") for line in text.stdout.splitlines())


def test_auto_needs_a_judge(tmp_path: Path) -> None:
    source = tmp_path / "r.jsonl"
    source.write_text("")
    result = cli(
        "regrade", str(source), "--reward", "tests.support.rewards:contains", "--concurrency", "auto"
    )
    assert result.returncode == 1
    assert "--concurrency auto follows a judge's server, so it goes with --rubric" in result.stderr
    bad = cli("regrade", str(source), "--rubric", "tone", "--concurrency", "often")
    assert bad.returncode == 2 and "invalid value 'often': expected a whole number or 'auto'" in bad.stderr


def _answers(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"solution_str": f"reply {i}", "ground_truth": "courteous-7"}) + "\n"
                            for i in range(rows)))  # fmt: skip
    return path


def test_reward_score_rubric_fixed_and_auto(openai_server: OpenAIServer, tmp_path: Path) -> None:
    rows = 40
    _config(tmp_path, openai_server)
    data = _answers(tmp_path, rows)
    _verdict(openai_server)
    openai_server.in_flight.reset()
    before = len(openai_server.requests)
    fixed = cli("reward", "score", "--rubric", "tone", "-d", str(data), "--concurrency", "3", "--json",
                "--journal", str(tmp_path / "f.sqlite"), cwd=tmp_path)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["concurrency"] == {"mode": "fixed", "limit": 3}
    assert 2 <= openai_server.in_flight.peak <= 3 and len(openai_server.requests) - before == rows
    judged = openai_server.requests[-1].json["messages"]
    assert "reply" in json.dumps(judged) and "courteous-7" in json.dumps(
        judged
    )  # the answer and its ground truth

    capacity = Capacity(openai_server, CAPACITY)
    openai_server.handler = capacity
    out = tmp_path / "scored.jsonl"
    auto = cli("reward", "score", "--rubric", "tone", "-d", str(data), "--concurrency", "auto",
               "--max-concurrency", "12", "--json", "-o", str(out), "--journal", str(tmp_path / "a.sqlite"),
               cwd=tmp_path)  # fmt: skip
    assert auto.returncode == 0, auto.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["outcome"], line["score"]) for line in lines] == [("completed", 0.75)] * rows
    concurrency = json.loads(auto.stdout)["concurrency"]
    assert capacity.refused >= 1 and concurrency["requests"]["refused"] == capacity.refused
    assert concurrency["mode"] == "auto" and concurrency["maximum"] == 12
    assert concurrency["changes"].get("refused", 0) >= 1 and 1 <= concurrency["lowest"] < 8

    text = cli("reward", "score", "--rubric", "tone", "-d", str(data), "--concurrency", "auto",
               "--journal", str(tmp_path / "t.sqlite"), cwd=tmp_path)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert any(line.startswith("Concurrency: auto (1-256): ") for line in text.stdout.splitlines())


def test_reward_score_concurrency_goes_with_a_judge(tmp_path: Path) -> None:
    data = _answers(tmp_path, 2)
    for extra in (("--concurrency", "auto"), ("--concurrency", "4"), ("--max-concurrency", "4")):
        result = cli("reward", "score", "-f", "tests.support.rewards:contains", "-d", str(data), *extra)
        assert result.returncode == 1
        assert "--concurrency and --max-concurrency go with --rubric" in result.stderr
    ray = cli("reward", "score", "--rubric", "tone", "-d", str(data), "--backend", "ray")
    assert ray.returncode == 1 and "--rubric judges in this process" in ray.stderr
    both = cli("reward", "score", "--rubric", "tone", "-f", "a:b", "-d", str(data))
    assert both.returncode == 2


def test_a_judge_without_its_key_stops_regrade_and_reward_score_before_any_row(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    source, home = _judged(tmp_path, openai_server, 3)
    sent = len(openai_server.requests)
    (tmp_path / "rubric_configs.yaml").write_text(  # the provider's own endpoint: its key is needed
        "version: 1\nrubrics:\n  - id: tone\n    rubric: Is the reply polite?\n"
        "    model_info:\n      provider: openai\n      model: gpt-5-mini\n",
        encoding="utf-8",
    )
    (tmp_path / "answers.jsonl").write_text('{"solution_str": "hello", "ground_truth": "x"}\n')
    for command in (["regrade", str(source)], ["reward", "score", "-d", "answers.jsonl"]):
        result = cli(*command, "--rubric", "tone", "-q", "--journal", str(tmp_path / f"{command[0]}.sqlite"),
                     cwd=tmp_path, home=home)  # fmt: skip
        assert result.returncode == 1, result.stdout
        assert result.stderr.splitlines() == [
            "Error: model 'openai/gpt-5-mini' cannot be used: no API key for its provider "
            "(set OPENAI_API_KEY in the environment, or pass an API key)"
        ]
        assert not (tmp_path / f"{command[0]}.sqlite").exists()  # no row was read, nothing journalled
    assert len(openai_server.requests) == sent
