"""Estimated cost of a run's tokens from LiteLLM's price table.

The table is LiteLLM's bundled copy (``osmosis_ai._litellm`` pins it: no network). LiteLLM is
imported only when there is a model name and tokens to price, and any failure — LiteLLM missing,
a model it has no price for — gives ``None``: the report says "unknown", it never fails for this.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def estimated_cost(
    model: str | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """US dollars for the tokens at ``model``'s list price, or ``None`` when that is not known."""
    if not model or not (prompt_tokens or completion_tokens):
        return None
    from osmosis_ai.models.complete import SCRIPTED

    if model == SCRIPTED:  # offline and free: no need of LiteLLM's seconds of import to find no price
        return None
    try:
        from osmosis_ai._litellm import import_litellm

        litellm = import_litellm()
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens or 0, completion_tokens=completion_tokens or 0
        )
        return float(prompt_cost) + float(completion_cost)
    except Exception as exc:  # a price the table does not have is an unknown, never an error
        logger.debug("no price for %s: %s", model, exc)
        return None
