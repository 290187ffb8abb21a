"""``osmosis completion bash|zsh|fish``: scripts written from the real parser, checked by the shells."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from osmosis_ai.cli.completion import command_tree
from osmosis_ai.cli.main import COMMANDS, build_parser, main


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(bash_script: Path, *words: str) -> list[str]:
    """What bash offers for the command line ``words`` (the last one being completed)."""
    line = " ".join(f"'{w}'" for w in words)
    driver = (
        f"source {bash_script}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
        "_osmosis\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(["bash", "-c", driver], capture_output=True, text=True, check=True, timeout=30)
    return [word for word in result.stdout.splitlines() if word]


@pytest.fixture
def bash_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "osmosis.bash"
    path.write_text(script("bash", capsys))
    return path


def test_the_bash_script_is_valid_bash(bash_script: Path) -> None:
    subprocess.run(["bash", "-n", str(bash_script)], check=True, timeout=30)


def test_bash_completes_commands_sub_commands_options_and_choices(bash_script: Path) -> None:
    assert complete(bash_script, "osmosis", "") == list(COMMANDS)
    assert complete(bash_script, "osmosis", "ev") == ["eval-rubric", "eval"]
    assert complete(bash_script, "osmosis", "eval", "ca") == ["cache"]
    assert complete(bash_script, "osmosis", "eval", "cache", "") == ["dir", "ls", "rm"]
    assert complete(bash_script, "osmosis", "rollout", "run", "--conc") == ["--concurrency"]
    assert complete(bash_script, "osmosis", "eval", "--retry") == ["--retry-failed"]
    assert complete(bash_script, "osmosis", "serve", "--log-level", "w") == ["warning"]
    assert complete(bash_script, "osmosis", "completion", "") == ["bash", "zsh", "fish"]
    # An option that takes a path leaves the completion to the shell's file names.
    assert complete(bash_script, "osmosis", "test", "-d", "") == []


def test_every_option_of_the_parser_is_in_the_script(bash_script: Path) -> None:
    text = bash_script.read_text()
    tree = command_tree(build_parser("*"))
    stack = [tree]
    while stack:
        node = stack.pop()
        stack.extend(node.commands.values())
        for option in node.options:
            for flag in option.flags:
                assert f" {flag}" in text or f"'{flag}" in text, (node.path, flag)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(shell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = script(shell, capsys)
    assert "eval-rubric" in text and "--retry-failed" in text.replace("-l retry-failed", "--retry-failed")
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"osmosis.{shell}"
    path.write_text(text)
    subprocess.run([shell, "-n", str(path)], check=True, timeout=30)


def test_json_wraps_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["completion", "fish", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["shell"] == "fish" and document["script"].startswith("# fish completion")
