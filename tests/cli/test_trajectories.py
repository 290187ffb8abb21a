"""``--trajectories DIR`` of ``rollout run``, ``test`` and ``eval``: one valid ATIF file per finished
item, only in DIR, which ``osmosis report`` opens; a DIR that cannot be one is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.test_atif import valid_file
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer

ROWS = len(CALCULATOR_DATASET.read_text().splitlines())


def test_rollout_run_writes_one_valid_trajectory_per_rollout_with_its_token_ids(tmp_path: Path) -> None:
    directory = tmp_path / "made" / "trajectories"  # made at the first write
    records = tmp_path / "records.jsonl"
    ran = cli("rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
              "--n", "2", "-o", str(records), "--trajectories", str(directory), home=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert f"wrote {2 * ROWS} ATIF trajectories to {directory}" in ran.stdout
    by_id = {r["rollout_id"]: r for r in map(json.loads, records.read_text().splitlines())}
    files = sorted(directory.iterdir())
    assert [p.name for p in files] == sorted(f"{rollout}.json" for rollout in by_id)
    for path in files:
        document = valid_file(path)
        record = by_id[document["trajectory_id"]]
        agent_steps = [step for step in document["steps"] if step["source"] == "agent"]
        assert [s["metrics"]["completion_token_ids"] for s in agent_steps] == [
            t["token_ids"] for t in record["turns"]
        ]
        assert [s["metrics"]["prompt_token_ids"] for s in agent_steps] == [
            t["prompt_token_ids"] for t in record["turns"]
        ]
        assert [s["metrics"]["logprobs"] for s in agent_steps] == [t["logprobs"] for t in record["turns"]]
        assert document["extra"]["osmosis"]["reward"] == record["reward"]
        assert document["extra"]["osmosis"]["outcome"] == "completed"
    # Nothing written beside DIR and -o but the journal, under the home directory as always.
    assert {p.name for p in tmp_path.iterdir()} - {".cache"} == {"made", "records.jsonl"}

    page = tmp_path / "page.html"
    report = cli("report", str(directory), "-o", str(page), "--json")
    assert report.returncode == 0, report.stderr
    [summary] = json.loads(report.stdout)["runs"]
    assert (summary["kind"], summary["source"]) == ("rollout run", str(directory))
    assert summary["outcomes"]["completed"] == 2 * ROWS
    assert page.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("command", ["test", "eval"])
def test_test_and_eval_write_one_valid_trajectory_per_item(command: str, tmp_path: Path) -> None:
    directory = tmp_path / "trajectories"
    extra = (
        ["--eval-fn", "tests.support.evals:exact", "--baseline-model", "scripted"]
        if command == "eval"
        else []
    )
    ran = cli(command, "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "--limit", "2",
              "--trajectories", str(directory), *extra, home=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    names = {"row0-sample0.json", "row1-sample0.json"}
    if command == "eval":
        names |= {"baseline-" + name for name in names}
    assert {p.name for p in directory.iterdir()} == names
    for path in directory.iterdir():
        osmosis = valid_file(path)["extra"]["osmosis"]
        assert (osmosis["command"], osmosis["outcome"]) == (command, "completed")


def test_a_directory_that_is_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    taken = tmp_path / "taken.json"
    taken.write_text("keep me")
    ran = cli(
        "test",
        "-m",
        CALCULATOR,
        "-d",
        str(CALCULATOR_DATASET),
        "--model",
        "scripted",
        "--trajectories",
        str(taken),
    )
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        f"Error: cannot write --trajectories {taken}: it is not a directory; give a directory (made when missing)\n"
    )
    assert taken.read_text() == "keep me"


def test_a_trajectory_never_replaces_an_input_linked_into_the_directory(tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(CALCULATOR_DATASET.read_text())
    directory = tmp_path / "trajectories"
    directory.mkdir()
    (directory / "row0-sample0.json").symlink_to(dataset)
    ran = cli("test", "-m", CALCULATOR, "-d", str(dataset), "--model", "scripted", "--limit", "1",
              "--trajectories", str(directory))  # fmt: skip
    assert ran.returncode == 1
    assert ran.stderr.endswith(
        f"Error: cannot write --trajectories {directory / 'row0-sample0.json'}: it is the file of -d/--dataset; "
        "choose another directory\n"
    )
    assert dataset.read_text() == CALCULATOR_DATASET.read_text()


def test_a_resumed_rollout_run_writes_the_rollouts_its_journal_has_too(tmp_path: Path) -> None:
    journal, directory = tmp_path / "run.sqlite", tmp_path / "trajectories"
    argv = ["rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted", "-q",
            "--journal", str(journal)]  # fmt: skip
    assert cli(*argv, "--limit", "1").returncode == 0
    ran = cli(*argv, "--trajectories", str(directory))
    assert ran.returncode == 0, ran.stderr
    files = sorted(directory.iterdir())
    assert len(files) == ROWS
    # The first row's rollout ran in the first run (its id names that run), the rest in this one.
    runs = {path.name.split("-")[1] for path in files}
    first = next(path.name.split("-")[1] for path in files if path.name.endswith("-r0-s0.json"))
    assert len(runs) == 2 and sum(path.name.split("-")[1] == first for path in files) == 1
    for path in files:
        assert valid_file(path)["steps"][2]["metrics"]["completion_token_ids"]


def test_test_interactive_writes_the_rows_it_ran(openai_server: OpenAIServer, tmp_path: Path) -> None:
    from tests.cli.test_interactive import _tool_call_then_answer

    openai_server.handler = _tool_call_then_answer
    directory = tmp_path / "trajectories"
    ran = cli("test", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "m", "--base-url", openai_server.url,
              "-i", "--row", "0", "--trajectories", str(directory), input="c\nq\n")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [path] = directory.iterdir()
    document = valid_file(path)
    assert (path.name, document["agent"]["model_name"]) == ("row0-sample0.json", "m")
    call = document["steps"][2]
    assert call["tool_calls"][0]["arguments"] == {"a": 12, "b": 7}
    assert call["observation"]["results"] == [{"content": "19", "source_call_id": "call_1"}]
    assert document["steps"][3]["message"] == "The sum is #### 19"
