"""The ways out work whatever the files hold: a damaged journal is kept aside and the run starts over,
``--fresh`` takes any file, an unreadable credentials file is kept aside and ``login`` logs in; a
journal that cannot be written stops the run before any model call."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import CALCULATOR, CALCULATOR_DATASET, cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.platform import StandInPlatform, osmosis_on

AGENT = "tests.support.agents:agent_loop"


def _rows(tmp_path: Path, count: int = 2) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [{"system_prompt": "s", "user_prompt": f"q{i}", "ground_truth": "2"} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _command(command: str, url: str, tmp_path: Path, journal: Path) -> list[str]:
    if command == "eval":
        return ["eval", "-m", AGENT, "-d", str(_rows(tmp_path)), "--eval-fn", "tests.support.evals:exact",
                "--model", "m", "--base-url", url, "--journal", str(journal), "-q"]  # fmt: skip
    return ["rollout", "run", "-m", CALCULATOR, "-d", str(CALCULATOR_DATASET), "--model", "scripted",
            "--journal", str(journal), "-q"]  # fmt: skip


@pytest.mark.parametrize("command", ["eval", "rollout"])
@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_a_journal_that_is_not_a_database_is_kept_aside_and_the_run_goes_on(
    command: str, fresh: bool, openai_server: OpenAIServer, tmp_path: Path,
) -> None:  # fmt: skip
    openai_server.default = Reply(content="2")
    journal = tmp_path / "journal.sqlite"
    journal.write_bytes(b"not a database at all " * 300)
    argv = _command(command, openai_server.url, tmp_path, journal) + (["--fresh"] if fresh else [])
    ran = cli(*argv)
    assert ran.returncode == 0, ran.stderr
    kept = [p for p in tmp_path.glob("journal.sqlite.*") if not p.name.endswith(".lock")]  # the run's lock
    assert len(kept) == 1 and kept[0].read_bytes() == b"not a database at all " * 300
    if fresh:
        assert kept[0].name.endswith(".bak") and ran.stderr == ""
    else:
        assert kept[0].name.endswith(".corrupt")
        assert ran.stderr == (
            f"Warning: the journal {journal} could not be read (file is not a database); it is kept as "
            f"{kept[0]} and the run starts over\n"
        )


def test_a_journal_that_cannot_be_written_costs_no_model_call(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr to make a file read-only for root too")
    journal = tmp_path / "journal.sqlite"
    data = _rows(tmp_path, 5)
    argv = ["eval", "-m", AGENT, "-d", str(data), "--eval-fn", "tests.support.evals:exact", "--model", "m",
            "--base-url", openai_server.url, "--journal", str(journal), "--batch-size", "5", "-q"]  # fmt: skip
    openai_server.queue("preflight ok", *[Reply(status=400)] * 5)  # every run a model_error, journalled
    assert cli(*argv).returncode == 1
    openai_server.reset()
    frozen = subprocess.run(["chattr", "+i", str(journal)], capture_output=True, text=True)
    if frozen.returncode != 0:
        pytest.skip(f"chattr +i is not possible here: {frozen.stderr.strip()}")
    try:
        ran = cli(*argv, "--retry-failed")  # would run all five again
    finally:
        subprocess.run(["chattr", "-i", str(journal)], check=False)
    assert ran.returncode == 1
    assert ran.stderr == (f"Error: cannot open the journal {journal}: attempt to write a readonly database\n")
    assert openai_server.requests == []


def test_login_works_past_an_unreadable_credentials_file(platform: StandInPlatform, config: Path) -> None:
    config.mkdir()
    (config / "credentials.json").write_text("{broken")
    whoami = osmosis_on(platform, config, "whoami")
    kept = sorted(config.glob("credentials.json.unreadable-*"))
    assert whoami.returncode == 1 and len(kept) == 1 and kept[0].read_text() == "{broken"
    assert whoami.stderr == (
        f"Error: the credentials file {config / 'credentials.json'} is unreadable (JSONDecodeError); "
        f"it is kept as {kept[0]}; run 'osmosis login' to start a new one\n"
    )
    assert "Not logged in" in osmosis_on(platform, config, "whoami").stdout  # the next command: no file

    (config / "credentials.json").write_text("[]")  # unreadable again, met by login itself
    login = osmosis_on(platform, config, "login", "--device", "--force")
    assert login.returncode == 0, login.stderr
    assert "[OK] Logged in as ada@example.com" in login.stdout
    assert login.stderr.startswith("Warning: the credentials file ") and "is unreadable" in login.stderr
    assert len(list(config.glob("credentials.json.unreadable-*"))) == 2
    assert osmosis_on(platform, config, "whoami").returncode == 0
