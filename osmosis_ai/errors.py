"""The error model of the Osmosis SDK.

Every error the SDK raises on purpose derives from :class:`OsmosisError`, so ``except OsmosisError``
catches them all. Where callers of the public API already catch a builtin exception for the same
situation (``TypeError`` for a bad reward signature, ``RuntimeError`` for a missing API key), the
class also derives from that builtin, so their ``except TypeError:`` keeps working
(docs/compatibility.md).

The whole tree, with builtin bases in parentheses and the defining module on the right. Private
helper bases (``_Name``) are left out. ``tests/test_errors.py`` checks this drawing against the
classes that exist, both ways, so a new error class means a new line here::

    OsmosisError                                    osmosis_ai.errors
    ├── RewardContractError (TypeError)             osmosis_ai.errors
    │   ├── RewardSignatureError                    osmosis_ai.errors
    │   ├── RewardArgumentError                     osmosis_ai.errors
    │   └── RewardReturnError (ValueError)          osmosis_ai.errors
    ├── JudgeInputError (TypeError)                 osmosis_ai.judge.errors
    ├── ScoreRangeError (ValueError)                osmosis_ai.judge.errors
    ├── JudgeSettingError (ValueError)              osmosis_ai.judge.errors
    ├── VerdictError (ValueError)                   osmosis_ai.judge.errors
    ├── MissingAPIKeyError (RuntimeError)           osmosis_ai.judge.errors
    ├── ProviderRequestError (RuntimeError)         osmosis_ai.judge.errors
    │   ├── ModelNotFoundError                      osmosis_ai.judge.errors
    │   └── JudgeTimeoutError (TimeoutError)        osmosis_ai.judge.errors
    ├── ModelCallError                              osmosis_ai.models.errors
    ├── ModelRouteError (ValueError)                osmosis_ai.models.errors
    ├── OsmosisRolloutError                         osmosis_ai.rollout.core.exceptions
    │   ├── OsmosisTransportError                   osmosis_ai.rollout.core.exceptions
    │   ├── OsmosisServerError                      osmosis_ai.rollout.core.exceptions
    │   ├── OsmosisValidationError                  osmosis_ai.rollout.core.exceptions
    │   ├── OsmosisTimeoutError                     osmosis_ai.rollout.core.exceptions
    │   ├── AgentLoopNotFoundError                  osmosis_ai.rollout.core.exceptions
    │   ├── AgentLoopDefinitionError (TypeError)    osmosis_ai.rollout.core.exceptions
    │   ├── RolloutValueError (ValueError)          osmosis_ai.rollout.core.exceptions
    │   ├── ToolExecutionError                      osmosis_ai.rollout.core.exceptions
    │   │   └── ToolArgumentError                   osmosis_ai.rollout.core.exceptions
    │   ├── AgentLoopValidationError                osmosis_ai.rollout.validator
    │   ├── MCPLoadError                            osmosis_ai.rollout.mcp.errors
    │   ├── PublicIPDetectionError                  osmosis_ai.rollout.network
    │   └── SharedStateUnavailable                  osmosis_ai.rollout.server.errors
    ├── ServeError                                  osmosis_ai.rollout.server.errors
    │   └── ServerStartError                        osmosis_ai.rollout.server.errors
    ├── AnswersError (ValueError)                   osmosis_ai.runs.earlier
    ├── WorkspaceError (ValueError)                 osmosis_ai.rollout.workspace
    ├── LoadError                                   osmosis_ai.rollout.loading
    │   └── UserCodeError                           osmosis_ai.rollout.loading
    ├── EvaluationError                             osmosis_ai.errors
    │   ├── DatasetError (ValueError)               osmosis_ai.errors
    │   │   ├── DatasetParseError                   osmosis_ai.errors
    │   │   │   └── DatasetNotFoundError (FileNotFoundError)   osmosis_ai.errors
    │   │   └── DatasetValidationError              osmosis_ai.errors
    │   ├── EvalFnError                             osmosis_ai.rewards.eval_fn
    │   ├── JournalError                            osmosis_ai.runs.journal
    │   │   ├── JournalCorruptError                 osmosis_ai.runs.journal
    │   │   ├── JournalMismatchError                osmosis_ai.runs.journal
    │   │   └── JournalLockedError                  osmosis_ai.runs.journal
    │   ├── PlanError (ValueError)                  osmosis_ai.runs.run
    │   ├── ProviderCheckError                      osmosis_ai.models.errors
    │   ├── ProviderError                           osmosis_ai.models.errors
    │   │   └── SystemicProviderError               osmosis_ai.models.errors
    │   └── ToolValidationError (ValueError)        osmosis_ai.errors
    ├── AuthError                                   osmosis_ai.auth.errors
    │   ├── LoginError                              osmosis_ai.auth.errors
    │   ├── PlatformURLError (ValueError)           osmosis_ai.auth.errors
    │   ├── CredentialsStoreError                   osmosis_ai.auth.errors
    │   │   ├── UnreadableCredentialsError          osmosis_ai.auth.errors
    │   │   └── KeyringTokenError                   osmosis_ai.auth.errors
    │   ├── PlatformAPIError                        osmosis_ai.auth.errors
    │   └── AuthenticationExpiredError              osmosis_ai.auth.errors
    ├── ReportInputError (ValueError)               osmosis_ai.report.errors
    ├── RayBackendError                             osmosis_ai.runs.backends.ray
    ├── ExperimentLogError                          osmosis_ai.observe.loggers
    ├── InfrastructureError                         osmosis_ai.errors
    ├── SandboxSettingError (ValueError)            osmosis_ai.errors
    ├── TrainingError                               osmosis_ai.errors
    ├── RewardRuntimeError (RuntimeError)           osmosis_ai.rewards.runtime.errors
    │   ├── RewardLoadError (ValueError)            osmosis_ai.rewards.runtime.errors
    │   ├── RewardSettingError (ValueError)         osmosis_ai.rewards.runtime.errors
    │   ├── RewardInputError (ValueError)           osmosis_ai.rewards.runtime.errors
    │   └── WorkerStartError                        osmosis_ai.rewards.runtime.errors
    └── TrainGateError                              osmosis_ai.traingate.errors
        ├── PolicyError                             osmosis_ai.traingate.errors
        ├── InitRejected                            osmosis_ai.traingate.launcher
        ├── ResultRefused                           osmosis_ai.traingate.launcher03
        ├── ServerKeyRefused                        osmosis_ai.traingate.launcher
        └── ServerUnreachable                       osmosis_ai.traingate.launcher

What each one means is in its class docstring. In short: the ``Reward*`` errors are a reward
function breaking its contract; the judge errors are bad arguments, an unusable reply or a failed
provider call; ``ModelCallError`` is a model call failing, classified by the model seam (the judge,
the local runs and the TrainGate policy turn it into their own errors), ``ModelRouteError`` a model
name and base URL that name nothing callable; the rollout errors are the
agent-side SDK (calls to TrainGate, agent-loop definition, tools); ``AuthError`` and its children
are Platform login, stored credentials and Platform calls; ``ServeError`` is a server that cannot
start; the evaluation errors are the shared dataset reader's, the model client's, the eval
functions' and the run journal's; the TrainGate errors are the local trainer's;
``ReportInputError`` is a results file the HTML report cannot read; ``RayBackendError`` is
``--backend ray`` unable to run (no ``ray``, no cluster, other versions, every worker gone);
``ExperimentLogError`` a run that ``--log-to`` could not send to its tracker; the ``RewardRuntimeError``
family is the reward runtime's (a reward that cannot be loaded, bad settings or rows, worker
processes that cannot start; a reward failing on a sample is an outcome).
``InfrastructureError`` is raised by a reward (or eval function) whose own machinery failed, such as
a sandbox that cannot start: the sample ends ``infra_error``, never a score.
``SandboxSettingError`` is a bad argument to ``osmosis_ai.sandbox.run``.
``TrainingError`` is a training job (``osmosis_ai.train.job``) that cannot start or produced nothing
to train on.
The command line's own error class lives in ``osmosis_ai/cli/errors.py``
(an application error, not part of this tree): library code never raises it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported: the reward decorators import this module
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


class OsmosisError(Exception):
    """Root of every error raised on purpose by the Osmosis SDK."""


class RewardContractError(OsmosisError, TypeError):
    """A function decorated with ``@osmosis_reward``/``@osmosis_rubric`` breaks its contract.

    ``function_name`` names the offending function.
    """

    def __init__(self, message: str, *, function_name: str = "") -> None:
        super().__init__(message)
        self.function_name = function_name


class RewardSignatureError(RewardContractError):
    """The decorated function's parameters or annotations are not the required ones."""


