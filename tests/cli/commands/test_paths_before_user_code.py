"""Paths on the command line are resolved when it is parsed: user code that changes the working
directory (at import or while it runs) moves no output, journal or dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli_inprocess import isolate, run_osmosis
from tests.support.openai_server import OpenAIServer, Reply

WANDERING = """
import os

os.chdir({elsewhere!r})  # at import


def exact(solution_str, ground_truth, extra_info):
    os.chdir({elsewhere!r})  # and at every call
    return float(solution_str.strip() == ground_truth.strip())
"""


@pytest.mark.parametrize("command", ["eval", "test"])
def test_user_code_changing_directory_moves_no_path(
    command: str,
    openai_server: OpenAIServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate(monkeypatch)
    openai_server.default = Reply(content="2")
    work, elsewhere, code = tmp_path / "work", tmp_path / "elsewhere", tmp_path / "code"
    for directory in (work, elsewhere, code):
        directory.mkdir()
    module = f"wandering_{command}"
    (code / f"{module}.py").write_text(WANDERING.format(elsewhere=str(elsewhere)))
    (code / f"{module}_agent.py").write_text(
        f"import os\nos.chdir({str(elsewhere)!r})\nfrom tests.support.agents import agent_loop\n"
    )
    monkeypatch.syspath_prepend(str(code))
    rows = [{"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"} for i in range(2)]
    (work / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(work)
    common = ["-d", "data.jsonl", "--model", "m", "--base-url", openai_server.url,
              "-o", "out.json", "--report", "page.html", "-q"]  # fmt: skip
    if command == "eval":
        argv = ["eval", "-m", "tests.support.agents:agent_loop", "--eval-fn", f"{module}:exact",
                "--journal", "journal.sqlite", *common]  # fmt: skip
    else:
        argv = ["test", "-m", f"{module}_agent:agent_loop", *common]
    ran = run_osmosis(capsys, *argv)
    assert ran.status == 0, ran.stderr
    assert Path.cwd() == elsewhere  # the user code did move the process
    written = {"out.json", "page.html"} | ({"journal.sqlite"} if command == "eval" else set())
    assert written <= {p.name for p in work.iterdir()}
    assert not os.listdir(elsewhere)
    assert json.loads((work / "out.json").read_text())
