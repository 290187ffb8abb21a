"""The eval-rubric flow: where the report goes, and the one-time move of old reports."""

from __future__ import annotations

from pathlib import Path

from osmosis_ai.cli.eval_rubric.session import migrate_legacy_reports, resolve_output


def test_output_paths_and_legacy_migration(tmp_path: Path) -> None:
    assert resolve_output(tmp_path / "x.json", "Tone!", 12.7) == (tmp_path / "x.json", None)
    assert resolve_output(tmp_path / "dir", "t", 12.7) == (
        tmp_path / "dir" / "rubric_eval_result_12.json",
        "12",
    )
    path, identifier = resolve_output(None, " Tone Check! ", 5)
    assert path.parts[-2:] == ("tone_check", "rubric_eval_result_5.json") and identifier == "5"
    (tmp_path / "eval_result" / "a").mkdir(parents=True)
    migrate_legacy_reports(tmp_path)
    assert (tmp_path / "rubric" / "a").is_dir() and not (tmp_path / "eval_result").exists()
