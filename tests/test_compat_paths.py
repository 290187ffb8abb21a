"""osmosis-ai 0.2's import paths, served by ``osmosis_ai._compat`` from its alias table.

Each path imports, is served by the finder, exports what it exported in 0.2, and its names are the
live objects (never copies). No module file of the tree sits at one of these paths, and the
package's own code never imports through one.
"""

from __future__ import annotations

import ast
import importlib
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from osmosis_ai._compat import ALIASES, AliasFinder
from osmosis_ai.cli.rubric_services import ParsedItem
from osmosis_ai.judge.errors import MissingAPIKeyError
from osmosis_ai.judge.types import ModelInfo
from tests.support.package_source import PACKAGE, XDIST_GROUP, package_trees

# Each 0.2 path's __all__ (None: the module had none), written out independently of the table.
ALL_0_2: dict[str, str | None] = {
    "osmosis_ai.utils": "osmosis_reward osmosis_rubric",
    "osmosis_ai.rubric_eval": "DEFAULT_REQUEST_TIMEOUT_SECONDS MissingAPIKeyError ModelInfo "
    "RewardRubricRunResult ensure_api_key_available evaluate_rubric",
    "osmosis_ai.rubric_types": "MissingAPIKeyError ModelInfo ModelNotFoundError ProviderRequestError "
    "RewardRubricRunResult",
    "osmosis_ai._litellm_compat": "APIConnectionError APIError AuthenticationError BudgetExceededError "
    "ContextWindowExceededError NotFoundError RateLimitError Timeout acompletion completion",
    "osmosis_ai.cli_commands": "EvalRubricCommand LoginCommand LogoutCommand PreviewCommand WhoamiCommand "
    "WorkspaceCommand",
    "osmosis_ai.cli_services": "CLIError DatasetLoader DatasetRecord ParsedItem RubricConfig "
    "RubricConfigParser RubricSuite discover_rubric_config_path load_jsonl_records load_rubric_configs "
    "load_rubric_suite render_json_records render_yaml_items",
    "osmosis_ai.cli_services.config": "BaseRubricConfigSchema ParsedItem RubricConfig "
    "RubricConfigDocumentResult RubricConfigDocumentSchema RubricConfigParser RubricSuite "
    "Version1RubricConfigSchema discover_rubric_config_path load_rubric_configs load_rubric_suite "
    "render_yaml_items",
    "osmosis_ai.cli_services.dataset": "DatasetLoader DatasetRecord load_jsonl_records render_json_records",
    "osmosis_ai.cli_services.errors": "CLIError",
    "osmosis_ai.auth.config": "CALLBACK_PORTS CONFIG_DIR CREDENTIALS_FILE CREDENTIALS_VERSION "
    "DEFAULT_PLATFORM_URL DEFAULT_TOKEN_EXPIRY_DAYS LOCAL_SERVER_PORT_END LOCAL_SERVER_PORT_START PLATFORM_URL",
    "osmosis_ai.auth.credentials": "CredentialsStore OrganizationInfo UserInfo WorkspaceCredentials "
    "delete_credentials delete_workspace_credentials get_active_workspace get_all_workspaces "
    "get_valid_credentials load_credentials save_credentials set_active_workspace",
    "osmosis_ai.auth.flow": "LoginError LoginResult login",
    "osmosis_ai.auth.local_server": "AuthCallbackHandler CallbackOutcome CallbackServer LocalAuthServer "
    "find_available_port",
    "osmosis_ai.auth.platform_client": "AuthenticationExpiredError PlatformAPIError platform_request",
    "osmosis_ai.rollout._compat": None,
    "osmosis_ai.rollout.cli": "CLIError EvalCommand ServeCommand TestCommand ValidateCommand",
    "osmosis_ai.rollout.cli_utils": "CLIError agent_digest agent_spec load_agent load_agent_loop "
    "load_attribute load_reward source_digest",
    "osmosis_ai.rollout.console": "Console RICH_AVAILABLE console",
    "osmosis_ai.rollout.eval": "DatasetParseError DatasetReader DatasetValidationError ExternalLLMClient "
    "LocalExecutionError ProviderError REQUIRED_COLUMNS SystemicProviderError dataset_row_to_request",
    "osmosis_ai.rollout.eval.dataset": "DatasetParseError DatasetReader DatasetValidationError "
    "LocalExecutionError REQUIRED_COLUMNS dataset_row_to_request",
    "osmosis_ai.rollout.eval.llm_client": "ExternalLLMClient ProviderError SystemicProviderError",
    "osmosis_ai.rollout.eval.common": "DatasetParseError DatasetReader DatasetRow DatasetValidationError "
    "ExternalLLMClient LocalExecutionError ProviderError REQUIRED_COLUMNS REQUIRED_COLUMNS_SET "
    "SystemicProviderError TOOL_NAME_PATTERN ToolValidationError dataset_row_to_request validate_tools",
    "osmosis_ai.rollout.eval.common.dataset": "DatasetReader DatasetRow REQUIRED_COLUMNS "
    "REQUIRED_COLUMNS_SET dataset_row_to_request",
    "osmosis_ai.rollout.eval.common.errors": "DatasetParseError DatasetValidationError LocalExecutionError "
    "ProviderError SystemicProviderError ToolValidationError",
    "osmosis_ai.rollout.eval.common.llm_client": "ExternalLLMClient",
    "osmosis_ai.rollout.eval.common.runner": "TOOL_NAME_PATTERN validate_tools",
    "osmosis_ai.rollout.eval.evaluation": "EvalFnError EvalFnWrapper load_eval_fn load_eval_fns pass_at_k",
    "osmosis_ai.rollout.eval.evaluation.cli": "EvalCommand",
    "osmosis_ai.rollout.eval.evaluation.eval_fn": "EvalFnError EvalFnWrapper load_eval_fn load_eval_fns",
    "osmosis_ai.rollout.eval.evaluation.report": "pass_at_k",
    "osmosis_ai.rollout.eval.test_mode": "ExternalLLMClient InteractiveLLMClient InteractiveStep ProviderError",
    "osmosis_ai.rollout.eval.test_mode.cli": "TestCommand",
    "osmosis_ai.rollout.eval.test_mode.interactive": "InteractiveLLMClient InteractiveStep",
}
# This package's own earlier osmosis_ai.evaluation, whose parts moved to runs/, models/, rewards/ and
# the base modules: the package's names, and each submodule as the live module it became ("live").
EARLIER: dict[str, str | None] = {
    "osmosis_ai.evaluation": "DatasetError DatasetNotFoundError DatasetParseError DatasetReader DatasetValidationError Estimate EvalFnError EvalFnWrapper EvaluationError ExternalLLMClient Journal JournalError JournalMismatchError Outcome OutcomeCounts ProviderCheckError ProviderError REQUIRED_COLUMNS RawRow SampleRecord SystemicProviderError bootstrap_interval classify_provider_error count_rows dataset_row_to_request iter_raw normalize_row paired_difference pass_at_k preflight verdict wilson_interval",
    "osmosis_ai.evaluation.errors": "DatasetError DatasetNotFoundError DatasetParseError DatasetValidationError "
    "EvalFnError EvaluationError ProviderCheckError ProviderError SystemicProviderError ToolValidationError",
    **{
        f"osmosis_ai.evaluation.{name}": "live"
        for name in [
            "dataset",
            "eval_fn",
            "interactive",
            "journal",
            "journal_store",
            "llm_client",
            "outcome",
            "providers",
            "regrade",
            "requests",
            "statistics",
            "summary",
        ]
    },
}
# Public names a 0.2 path served without listing them in its __all__.
ALSO_0_2: dict[str, str] = {
    "osmosis_ai.rubric_eval": "DEFAULT_API_KEY_ENV ModelNotFoundError ProviderRequestError aevaluate_rubric "
    "aevaluate_rubric_batch evaluate_rubric_batch",
    "osmosis_ai.rollout._compat": "FASTAPI_AVAILABLE PYDANTIC_SETTINGS_AVAILABLE UVICORN_AVAILABLE "
    "import_optional require_optional",
}


