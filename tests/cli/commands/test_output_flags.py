"""Every output flag onto a character device, a FIFO and a symbolic link: written in place (the device
stays a device, the FIFO a FIFO, the link a link), never replaced by a regular file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.special_files import FifoReader, char_device, still_char_device, symlink_to_file

AGENT = "tests.support.agents:agent_loop"


def _rows(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [{"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"} for i in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _command(name: str, url: str, tmp_path: Path) -> list[str]:
    if name == "test":
        return ["test", "-m", AGENT, "-d", str(_rows(tmp_path)), "--model", "m", "--base-url", url, "-q"]
    if name == "eval":
        return ["eval", "-m", AGENT, "-d", str(_rows(tmp_path)), "--eval-fn", "tests.support.evals:exact",
                "--model", "m", "--base-url", url, "--journal", str(tmp_path / "j.sqlite"), "-q"]  # fmt: skip
    if name == "rollout":
        return ["rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
                "--journal", str(tmp_path / "j.sqlite"), "-q"]  # fmt: skip
    if name == "reward":
        answers = tmp_path / "answers.jsonl"
        answers.write_text('{"solution_str": "2", "ground_truth": "2"}\n')
        return ["reward", "score", "-f", "tests.support.rewards:answer_length", "-d", str(answers),
                "--workers", "0", "--journal", str(tmp_path / "j.sqlite"), "-q"]  # fmt: skip
    results = tmp_path / "results.jsonl"
    results.write_text('{"rollout_id": "r-0", "row_index": 0, "status": "COMPLETED", "reward": 1.0}\n')
    return ["report", str(results), "-q"]


def _json(data: bytes) -> None:
    json.loads(data)


def _jsonl(data: bytes) -> None:
    lines = data.decode().splitlines()
    assert lines and all(json.loads(line)["rollout_id"] for line in lines)


def _scored(data: bytes) -> None:
    lines = data.decode().splitlines()
    assert [json.loads(line)["score"] for line in lines] == [1.0]


def _html(data: bytes) -> None:
    assert data.startswith(b"<!DOCTYPE html>") and data.rstrip().endswith(b"</html>")


# (command, flag, what a whole file of that flag looks like)
FLAGS: list[tuple[str, str, Callable[[bytes], None]]] = [
    ("test", "-o", _json),
    ("test", "--report", _html),
    ("eval", "-o", _json),
    ("eval", "--report", _html),
    ("rollout", "-o", _jsonl),
    ("rollout", "--report", _html),
    ("reward", "-o", _scored),
    ("reward", "--report", _html),
    ("report", "-o", _html),
]
IDS = [f"{command} {flag}" for command, flag, _ in FLAGS]


@pytest.fixture
def answering(openai_server: OpenAIServer) -> str:
    openai_server.default = Reply(content="2")
    return openai_server.url


@pytest.mark.parametrize(("command", "flag", "whole"), FLAGS, ids=IDS)
def test_a_character_device_stays_a_device(
    command: str, flag: str, whole: Callable[[bytes], None], answering: str, tmp_path: Path,
) -> None:  # fmt: skip
    device = char_device(tmp_path / "null")
    ran = cli(*_command(command, answering, tmp_path), flag, str(device))
    assert ran.returncode == 0, ran.stderr
    assert still_char_device(device)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".null")]


@pytest.mark.parametrize(("command", "flag", "whole"), FLAGS, ids=IDS)
def test_a_fifo_gets_the_whole_file_and_stays_a_fifo(
    command: str, flag: str, whole: Callable[[bytes], None], answering: str, tmp_path: Path,
) -> None:  # fmt: skip
    fifo = FifoReader(tmp_path / "pipe")
    ran = cli(*_command(command, answering, tmp_path), flag, str(fifo.path))
    data = fifo.received()
    assert ran.returncode == 0, ran.stderr
    whole(data)
    assert fifo.path.is_fifo()


@pytest.mark.parametrize(("command", "flag", "whole"), FLAGS, ids=IDS)
def test_a_symlink_stays_a_link_to_the_written_file(
    command: str, flag: str, whole: Callable[[bytes], None], answering: str, tmp_path: Path,
) -> None:  # fmt: skip
    target = tmp_path / "kept" / "results"
    link = symlink_to_file(tmp_path / "latest", target)
    ran = cli(*_command(command, answering, tmp_path), flag, str(link))
    assert ran.returncode == 0, ran.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    whole(target.read_bytes())
    assert sorted(p.name for p in target.parent.iterdir()) == ["results"]


@pytest.mark.parametrize(("command", "flag", "whole"), FLAGS, ids=IDS)
def test_a_directory_is_refused_in_one_line_before_any_model_call(
    command: str, flag: str, whole: Callable[[bytes], None], openai_server: OpenAIServer, tmp_path: Path,
) -> None:  # fmt: skip
    (tmp_path / "somewhere").mkdir()
    ran = cli(*_command(command, openai_server.url, tmp_path), flag, str(tmp_path / "somewhere"))
    assert ran.returncode == 1
    assert ran.stderr == f"Error: cannot write {flag if flag != '-o' or command == 'report' else '--output'} " \
        f"{tmp_path / 'somewhere'}: it is a directory; give a file name\n"  # fmt: skip
    assert openai_server.requests == []
