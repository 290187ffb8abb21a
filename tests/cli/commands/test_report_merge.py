"""``osmosis report --merge``: the ``--offset``/``--limit`` shards of one eval or test run as one run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import cli

AGENT = "examples.calculator.agent:agent_loop"
DATA = "examples/calculator/dataset.jsonl"  # 8 rows
EVAL_FN = "examples.calculator.reward:calculator_reward"


def _eval(tmp_path: Path, name: str, *args: str, eval_fn: str = EVAL_FN) -> Path:
    out = tmp_path / name
    ran = cli("eval", "-m", AGENT, "-d", DATA, "--model", "scripted", "--eval-fn", eval_fn, "--n", "2", "-q",
              "-o", str(out), *args)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return out


def test_eval_shards_merge_into_the_run_they_split(tmp_path: Path) -> None:
    first = _eval(tmp_path, "a.json", "--limit", "5")
    second = _eval(tmp_path, "b.json", "--offset", "5")
    whole = _eval(tmp_path, "whole.json")
    merged = cli("report", "--merge", str(first), str(second), "-o", str(tmp_path / "m.html"), "--json")
    assert merged.returncode == 0, merged.stderr
    unsharded = cli("report", str(whole), "-o", str(tmp_path / "w.html"), "--json")
    [run] = json.loads(merged.stdout)["runs"]
    [expected] = json.loads(unsharded.stdout)["runs"]
    assert run["rows"] == 16 and run["dataset_rows"] == 8 and run["samples_per_row"] == 2
    for figure in ("outcomes", "pass_at_k", "mean_score", "scored"):
        assert run[figure] == expected[figure], figure
    assert run["source"] == f"{first} + {second}"


def test_shards_of_different_runs_or_overlapping_rows_are_refused_in_one_line(tmp_path: Path) -> None:
    first = _eval(tmp_path, "a.json", "--limit", "5")
    overlapping = _eval(tmp_path, "c.json", "--offset", "4")
    other = _eval(tmp_path, "d.json", "--offset", "5", eval_fn="tests.support.evals:exact")
    ran = cli("report", "--merge", str(first), str(overlapping), "-o", str(tmp_path / "m.html"))
    assert ran.returncode == 1 and ran.stdout == ""
    assert ran.stderr == (
        f"Error: {overlapping} and {first} both have row 4: shards must not overlap "
        "(give each its own --offset/--limit)\n"
    )
    ran = cli("report", "--merge", str(first), str(other), "-o", str(tmp_path / "m.html"))
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1
    assert ran.stderr.startswith(f"Error: {other} is not a shard of the run in {first}: eval functions")
    assert not (tmp_path / "m.html").exists()


def test_test_shards_merge_and_one_file_is_not_enough(tmp_path: Path) -> None:
    outs = []
    for name, rows in (("t1.json", ("--limit", "3")), ("t2.json", ("--offset", "3"))):
        outs.append(tmp_path / name)
        ran = cli("test", "-m", AGENT, "-d", DATA, "--model", "scripted", "-q", "-o", str(outs[-1]), *rows)
        assert ran.returncode == 0, ran.stderr
    merged = cli("report", "--merge", *map(str, outs), "-o", str(tmp_path / "m.html"), "--json")
    assert merged.returncode == 0, merged.stderr
    [run] = json.loads(merged.stdout)["runs"]
    assert run["rows"] == 8 and run["outcomes"]["completed"] == 8
    alone = cli("report", "--merge", str(outs[0]), "-o", str(tmp_path / "m.html"))
    assert alone.returncode == 1 and alone.stderr == "Error: merging needs at least two shard files\n"


def test_merged_eval_shards_add_up_the_rows_won_lost_and_tied_against_the_baseline(tmp_path: Path) -> None:
    baseline = ("--baseline-model", "scripted")  # the same policy: every row is a tie
    first = _eval(tmp_path, "a.json", "--limit", "3", *baseline, "--journal", str(tmp_path / "a.sqlite"))
    second = _eval(tmp_path, "b.json", "--offset", "3", *baseline, "--journal", str(tmp_path / "b.sqlite"))
    merged = cli("report", "--merge", str(first), str(second), "-o", str(tmp_path / "m.html"), "--json")
    assert merged.returncode == 0, merged.stderr
    [run] = json.loads(merged.stdout)["runs"]
    assert run["comparison"][EVAL_FN] == {
        "difference": 0.0, "interval": None, "rows": 8, "wins": 0, "losses": 0, "ties": 8
    }  # fmt: skip
