"""A user's module that fails while being imported: one ``Error:`` line naming their file and line,
exit status 1, and their traceback (without the import machinery's frames) under ``-v``/``--debug``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli

MODULES = {
    "exits.py": "import sys\n\nsys.exit(7)\n",
    "raises.py": "import json\n\n\ndef settings():\n    return json.loads('{bad')\n\n\nSETTINGS = settings()\n",
    "broken.py": "x = (\n",
    "needs_dep.py": "import surely_not_installed_dependency_xyz\n",
}


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("exits", "module 'exits' exited during import with code 7 (at {dir}/exits.py, line 3)"),
        (
            "raises",
            "importing module 'raises' failed (at {dir}/raises.py, line 5): JSONDecodeError: Expecting",
        ),
        (
            "broken",
            "importing module 'broken' failed (at {dir}/broken.py, line 1): SyntaxError: '(' was never closed",
        ),
        (
            "needs_dep",
            "importing module 'needs_dep' failed (at {dir}/needs_dep.py, line 1): ModuleNotFoundError: "
            "No module named 'surely_not_installed_dependency_xyz'",
        ),
    ],
)
def test_an_import_failure_is_one_line_naming_the_users_file(
    modules: Path, module: str, message: str
) -> None:
    result = cli("validate", "-m", f"{module}:agent", cwd=modules)
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {message.format(dir=modules)}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "-m", "raises:agent", "-v"],
        ["eval", "-m", "raises:agent", "-d", "d.jsonl", "--eval-fn", "x:y", "--debug"],
    ],
)
def test_verbose_shows_the_users_traceback_only(modules: Path, command: list[str]) -> None:
    (modules / "d.jsonl").write_text('{"user_prompt": "hi"}\n', encoding="utf-8")
    result = cli(*command, cwd=modules)
    assert result.returncode == 1
    traceback, error = result.stderr.rstrip("\n").rsplit("\n", 1)
    assert error.startswith("Error: importing module 'raises' failed")
    frames = [line for line in traceback.splitlines() if line.startswith('  File "')]
    assert frames[0] == f'  File "{modules}/raises.py", line 8, in <module>', traceback
    assert f'  File "{modules}/raises.py", line 5, in settings' in frames
    assert not any("importlib" in frame or "osmosis_ai" in frame for frame in frames)
    assert traceback.splitlines()[-1].startswith("json.decoder.JSONDecodeError")
