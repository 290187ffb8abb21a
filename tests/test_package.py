"""The public surface: 0.2's root names, lazy resolution, and an import that stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import osmosis_ai

# osmosis-ai 0.2's root __all__ (spec A.1), which code written for 0.2 relies on.
NAMES_FROM_0_2 = {
    "__version__",
    "osmosis_reward",
    "osmosis_rubric",
    "evaluate_rubric",
    "MissingAPIKeyError",
    "ProviderRequestError",
    "ModelNotFoundError",
    "RolloutAgentLoop",
    "RolloutContext",
    "RolloutResult",
    "RolloutRequest",
    "RolloutResponse",
    "RolloutMetrics",
    "InitResponse",
    "OpenAIFunctionToolSchema",
    "CompletionsResult",
    "OsmosisLLMClient",
    "OsmosisRolloutError",
    "OsmosisServerError",
    "OsmosisTimeoutError",
    "OsmosisTransportError",
    "OsmosisValidationError",
    "create_app",
    "get_agent_loop",
    "list_agent_loops",
    "register_agent_loop",
}
NEW_NAMES = {"aevaluate_rubric", "evaluate_rubric_batch"}
HEAVY_MODULES = (
    "litellm",
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "pyarrow",
    "fastmcp",
    "httpx",
    "aiohttp",
    "rich",
)


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; before = set(sys.modules); {statement}; print('\\n'.join(sorted(set(sys.modules) - before)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_root_all_is_0_2_names_plus_the_async_judges() -> None:
    assert set(osmosis_ai.__all__) == NAMES_FROM_0_2 | NEW_NAMES
    assert len(osmosis_ai.__all__) == len(set(osmosis_ai.__all__))


@pytest.mark.parametrize("name", sorted(set(osmosis_ai.__all__) - {"__version__"}))
def test_every_exported_name_resolves(name: str) -> None:
    value = getattr(osmosis_ai, name)
    assert getattr(value, "__name__", name) == name
    assert name in dir(osmosis_ai)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = osmosis_ai.no_such_name  # type: ignore[attr-defined]


def test_version_matches_the_constant() -> None:
    from osmosis_ai.consts import PACKAGE_VERSION

    assert osmosis_ai.__version__ == PACKAGE_VERSION


def test_a_0_3_projects_requirement_is_met_by_this_package() -> None:
    from importlib.metadata import metadata

    from packaging.requirements import Requirement

    from osmosis_ai.consts import PACKAGE_VERSION

    wanted = Requirement("osmosis-ai[server,openai-agents,strands,eval,rubric,parquet]>=0.3.1,<0.4")
    assert wanted.specifier.contains(PACKAGE_VERSION)
    offered = set(metadata("osmosis-ai").get_all("Provides-Extra") or [])
    assert wanted.extras <= offered, wanted.extras - offered


@pytest.mark.parametrize("statement", ["import osmosis_ai", "from osmosis_ai import osmosis_reward"])
def test_import_loads_only_the_standard_library(statement: str) -> None:
    loaded = _modules_after(statement)
    third_party = {name for name in loaded if name.partition(".")[0] not in sys.stdlib_module_names}
    assert {name.partition(".")[0] for name in third_party} <= {"osmosis_ai"}
    assert not {name for name in loaded if name.partition(".")[0] in HEAVY_MODULES}


@pytest.mark.parametrize("module", ["osmosis_ai.runs.answers", "osmosis_ai.cli.commands.reward"])
def test_reward_score_modules_load_only_the_standard_library(module: str) -> None:
    loaded = _modules_after(f"import {module}")
    assert {name.partition(".")[0] for name in loaded} - set(sys.stdlib_module_names) <= {"osmosis_ai"}


def test_rollout_package_import_stays_free_of_the_server_stack() -> None:
    loaded = {name.partition(".")[0] for name in _modules_after("import osmosis_ai.rollout")}
    assert not loaded & {"fastapi", "starlette", "uvicorn", "litellm", "aiohttp", "httpx"}


@pytest.mark.parametrize("module", ["osmosis_ai.report.regrade", "osmosis_ai.cli.commands.regrade"])
def test_regrade_modules_load_nothing_heavy(module: str) -> None:
    loaded = {name.partition(".")[0] for name in _modules_after(f"import {module}")}
    assert not loaded & set(HEAVY_MODULES)
