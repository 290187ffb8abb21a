"""``osmosis eval cache dir|ls|rm`` over the journals real ``osmosis eval`` runs left behind."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply


def _run_eval(url: str, data: Path, model: str, cache: Path) -> None:
    result = cli(
        "eval", "-m", "tests.support.agents:agent_loop", "-d", str(data), "--eval-fn", "tests.support.evals:exact",
        "--model", model, "--base-url", url, "-q", env={"OSMOSIS_CACHE_DIR": str(cache)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_cache_dir_ls_and_rm(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.default = Reply(content="2")
    data = tmp_path / "numbers.jsonl"
    data.write_text(json.dumps({"system_prompt": "s", "user_prompt": "q", "ground_truth": "2"}) + "\n")
    cache = tmp_path / "cache"
    env = {"OSMOSIS_CACHE_DIR": str(cache)}
    for model in ("alpha", "beta"):
        _run_eval(openai_server.url, data, model, cache)

    def cache_command(*args: str, input: str | None = None) -> tuple[int, str, str]:
        result = cli("eval", "cache", *args, env=env, input=input)
        return result.returncode, result.stdout, result.stderr

    assert cache_command("dir") == (0, f"{cache.resolve() / 'eval'}\n", "")
    status, usage, _ = cache_command()
    assert status == 0 and usage.startswith("usage:") and "{dir,ls,rm}" in usage
    status, listing, _ = cache_command("ls")
    lines = [line.split("\t") for line in listing.splitlines()]
    assert status == 0 and sorted(line[1] for line in lines) == ["alpha", "beta"]
    assert all(line[2] == str(data) and line[3] == "completed" and line[4] == "1" for line in lines)
    assert [
        line[1] for line in (x.split("\t") for x in cache_command("ls", "--model", "ALP")[1].splitlines())
    ] == ["alpha"]
    assert cache_command("ls", "--status", "in_progress")[1] == "No cached evaluations found.\n"

    status, _, error = cache_command("rm")
    assert status == 1 and "needs a TASK_ID, --all, or a filter" in error
    status, out, _ = cache_command("rm", "--model", "alpha", input="n\n")
    assert status == 0 and out.endswith("Aborted.\n") and len(cache_command("ls")[1].splitlines()) == 2
    status, out, _ = cache_command("rm", "--model", "alpha", input="y\n")
    assert status == 0 and out.endswith("Removed 1 journal(s).\n")
    assert not (cache / "eval" / "alpha").exists()  # emptied directories go too
    (beta,) = (line.split("\t")[0] for line in cache_command("ls")[1].splitlines())
    assert cache_command("rm", "nope")[0] == 1
    assert cache_command("rm", beta) == (0, "Removed 1 journal(s).\n", "")
    assert cache_command("ls")[1] == "No cached evaluations found.\n"