def _live(source: str, name: str) -> object:
    module, _, attribute = source.partition(":")
    return getattr(importlib.import_module(module), attribute or name)


def test_the_table_serves_exactly_the_0_2_paths() -> None:
    assert set(ALIASES) == set(ALL_0_2) | set(EARLIER)


@pytest.mark.parametrize("path", sorted(ALIASES))
def test_each_path_is_served_by_the_finder_with_its_0_2_names(path: str) -> None:
    assert AliasFinder.find_spec(path) is not None
    module = importlib.import_module(path)
    assert sys.modules[path] is module
    target = ALIASES[path]
    if isinstance(target, str):  # the path is the live module itself
        assert module is importlib.import_module(target)
    else:
        assert module.__loader__ is AliasFinder
        for name, source in target.items():
            assert getattr(module, name) is _live(source, name), f"{path}.{name}"
    listed = {**ALL_0_2, **EARLIER}[path]
    if listed == "live":
        return
    if listed is None:
        assert not hasattr(module, "__all__")
    else:
        assert sorted(module.__all__) == listed.split()
    for name in [*(listed or "").split(), *ALSO_0_2.get(path, "").split()]:
        assert getattr(module, name) is not None, f"{path}.{name}"


@pytest.mark.parametrize("path", sorted(ALIASES))
def test_no_module_file_sits_at_an_aliased_path(path: str) -> None:
    relative = Path(*path.split(".")[1:])
    assert not (PACKAGE / relative).with_suffix(".py").exists()
    assert not (PACKAGE / relative).exists()


