"""The import paths of osmosis-ai 0.2 whose code lives elsewhere, served from one table.

:data:`ALIASES` maps each such path to where its names live: a module name (the path *is* that
module, the same object under a second name) or ``{name: "module"}`` / ``{name: "module:attribute"}``
(a module of its own whose names resolve on first use to the objects of the live modules, never
copies). Where a path keeps behaviour rather than only names, that code is a module of this package
(``auth_credentials``, ...), which the table names like any other; 0.2's ``cli_services`` were the
command line's own services (they raise its own error), so theirs live in
:mod:`osmosis_ai.cli.rubric_services`.

:class:`AliasFinder` serves those paths to ``import``, ``from ... import`` and
``importlib.import_module``: ``import osmosis_ai`` puts :class:`osmosis_ai._aliases.LazyAliasFinder` on
``sys.meta_path``, which imports this module the first time a path no file provides is asked for.
The packages above the paths resolve them as attributes too (see
:func:`osmosis_ai._lazy.lazy_exports`). The package's own code imports the live modules, never these
paths.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

from osmosis_ai._lazy import lazy_exports
from osmosis_ai.cli.errors import NAMES_0_2 as CLI_NAMES_0_2


def _from(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, module)


# The names of the 0.2 modules under osmosis_ai.rollout.eval; its packages re-export their modules'.
_READER = {
    "REQUIRED_COLUMNS": "osmosis_ai._compat.rollout_eval",
    "DatasetReader": "osmosis_ai.runs.dataset",
    "dataset_row_to_request": "osmosis_ai.runs.executors.requests",
}
_LOCAL_EXECUTION_ERROR = {"LocalExecutionError": "osmosis_ai.errors:EvaluationError"}
_EVAL_DATASET = {
    **_READER,
    **_from("osmosis_ai.errors", "DatasetParseError", "DatasetValidationError"),
    **_LOCAL_EXECUTION_ERROR,
}
_EVAL_LLM_CLIENT = {
    "ExternalLLMClient": "osmosis_ai.runs.executors.model_client",
    **_from("osmosis_ai.models.errors", "ProviderError", "SystemicProviderError"),
}
_COMMON_DATASET = {
    **_READER,
    "REQUIRED_COLUMNS_SET": "osmosis_ai._compat.rollout_eval",
    "DatasetRow": "osmosis_ai.runs.dataset:Row",
}
_COMMON_ERRORS = {
    **_from("osmosis_ai.errors", "DatasetParseError", "DatasetValidationError", "ToolValidationError"),
    **_from("osmosis_ai.models.errors", "ProviderError", "SystemicProviderError"),
    **_LOCAL_EXECUTION_ERROR,
}
_COMMON_LLM_CLIENT = {"ExternalLLMClient": "osmosis_ai.runs.executors.model_client"}
_COMMON_RUNNER = {
    "TOOL_NAME_PATTERN": "osmosis_ai.runs.executors.local:_TOOL_NAME",
    "validate_tools": "osmosis_ai.runs.executors.local",
}
_INTERACTIVE = _from("osmosis_ai.runs.executors.interactive", "InteractiveLLMClient", "InteractiveStep")
_EVAL_FN = {
    "EvalFnError": "osmosis_ai.rewards.eval_fn",
    "EvalFnWrapper": "osmosis_ai.rewards.eval_fn",
    **_from("osmosis_ai._compat.rollout_eval", "load_eval_fn", "load_eval_fns"),
}
_REPORT = {"pass_at_k": "osmosis_ai.statistics"}
_RUBRIC_ERRORS = _from(
    "osmosis_ai.judge.errors", "MissingAPIKeyError", "ModelNotFoundError", "ProviderRequestError"
)
_RUBRIC_TYPES = _from("osmosis_ai.judge.types", "ModelInfo", "RewardRubricRunResult")
_RUBRIC_CONFIG = {
    **_from(
        "osmosis_ai.cli.rubric_services",
        "ParsedItem",
        "discover_rubric_config_path",
        "load_rubric_configs",
        "load_rubric_suite",
        "render_yaml_items",
    ),
    **_from("osmosis_ai.cli.eval_rubric.config", "RubricConfig", "RubricSuite"),
    "RubricConfigParser": "osmosis_ai.cli.rubric_services",
}
_RUBRIC_SCHEMAS = _from(
    "osmosis_ai.cli.rubric_services",
    "RubricConfigDocumentResult",
    "RubricConfigDocumentSchema",
    "BaseRubricConfigSchema",
    "Version1RubricConfigSchema",
)
_RECORDS = _from(
    "osmosis_ai.cli.rubric_services",
    "DatasetLoader",
    "DatasetRecord",
    "load_jsonl_records",
    "render_json_records",
)
_CLI_ERROR = _from("osmosis_ai.cli.errors", *CLI_NAMES_0_2)
_COMMANDS = "osmosis_ai.cli.command_objects"

ALIASES: dict[str, str | dict[str, str]] = {
    # this package's own osmosis_ai.evaluation (its parts moved to runs/, models/, rewards/ and the base)
    "osmosis_ai.evaluation": {
        "DatasetReader": "osmosis_ai.runs.dataset",
        "RawRow": "osmosis_ai.runs.dataset",
        "REQUIRED_COLUMNS": "osmosis_ai.runs.dataset",
        "count_rows": "osmosis_ai.runs.dataset",
        "iter_raw": "osmosis_ai.runs.dataset",
        "normalize_row": "osmosis_ai.runs.dataset",
        "EvaluationError": "osmosis_ai.errors",
        "DatasetError": "osmosis_ai.errors",
        "DatasetParseError": "osmosis_ai.errors",
        "DatasetNotFoundError": "osmosis_ai.errors",
        "DatasetValidationError": "osmosis_ai.errors",
        "ProviderCheckError": "osmosis_ai.models.errors",
        "ProviderError": "osmosis_ai.models.errors",
        "SystemicProviderError": "osmosis_ai.models.errors",
        "ExternalLLMClient": "osmosis_ai.runs.executors.model_client",
        "dataset_row_to_request": "osmosis_ai.runs.executors.requests",
        "classify_provider_error": "osmosis_ai.models.providers",
        "preflight": "osmosis_ai.models.providers",
        "EvalFnWrapper": "osmosis_ai.rewards.eval_fn",
        "Journal": "osmosis_ai.runs.journal",
        "SampleRecord": "osmosis_ai.runs.journal",
        "JournalError": "osmosis_ai.runs.journal",
        "JournalMismatchError": "osmosis_ai.runs.journal",
        "EvalFnError": "osmosis_ai.rewards.eval_fn",
        "Estimate": "osmosis_ai.statistics",
        "pass_at_k": "osmosis_ai.statistics",
        "wilson_interval": "osmosis_ai.statistics",
        "bootstrap_interval": "osmosis_ai.statistics",
        "paired_difference": "osmosis_ai.statistics",
        "Outcome": "osmosis_ai.outcome",
        "OutcomeCounts": "osmosis_ai.outcome",
        "verdict": "osmosis_ai.outcome",
    },
    "osmosis_ai.evaluation.outcome": "osmosis_ai.outcome",
    "osmosis_ai.evaluation.statistics": "osmosis_ai.statistics",
    "osmosis_ai.evaluation.eval_fn": "osmosis_ai.rewards.eval_fn",
    "osmosis_ai.evaluation.providers": "osmosis_ai.models.providers",
    "osmosis_ai.evaluation.dataset": "osmosis_ai.runs.dataset",
    "osmosis_ai.evaluation.journal": "osmosis_ai.runs.journal",
    "osmosis_ai.evaluation.journal_store": "osmosis_ai.runs.journal_store",
    "osmosis_ai.evaluation.summary": "osmosis_ai.runs.summary",
    "osmosis_ai.evaluation.regrade": "osmosis_ai.report.regrade",
    "osmosis_ai.evaluation.llm_client": "osmosis_ai.runs.executors.model_client",
    "osmosis_ai.evaluation.requests": "osmosis_ai.runs.executors.requests",
    "osmosis_ai.evaluation.interactive": "osmosis_ai.runs.executors.interactive",
    "osmosis_ai.evaluation.errors": {
        "EvaluationError": "osmosis_ai.errors",
        "DatasetError": "osmosis_ai.errors",
        "DatasetParseError": "osmosis_ai.errors",
        "DatasetNotFoundError": "osmosis_ai.errors",
        "DatasetValidationError": "osmosis_ai.errors",
        "ToolValidationError": "osmosis_ai.errors",
        "ProviderCheckError": "osmosis_ai.models.errors",
        "ProviderError": "osmosis_ai.models.errors",
        "SystemicProviderError": "osmosis_ai.models.errors",
        "EvalFnError": "osmosis_ai.rewards.eval_fn",
    },
    # reward decorators and the rubric judge
    "osmosis_ai.utils": _from("osmosis_ai.rewards", "osmosis_reward", "osmosis_rubric"),
    "osmosis_ai.rubric_eval": {
        "DEFAULT_REQUEST_TIMEOUT_SECONDS": "osmosis_ai.judge.routing",
        "DEFAULT_API_KEY_ENV": "osmosis_ai.judge.keys",
        **_RUBRIC_ERRORS,
        **_RUBRIC_TYPES,
        "ensure_api_key_available": "osmosis_ai.judge.keys",
        **_from("osmosis_ai.judge.evaluate", "evaluate_rubric", "aevaluate_rubric"),
        **_from("osmosis_ai.judge.batch", "evaluate_rubric_batch", "aevaluate_rubric_batch"),
    },
    "osmosis_ai.rubric_types": {**_RUBRIC_ERRORS, **_RUBRIC_TYPES},
    "osmosis_ai._litellm_compat": "osmosis_ai._compat.litellm_names",
    # the command line's classes and services
    "osmosis_ai.cli_commands": _from(
        _COMMANDS,
        "EvalRubricCommand",
        "LoginCommand",
        "LogoutCommand",
        "PreviewCommand",
        "WhoamiCommand",
        "WorkspaceCommand",
    ),
    "osmosis_ai.cli_services": {**_CLI_ERROR, **_RUBRIC_CONFIG, **_RECORDS},
    "osmosis_ai.cli_services.config": {**_RUBRIC_CONFIG, **_RUBRIC_SCHEMAS},
    "osmosis_ai.cli_services.dataset": _RECORDS,
    "osmosis_ai.cli_services.errors": _CLI_ERROR,
    # Platform login and credentials
    "osmosis_ai.auth.config": "osmosis_ai._compat.auth_config",
    "osmosis_ai.auth.credentials": "osmosis_ai._compat.auth_credentials",
    "osmosis_ai.auth.flow": "osmosis_ai._compat.auth_flow",
    "osmosis_ai.auth.local_server": "osmosis_ai._compat.auth_local_server",
    "osmosis_ai.auth.platform_client": "osmosis_ai._compat.auth_platform_client",
    # remote rollout: command-line helpers and optional dependencies
    "osmosis_ai.rollout._compat": "osmosis_ai._compat.rollout_optional",
    "osmosis_ai.rollout.cli": {
        **_CLI_ERROR,
        **_from(_COMMANDS, "EvalCommand", "ServeCommand", "TestCommand", "ValidateCommand"),
    },
    "osmosis_ai.rollout.cli_utils": "osmosis_ai.cli.loading",
    "osmosis_ai.rollout.console": _from("osmosis_ai.cli.output", "RICH_AVAILABLE", "Console", "console"),
    # local test and eval
    "osmosis_ai.rollout.eval": {**_EVAL_DATASET, **_EVAL_LLM_CLIENT},
    "osmosis_ai.rollout.eval.dataset": _EVAL_DATASET,
    "osmosis_ai.rollout.eval.llm_client": _EVAL_LLM_CLIENT,
    "osmosis_ai.rollout.eval.common": {
        **_COMMON_DATASET,
        **_COMMON_ERRORS,
        **_COMMON_LLM_CLIENT,
        **_COMMON_RUNNER,
    },
    "osmosis_ai.rollout.eval.common.dataset": _COMMON_DATASET,
    "osmosis_ai.rollout.eval.common.errors": _COMMON_ERRORS,
    "osmosis_ai.rollout.eval.common.llm_client": _COMMON_LLM_CLIENT,
    "osmosis_ai.rollout.eval.common.runner": _COMMON_RUNNER,
    "osmosis_ai.rollout.eval.evaluation": {**_EVAL_FN, **_REPORT},
    "osmosis_ai.rollout.eval.evaluation.cli": _from(_COMMANDS, "EvalCommand"),
    "osmosis_ai.rollout.eval.evaluation.eval_fn": _EVAL_FN,
    "osmosis_ai.rollout.eval.evaluation.report": _REPORT,
    "osmosis_ai.rollout.eval.test_mode": {
        **_COMMON_LLM_CLIENT,
        "ProviderError": "osmosis_ai.models.errors",
        **_INTERACTIVE,
    },
    "osmosis_ai.rollout.eval.test_mode.cli": _from(_COMMANDS, "TestCommand"),
    "osmosis_ai.rollout.eval.test_mode.interactive": _INTERACTIVE,
}

# Names a path serves that 0.2 left out of its ``__all__`` (everything else is listed).
UNLISTED: dict[str, tuple[str, ...]] = {
    "osmosis_ai.rubric_eval": (
        "DEFAULT_API_KEY_ENV",
        "ModelNotFoundError",
        "ProviderRequestError",
        "aevaluate_rubric",
        "aevaluate_rubric_batch",
        "evaluate_rubric_batch",
    ),
}


class AliasFinder:
    """The ``sys.meta_path`` finder and loader of the paths in :data:`ALIASES`."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in ALIASES:
            return None
        is_package = any(other.startswith(fullname + ".") for other in ALIASES)
        return ModuleSpec(fullname, cls, is_package=is_package)  # type: ignore[arg-type]

    @staticmethod
    def create_module(spec: ModuleSpec) -> None:
        return None  # the default module, filled (or replaced) by exec_module

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        name = module.__name__
        target = ALIASES[name]
        if isinstance(target, str):
            # The import system returns what sys.modules holds once this returns: the live module.
            sys.modules[name] = importlib.import_module(target)
            return
        unlisted = UNLISTED.get(name, ())
        getattr_, dir_ = lazy_exports(name, target, vars(module))
        vars(module).update(
            __doc__=f"osmosis-ai 0.2's import path {name}, served by osmosis_ai._compat.",
            __all__=[export for export in target if export not in unlisted],
            __getattr__=getattr_,
            __dir__=dir_,
        )
