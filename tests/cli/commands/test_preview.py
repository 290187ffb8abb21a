"""``osmosis preview`` through the command line's ``main()`` in this process:
rubric configs and datasets shown as the tools read them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import REPO, cli

EXAMPLES = REPO / "examples"


def test_preview_shows_the_bundled_examples(tmp_path: Path, home: Path) -> None:
    configs = cli("preview", "-p", str(EXAMPLES / "rubric_configs.yaml"), cwd=tmp_path, home=home)
    assert configs.returncode == 0, configs.stderr
    assert configs.stdout.startswith("Loaded 2 rubric config(s) from ")
    assert "Rubric config #1 (rubrics[0])\nid: support_followup" in configs.stdout
    assert "rubric: |\n" in configs.stdout  # multi-line rubric kept as a block
    data = cli("preview", "--path", str(EXAMPLES / "sample_data.jsonl"), cwd=tmp_path, home=home)
    assert data.returncode == 0, data.stderr
    assert data.stdout.startswith("Loaded 2 JSONL record(s) from ")
    assert '"conversation_id": "ticket-1042"' in data.stdout


def test_preview_lists_an_entry_with_extra_info(tmp_path: Path, home: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "rubrics:\n  - {id: a, rubric: A}\n  - {id: b, rubric: B, extra_info: {x: 1}}\n", encoding="utf-8"
    )
    result = cli("preview", "-p", "c.yaml", cwd=tmp_path, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Loaded 2 rubric config(s) from c.yaml")
    assert "Rubric config #2 (rubrics[1])\nid: b\nrubric: B\nextra_info:\n  x: 1" in result.stdout


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("notes.txt", "x", "accepted: .yaml, .yml, .jsonl"),
        ("missing.yaml", None, "does not exist"),
        ("bad.jsonl", '{"a": 1}\nnot json\n', "bad.jsonl:2: invalid JSON"),
        ("bad.yaml", "rubrics: [\n", "Invalid YAML"),
        (
            "loop.yaml",
            "a: &x [*x]\n",
            "'a[0]' refers back to a node that contains it (a recursive YAML alias)",
        ),
        (
            "deep.jsonl",
            '{"a": 1}\n' + '{"a":' * 100_000 + "1" + "}" * 100_000,
            "deep.jsonl:2: the JSON is nested too deeply",
        ),
        ("five.yaml", "rubrics: 5\n", "'rubrics' must be a list of rubric entries, got int"),
        ("mapping.yaml", "rubrics: {id: a}\n", "'rubrics' must be a list of rubric entries, got dict"),
        ("numbers.yaml", "- 1\n- 2\n", "No rubric entries found in numbers.yaml"),
        ("empty.yaml", "# nothing yet\n", "No rubric entries found in empty.yaml"),
    ],
)
def test_preview_reports_bad_files_without_a_traceback(
    tmp_path: Path, home: Path, name: str, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / name).write_text(content, encoding="utf-8")
    result = cli("preview", "-p", name, cwd=tmp_path, home=home)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
