"""Real results files, written by the real commands (through ``main()``), for the report tests.

``write_rollout_results`` runs ``osmosis rollout run`` with the offline scripted policy and the report
tests' agent (``tests.report.agents``): 4 rows x 2 samples where row 1 edits its history (an
append-only violation at message 1) and row 2 fails (``agent_error``); the agent's reward is the
dataset's ``reward`` column, so two calls with different rewards give two runs to compare. The
others answer the model calls with the OpenAI-compatible stand-in at ``server_url``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli

REPORT_AGENT = "tests.report.agents:agent_loop"
PROMPTS = ("What is 12 + 7?", "What is 2 + 3?", "What is 4 + 4?", "What is 6 * 7?")
MODES = ("ok", "rewrite", "fail", "ok")
DEFAULT_REWARDS = (1.0, 0.5, 0.0, 0.25)


def _own_cache(directory: Path) -> dict[str, str]:
    """A journal root inside ``directory``: these session-wide runs happen outside any test, so the
    per-test cache directory of ``tests/conftest.py`` is not set, and must not fall back to the
    developer's own ``~/.cache``."""
    return {"OSMOSIS_CACHE_DIR": str(directory / "cache")}


def _check(result: object, what: str) -> None:
    returncode = getattr(result, "returncode", 1)
    if returncode not in (0, 1):  # 1: some rows failed on purpose
        raise AssertionError(f"{what} failed ({returncode}): {getattr(result, 'stderr', '')}")


def write_rollout_results(
    directory: Path, name: str = "rollouts.jsonl", rewards: tuple[float, ...] = DEFAULT_REWARDS
) -> Path:
    dataset = directory / f"{name}.dataset.jsonl"
    rows = [
        {"system_prompt": "calc", "user_prompt": p, "ground_truth": "19", "mode": m, "reward": r}
        for p, m, r in zip(PROMPTS, MODES, rewards, strict=True)
    ]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = directory / name
    result = cli(
        "rollout", "run", "-m", REPORT_AGENT, "-d", str(dataset), "--model", "scripted", "--n", "2",
        "--max-failure-rate", "1", "-q", "-o", str(out), env=_own_cache(directory),
    )  # fmt: skip
    _check(result, "rollout run")
    return out


def _local_run(directory: Path, command: str, server_url: str, *extra: str) -> Path:
    """``osmosis test`` or ``osmosis eval`` over the calculator's first rows, written to ``COMMAND.json``."""
    out = directory / f"{command}.json"
    result = cli(
        command, "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "local-model", "--base-url",
        server_url, "-q", "-o", str(out), *extra, env=_own_cache(directory),
    )  # fmt: skip
    _check(result, command)
    return out


def write_test_results(directory: Path, server_url: str) -> Path:
    return _local_run(directory, "test", server_url, "--limit", "4", "--max-failure-rate", "1")


def write_eval_results(directory: Path, server_url: str) -> Path:
    journal = directory / "eval-journal.sqlite"
    return _local_run(
        directory, "eval", server_url, "--eval-fn", "tests.support.evals:exact", "--n", "2", "--limit", "3",
        "--journal", str(journal),
    )  # fmt: skip


def write_rubric_results(directory: Path, server_url: str) -> Path:
    (directory / "rubric_configs.yaml").write_text(
        "version: 1\ndefault_score_min: 0\ndefault_score_max: 1\nrubrics:\n  - id: tone\n"
        "    rubric: Is the reply polite?\n    model_info:\n      provider: openai\n"
        f"      model: local-judge\n      api_base: {server_url}\n      timeout: 5\n",
        encoding="utf-8",
    )
    records = [
        {"conversation_id": "c1", "rubric_id": "tone", "solution_str": "Thanks!"},
        {"conversation_id": "c2", "rubric_id": "tone", "solution_str": "Go away."},
    ]
    (directory / "judged.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (directory / "baseline.json").write_text(json.dumps({"average": 0.25, "variance": 0.0, "stdev": 0.0}))
    home = directory / "home"
    home.mkdir(exist_ok=True)
    out = directory / "rubric.json"
    result = cli(
        "eval-rubric", "-r", "tone", "-d", "judged.jsonl", "-n", "2", "-b", "baseline.json", "-o", str(out),
        cwd=directory, home=home,
    )  # fmt: skip
    _check(result, "eval-rubric")
    return out
