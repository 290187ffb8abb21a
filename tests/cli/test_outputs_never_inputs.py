"""A file a command writes is never one it reads: every output option of every command (``-o``,
``--report``, ``--journal``, ``--trajectories``, ``serve --outbox``, ``eval --log-samples``'s file) naming one of the
command's inputs — by the same path, a symbolic link or a hard link — is refused with one line before
the command starts (nothing on stdout, no model called, no file written), and the input keeps its bytes.
Two outputs naming one file are refused too; devices are never "the same file"."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.main import build_parser
from osmosis_ai.cli.output_file import NAMED_FILES
from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, REPO, Ran, cli

RUBRICS = REPO / "examples" / "rubric_configs.yaml"
RESULTS_LINE = '{"rollout_id": "r-0", "row_index": 0, "status": "COMPLETED", "reward": 1.0}\n'
# What each kind of input holds: a dataset, a results file, a rubric config, a template, a key.
CONTENT = {
    "-d": CALCULATOR_DATASET.read_text(),
    "RESULTS": RESULTS_LINE,
    "-b": RESULTS_LINE,
    "-c": RUBRICS.read_text(),
    "--chat-template": "{% for m in messages %}{{ m.content }}{% endfor %}",
    "--api-key-file": "sk-test\n",
}
SUFFIXES = {"-d": ".jsonl", "RESULTS": ".jsonl", "-b": ".json", "-c": ".yaml", "--chat-template": ".jinja"}
LABELS = {
    "-d": "-d/--dataset", "-o": "-o/--output", "-c": "-c/--config", "-b": "-b/--baseline",
    "RESULTS": "RESULTS", "--report": "--report", "--journal": "--journal", "--outbox": "--outbox",
    "--api-key-file": "--api-key-file", "--chat-template": "--chat-template", "--trajectories": "--trajectories",
}  # fmt: skip


def _command(command: str, files: dict[str, Path], tmp_path: Path) -> list[str]:
    """``command``'s argv with ``files`` (option -> path; ``RESULTS`` is positional), the other files
    it needs made up in ``tmp_path``."""

    placed = set()

    def given(option: str) -> str:
        if option not in files:
            files[option] = tmp_path / f"other{option.replace('-', '_')}{SUFFIXES.get(option, '')}"
            files[option].write_text(CONTENT[option])
        placed.add(option)
        return str(files[option])

    if command == "rollout":
        argv = ["rollout", "run", "-m", CALCULATOR, "--model", "scripted", "-q", "-d", given("-d")]
    elif command == "test":
        argv = ["test", "-m", CALCULATOR, "--model", "scripted", "-q", "-d", given("-d")]
    elif command == "eval":
        argv = ["eval", "-m", CALCULATOR, "--model", "scripted", "--eval-fn", "tests.support.evals:exact",
                "-q", "-d", given("-d")]  # fmt: skip
    elif command == "reward":
        grader = (
            ["--rubric", "support_followup"] if "-c" in files else ["-f", "tests.support.rewards:contains"]
        )
        argv = ["reward", "score", *grader, "-q", "-d", given("-d")]
    elif command == "regrade":
        grader = (
            ["--rubric", "support_followup"]
            if "-c" in files
            else ["--reward", "tests.support.rewards:contains"]
        )
        argv = ["regrade", given("RESULTS"), *grader, "-q"]
    elif command == "report":
        argv = ["report", given("RESULTS"), "-q"]
    elif command == "eval-rubric":
        argv = ["eval-rubric", "-r", "support_followup", "-q", "-d", given("-d")]
    else:
        assert command == "serve"
        argv = ["serve", "-m", CALCULATOR]
    for option, path in files.items():
        if option not in placed:
            argv += [option, str(path)]
    return argv


def _refused(ran: Ran, line: str) -> None:
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, "", f"Error: {line}\n")


# (command, the input option, the output option naming it)
OUTPUTS = [
    ("rollout", "-d", "-o"), ("rollout", "-d", "--report"), ("rollout", "-d", "--journal"),
    ("rollout", "-d", "--trajectories"),
    ("test", "-d", "-o"), ("test", "-d", "--report"), ("test", "-d", "--trajectories"),
    ("eval", "-d", "-o"), ("eval", "-d", "--report"), ("eval", "-d", "--journal"), ("eval", "-d", "--trajectories"),
    ("reward", "-d", "-o"), ("reward", "-d", "--report"), ("reward", "-d", "--journal"),
    ("regrade", "RESULTS", "-o"), ("regrade", "RESULTS", "--report"), ("regrade", "RESULTS", "--journal"),
    ("report", "RESULTS", "-o"),
    ("eval-rubric", "-d", "-o"), ("eval-rubric", "-d", "--report"),
    ("serve", "--api-key-file", "--outbox"),
]  # fmt: skip
# Every other input an output may not name (with one output each).
OTHER_INPUTS = [
    ("rollout", "--chat-template", "-o"),
    ("reward", "-c", "-o"),
    ("regrade", "-d", "-o"), ("regrade", "-c", "--report"),
    ("eval-rubric", "-c", "-o"), ("eval-rubric", "-b", "--report"),
]  # fmt: skip


def _named_by(how: str, target: Path) -> Path:
    if how == "the same path":
        return target
    other = target.with_name(f"{how.replace(' ', '-')}-to-{target.name}")
    if how == "a symbolic link":
        other.symlink_to(target)
    else:
        os.link(target, other)
    return other


# The links are proved on each command's main input; its other inputs are named by the same path.
CASES = [(*case, how) for case in OUTPUTS for how in ("the same path", "a symbolic link", "a hard link")]
CASES += [(*case, "the same path") for case in OTHER_INPUTS]


@pytest.mark.parametrize(("command", "source", "output", "how"), CASES, ids=[" ".join(c) for c in CASES])
def test_an_output_naming_an_input_is_refused_and_the_input_kept(
    command: str, source: str, output: str, how: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    original = tmp_path / f"input{SUFFIXES.get(source, '')}"
    original.write_text(CONTENT[source])
    before = original.read_bytes(), os.stat(original).st_ino
    written = _named_by(how, original)
    label = "-d/--data" if command == "eval-rubric" and source == "-d" else LABELS[source]
    ran = cli(*_command(command, {source: original, output: written}, tmp_path), home=home)
    # The write-most option is named first: a journal is written, the dataset only read.
    _refused(ran, f"{LABELS[output]} names the same file as {label} ({original}): choose another output path")
    assert (original.read_bytes(), os.stat(original).st_ino) == before
    assert written.is_symlink() == (how == "a symbolic link")
    made = {"home", original.name, written.name} | {p.name for p in tmp_path.glob("other*")}
    assert {p.name for p in tmp_path.iterdir()} == made  # nothing else written, no journal beside


def test_two_outputs_naming_one_file_are_refused(tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    ran = cli(*_command("test", {"-o": page, "--report": page}, tmp_path))
    _refused(ran, f"--report names the same file as -o/--output ({page}): choose another output path")
    link = tmp_path / "latest.html"
    link.symlink_to(page)  # dangling: the file -o would create is the one --report would
    ran = cli(*_command("rollout", {"-o": page, "--report": link}, tmp_path))
    _refused(ran, f"--report names the same file as -o/--output ({page}): choose another output path")
    assert not page.exists()


def test_an_output_through_a_dangling_link_to_the_journal_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "run.sqlite"
    link = tmp_path / "out.json"
    link.symlink_to(journal)
    ran = cli(*_command("eval", {"--journal": journal, "-o": link}, tmp_path))
    _refused(ran, f"-o/--output names the same file as --journal ({journal}): choose another output path")
    assert not journal.exists() and link.is_symlink()


def test_the_log_samples_file_never_appends_to_the_dataset(tmp_path: Path) -> None:
    dataset = tmp_path / "run.samples.jsonl"  # where --log-samples puts the samples of run.sqlite
    dataset.write_text(CONTENT["-d"])
    argv = _command("eval", {"-d": dataset, "--journal": tmp_path / "run.sqlite"}, tmp_path)
    ran = cli(*argv, "--log-samples")
    _refused(ran, f"the --log-samples file of --journal names the same file as -d/--dataset ({dataset}): "
             "choose another --journal path")  # fmt: skip
    assert dataset.read_text() == CONTENT["-d"] and not (tmp_path / "run.sqlite").exists()


def test_devices_are_never_the_same_file(tmp_path: Path) -> None:
    ran = cli(
        *_command("test", {"-o": Path(os.devnull), "--report": Path(os.devnull)}, tmp_path), "--limit", "1"
    )
    assert ran.returncode == 0, ran.stderr


def test_a_command_object_of_0_2_refuses_too(tmp_path: Path) -> None:
    from osmosis_ai.rollout.cli import TestCommand

    parser = argparse.ArgumentParser()
    TestCommand().configure_parser(parser)
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(CONTENT["-d"])
    args = parser.parse_args(
        ["-m", CALCULATOR, "-d", str(dataset), "--model", "scripted", "-o", str(dataset)]
    )
    with pytest.raises(CLIError, match=r"^-o/--output names the same file as -d/--dataset"):
        args.handler(args)
    assert dataset.read_text() == CONTENT["-d"]


def _commands(
    parser: argparse.ArgumentParser, path: str = "osmosis"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{path} {name}")
    return found


def test_every_option_writing_a_file_is_declared() -> None:
    """A command's ``-o``, ``--report``, ``--journal``, ``--outbox`` and ``--trajectories`` are checked (a new one too)."""
    writes = {"-o", "--output", "--report", "--journal", "--outbox", "--trajectories"}
    missing = []
    for path, parser in _commands(build_parser("*")):
        declared = {entry.path for entry in parser.get_default(NAMED_FILES) or ()}
        missing += [f"{path} {action.option_strings[0]}" for action in parser._actions
                    if writes & set(action.option_strings) and action.dest not in declared]  # fmt: skip
    assert missing == []