@pytest.mark.xdist_group(XDIST_GROUP)  # on the worker that parses the package for the layers' tests
def test_the_package_never_imports_through_an_aliased_path() -> None:
    offenders = []
    for file, tree in package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            offenders += [f"{file.relative_to(PACKAGE)}: {name}" for name in names if name in ALIASES]
    assert offenders == []


def test_paths_resolve_as_attributes_and_through_every_import_form_in_a_fresh_interpreter() -> None:
    # Fresh: nothing of the tests has imported an alias yet, so each form goes through the finder.
    script = textwrap.dedent(
        f"""
        import importlib, sys
        import osmosis_ai, osmosis_ai.rollout, osmosis_ai.auth
        assert "osmosis_ai._compat" not in sys.modules  # the table loads when a 0.2 path is first used
        assert osmosis_ai.rollout.console.console is importlib.import_module("osmosis_ai.cli.output").console
        from osmosis_ai.cli_services.dataset import load_jsonl_records
        import osmosis_ai.rollout.eval.common.errors
        assert osmosis_ai.rollout.eval.common.errors.LocalExecutionError.__name__ == "EvaluationError"
        from osmosis_ai.rollout.eval.evaluation import *
        assert pass_at_k.__module__ == "osmosis_ai.statistics"
        from osmosis_ai.auth import credentials
        for path in {sorted(ALIASES)!r}:
            parent, _, child = path.rpartition(".")
            assert getattr(importlib.import_module(parent), child) is sys.modules[path], path
        assert sys.meta_path.count(osmosis_ai._aliases.LazyAliasFinder) == 1
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_0_2_pickle_naming_an_aliased_path_loads_the_live_class() -> None:
    # Protocol 0 spells the global as 0.2 pickled it: module path, newline, class name.
    assert pickle.loads(b"cosmosis_ai.rubric_types\nMissingAPIKeyError\np0\n.") is MissingAPIKeyError
    assert pickle.loads(b"cosmosis_ai.rubric_eval\nModelInfo\np0\n.") is ModelInfo
    item = ParsedItem("label", {"score": 1})
    assert pickle.loads(pickle.dumps(item)) == item


def test_an_unknown_name_of_an_aliased_module_is_an_attribute_error() -> None:
    module = importlib.import_module("osmosis_ai.rollout.eval.common")
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name
    assert "validate_tools" in dir(module)
