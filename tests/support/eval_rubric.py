"""Helpers shared by the eval-rubric app tests."""

from __future__ import annotations

from pathlib import Path

from osmosis_ai.cli.eval_rubric.config import RubricSuite, load_rubric_suite

MODEL = "model_info: {provider: openai, model: m}"


def suite_from(tmp_path: Path, text: str, *, strict: bool = True) -> RubricSuite:
    path = tmp_path / "rubric_configs.yaml"
    path.write_text(text, encoding="utf-8")
    return load_rubric_suite(path, strict=strict)
