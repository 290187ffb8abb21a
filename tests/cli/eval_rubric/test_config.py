"""Rubric config files: discovery, defaults, strict and lenient validation, YAML aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from osmosis_ai.cli.errors import CLIError
from tests.support.eval_rubric import MODEL, suite_from


def test_entries_are_discovered_anywhere_with_defaults(tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        "version: 1\ndefault_score_max: 5\ndefault_model_info: {provider: openai, model: d}\n"
        "default_ground_truth: ref\n"
        "groups:\n  easy:\n    - {id: a, rubric: A}\n    - {id: b, rubric: B, score_max: 2, ground_truth: 7}\n"
        "---\n{id: c, rubric: C, " + MODEL + "}\n",
    )
    assert suite.available_ids() == ["a", "b", "c"]
    a, b, c = suite.get("a"), suite.get("b"), suite.get("c")
    assert a.source_label.endswith(":easy[0]") and c.source_label.endswith(":document[1]")
    assert (a.score_max, b.score_max, a.model_info["model"], a.ground_truth, b.ground_truth) == (
        5.0,
        2.0,
        "d",
        "ref",
        "ref",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version: 2\nrubrics: []", "unsupported config version 2"),
        ("version: '1'\n", "must be an integer"),
        ("version: 1\n---\nversion: 0\n", "unsupported"),
        ("default_score_min: low\n", "must be a number"),
        ("default_score_max: .inf\n", "'default_score_max' must be a finite number, got inf"),
        (
            f"rubrics:\n  - {{id: a, rubric: A, score_min: .nan, {MODEL}}}\n",
            "'score_min' must be a finite number",
        ),
        ("default_extra_info: {}\n", "default_extra_info"),
        (
            f"rubrics:\n  - {{id: a, rubric: A, {MODEL}}}\n  - {{id: a, rubric: B, {MODEL}}}\n",
            "Duplicate rubric id 'a'",
        ),
        ("rubrics:\n  - {id: a, rubric: A}\n", "needs a 'model_info' mapping"),
        (f"rubrics:\n  - {{id: a, rubric: A, score_min: x, {MODEL}}}\n", "'score_min' must be a number"),
        ("title: nothing here\n", "No rubric entries"),
        (f"rubrics:\n  - {{id: a, rubric: A, extra_info: {{}}, {MODEL}}}\n", "'extra_info' is not supported"),
    ],
)
def test_strict_config_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CLIError, match=message):
        suite_from(tmp_path, text)


def test_lenient_mode_skips_but_lists_invalid_entries(tmp_path: Path) -> None:
    suite = suite_from(
        tmp_path,
        f"rubrics:\n  - {{rubric: no id}}\n  - {{id: ok, rubric: A, {MODEL}}}\n"
        f"  - {{id: xi, rubric: B, extra_info: {{x: 1}}, {MODEL}}}\n",
        strict=False,
    )
    assert [entry.label for entry in suite.entries] == ["rubrics[0]", "rubrics[1]", "rubrics[2]"]
    assert suite.entries[2].raw["extra_info"] == {"x": 1}
    assert suite.available_ids() == ["ok"]
    with pytest.raises(CLIError, match="'default_extra_info' is not supported"):
        suite_from(
            tmp_path,
            f"default_extra_info: {{}}\nrubrics:\n  - {{id: ok, rubric: A, {MODEL}}}\n",
            strict=False,
        )


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: [1, *x]}\n"])
def test_recursive_yaml_aliases_are_an_error(tmp_path: Path, text: str, strict: bool) -> None:
    with pytest.raises(CLIError, match=r"\(document 1\): '.+' refers back to a node that contains it"):
        suite_from(tmp_path, f"rubrics:\n  - {{id: ok, rubric: A, {MODEL}}}\n{text}", strict=strict)


@pytest.mark.timeout(10)
def test_alias_fan_out_is_walked_once_per_node(tmp_path: Path) -> None:
    # 2**60 paths through the aliases, 61 distinct nodes: each node is walked once
    levels = ["l0: &l0 [plain, {no_rubric: here}]"]
    levels += [f"l{level}: &l{level} [*l{level - 1}, *l{level - 1}]" for level in range(1, 61)]
    entry = f"base: &e {{id: a, rubric: A, {MODEL}}}\nrubrics: [*e, {{group: [*e]}}]\n"
    suite = suite_from(tmp_path, "\n".join(levels) + "\n" + entry, strict=False)  # a walk per path never ends
    assert [entry.label for entry in suite.entries] == ["base"]  # aliases of an entry list it once
    assert suite.available_ids() == ["a"]


def test_too_deeply_nested_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CLIError, match="nested too deeply"):
        suite_from(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n", strict=False)
