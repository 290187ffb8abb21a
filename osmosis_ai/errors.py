"""The error model of the Osmosis SDK.

Every error the SDK raises on purpose derives from :class:`OsmosisError`, so ``except OsmosisError``
catches them all. Where osmosis-ai 0.2 raised a builtin type (``TypeError`` for a bad reward
signature, ``RuntimeError`` for a missing API key), the new class also derives from that builtin,
so code written against 0.2 keeps catching what it caught before.

* OsmosisError
  + RewardContractError (TypeError)        a reward/rubric function breaks its contract
    - RewardSignatureError                 ... at decoration time: wrong parameters or annotations
    - RewardArgumentError                  ... at call time: wrong argument values (rubrics only)
    - RewardReturnError (ValueError)       ... at call time: not a finite real number
  + CLIError                               a command cannot proceed; the message says why and what to do
  + rubric judging (osmosis_ai.rubric_types): MissingAPIKeyError, ProviderRequestError, ModelNotFoundError
  + remote rollout (osmosis_ai.rollout): OsmosisRolloutError and its transport/server/validation/timeout kinds
"""

from __future__ import annotations


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


class CLIError(OsmosisError):
    """A command-line action cannot proceed. The message is shown to the user as ``Error: <message>``."""