class RewardArgumentError(RewardContractError):
    """A rubric function was called with argument values its contract does not allow."""


class RewardReturnError(RewardContractError, ValueError):
    """A reward function returned something other than a finite real number."""


class InfrastructureError(OsmosisError):
    """The machinery a score depends on failed (a sandbox that cannot start), not the thing scored.

    A reward or eval function raises it to say so: the reward runtime and the scorer end that
    sample ``infra_error`` (docs/guides/rewards.md), which fails the run and is never scored 0.
    """


class TrainingError(OsmosisError):
    """A training job cannot run: a model that does not load, a setting the trainer refuses, or a
    run in which no rollout could be trained on (every one a typed failure)."""


class SandboxSettingError(OsmosisError, ValueError):
    """An argument of ``osmosis_ai.sandbox.run`` that cannot be used (the message names it)."""


class EvaluationError(OsmosisError):
    """A local run (``osmosis rollout run``, ``test``, ``eval``) cannot do what was asked."""


_UNSET: Any = object()  # "no value given", as distinct from None


class DatasetError(EvaluationError, ValueError):
    """A dataset file cannot be read, or one of its rows breaks the dataset format.

    ``row`` is the 0-based row index (blank JSONL lines and the CSV header do not count), ``line``
    the 1-based line of a JSONL file, ``column`` the column concerned and ``value`` its value, each
    ``None`` when the error is not about one row, line or column. The positional arguments are
    any exception's (``DatasetParseError()``, ``DatasetParseError("what", detail)``), as in 0.2.
    """

    def __init__(
        self,
        *args: object,
        path: str | Path | None = None,
        row: int | None = None,
        line: int | None = None,
        column: str | None = None,
        value: Any = _UNSET,
    ) -> None:
        from pathlib import Path

        super().__init__(*args)
        self.path = None if path is None else Path(path)
        self.row = row
        self.line = line
        self.column = column
        self.has_value = value is not _UNSET
        self.value = None if value is _UNSET else value


class DatasetParseError(DatasetError):
    """The file is not a readable dataset: unknown format, bad JSON, bad CSV, unreadable Parquet."""


class DatasetNotFoundError(DatasetParseError, FileNotFoundError):
    """The dataset file does not exist (also a ``FileNotFoundError``)."""


class DatasetValidationError(DatasetError):
    """A row is readable but breaks the column rules (missing, null, non-string or blank value)."""


class ToolValidationError(EvaluationError, ValueError):
    """An agent's tool list breaks the function-tool schema; the row ends as the agent's error."""
