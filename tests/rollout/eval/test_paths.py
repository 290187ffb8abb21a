"""``osmosis_ai.rollout.eval.*``: every 0.2 name we keep imports from its 0.2 path and is our object."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from osmosis_ai.evaluation import errors, interactive, statistics
from osmosis_ai.rollout.eval.evaluation import EvalFnError, EvalFnWrapper, load_eval_fn, load_eval_fns

from osmosis_ai import evaluation
from osmosis_ai.runs.executors import local

# 0.2 path -> {name: the object of this design it must be}
PATHS: dict[str, dict[str, object]] = {
    "osmosis_ai.rollout.eval.common.dataset": {
        "DatasetReader": evaluation.DatasetReader,
        "dataset_row_to_request": evaluation.dataset_row_to_request,
    },
    "osmosis_ai.rollout.eval.common.errors": {
        "DatasetParseError": errors.DatasetParseError,
        "DatasetValidationError": errors.DatasetValidationError,
        "LocalExecutionError": errors.EvaluationError,
        "ProviderError": errors.ProviderError,
        "SystemicProviderError": errors.SystemicProviderError,
        "ToolValidationError": errors.ToolValidationError,
    },
    "osmosis_ai.rollout.eval.common.llm_client": {"ExternalLLMClient": evaluation.ExternalLLMClient},
    "osmosis_ai.rollout.eval.common.runner": {"validate_tools": local.validate_tools},
    "osmosis_ai.rollout.eval.test_mode.interactive": {
        "InteractiveLLMClient": interactive.InteractiveLLMClient,
        "InteractiveStep": interactive.InteractiveStep,
    },
    "osmosis_ai.rollout.eval.evaluation.eval_fn": {
        "EvalFnError": errors.EvalFnError,
        "EvalFnWrapper": evaluation.EvalFnWrapper,
    },
    "osmosis_ai.rollout.eval.evaluation.report": {"pass_at_k": statistics.pass_at_k},
}
OURS = {name: obj for names in PATHS.values() for name, obj in names.items()}
PACKAGES = {
    "osmosis_ai.rollout.eval.common": [
        *PATHS["osmosis_ai.rollout.eval.common.dataset"],
        *PATHS["osmosis_ai.rollout.eval.common.errors"],
        "ExternalLLMClient",
        "validate_tools",
    ],
    "osmosis_ai.rollout.eval.test_mode": [
        "ExternalLLMClient",
        "ProviderError",
        "InteractiveLLMClient",
        "InteractiveStep",
    ],
    "osmosis_ai.rollout.eval.evaluation": ["EvalFnError", "EvalFnWrapper", "pass_at_k"],
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_name_is_our_object_at_its_0_2_path(path: str) -> None:
    module = importlib.import_module(path)
    for name, ours in PATHS[path].items():
        assert getattr(module, name) is ours, f"{path}.{name}"
    assert set(PATHS[path]) <= set(module.__all__)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_package_exports_its_modules_names(package: str) -> None:
    module = importlib.import_module(package)
    for name in PACKAGES[package]:
        assert getattr(module, name) is OURS[name], f"{package}.{name}"
    assert set(PACKAGES[package]) <= set(module.__all__)


def test_common_also_has_0_2_required_columns_and_row_type() -> None:
    from osmosis_ai.rollout.eval.common import REQUIRED_COLUMNS, DatasetRow

    from osmosis_ai.runs.dataset import Row

    assert REQUIRED_COLUMNS == ["ground_truth", "user_prompt", "system_prompt"]
    assert DatasetRow is Row


def test_importing_the_0_2_paths_loads_no_heavy_dependency() -> None:
    modules = sorted(PATHS) + sorted(PACKAGES)
    script = textwrap.dedent(
        f"""
        import importlib, json, sys
        for name in {modules!r}:
            importlib.import_module(name)
        heavy = ("litellm", "fastapi", "uvicorn", "pyarrow", "rich", "httpx", "openai")
        print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_load_eval_fns_wraps_each_spec_under_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_evals_0_2.py").write_text(
        "def exact(solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str == ground_truth)\n"
        "LIMIT = 3\n"
    )
    monkeypatch.chdir(tmp_path)
    wrapped = load_eval_fns(["my_evals_0_2:exact"])
    assert [(w.name, w.mode) for w in wrapped] == [("my_evals_0_2:exact", "simple")]
    assert isinstance(wrapped[0], EvalFnWrapper) and load_eval_fn("my_evals_0_2:exact") is wrapped[0].fn
    with pytest.raises(EvalFnError, match="more than once"):
        load_eval_fns(["my_evals_0_2:exact", "my_evals_0_2:exact"])
    with pytest.raises(EvalFnError, match="not a callable"):
        load_eval_fn("my_evals_0_2:LIMIT")
    with pytest.raises(EvalFnError, match="no attribute 'missing'"):
        load_eval_fn("my_evals_0_2:missing")
    with pytest.raises(EvalFnError, match=r"module\.path:function"):
        load_eval_fn("my_evals_0_2")
