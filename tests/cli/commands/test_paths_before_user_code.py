"""Paths on the command line are resolved when it is parsed: user code that changes the working
directory (at import or while it runs) moves no output, journal or dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply

WANDERING = """
import os

os.chdir({elsewhere!r})  # at import


def exact(solution_str, ground_truth, extra_info):
    os.chdir({elsewhere!r})  # and at every call
    with open({moved!r}, "a") as note:
        note.write(os.getcwd() + "\\n")
    return float(solution_str.strip() == ground_truth.strip())
"""


@pytest.mark.parametrize("command", ["eval", "test"])
def test_user_code_changing_directory_moves_no_path(
    command: str,
    openai_server: OpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    openai_server.default = Reply(content="2")
    work, elsewhere, code = tmp_path / "work", tmp_path / "elsewhere", tmp_path / "code"
    for directory in (work, elsewhere, code):
        directory.mkdir()
    module = f"wandering_{command}"
    moved = code / "moved.txt"
    (code / f"{module}.py").write_text(WANDERING.format(elsewhere=str(elsewhere), moved=str(moved)))
    (code / f"{module}_agent.py").write_text(
        f"import os\nos.chdir({str(elsewhere)!r})\nopen({str(moved)!r}, 'a').write(os.getcwd() + '\\n')\n"
        "from tests.support.agents import agent_loop\n"
    )
    monkeypatch.syspath_prepend(str(code))
    rows = [{"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"} for i in range(2)]
    (work / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ["-d", "data.jsonl", "--model", "m", "--base-url", openai_server.url,
              "-o", "out.json", "--report", "page.html", "-q"]  # fmt: skip
    if command == "eval":
        argv = ["eval", "-m", "tests.support.agents:agent_loop", "--eval-fn", f"{module}:exact",
                "--journal", "journal.sqlite", *common]  # fmt: skip
    else:
        argv = ["test", "-m", f"{module}_agent:agent_loop", *common]
    ran = cli(*argv, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert str(elsewhere) in moved.read_text().split()  # the user code did move the process
    written = {"out.json", "page.html"} | ({"journal.sqlite"} if command == "eval" else set())
    assert written <= {p.name for p in work.iterdir()}
    assert not os.listdir(elsewhere)
    assert json.loads((work / "out.json").read_text())
