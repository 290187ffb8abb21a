"""Estimated cost of a run's tokens from LiteLLM's price table.

The table is LiteLLM's bundled copy (``osmosis_ai._litellm`` pins it: no network). LiteLLM is
imported only when there is a model name and tokens to price and the table may list the model
(:func:`_may_be_listed`): importing it takes seconds, and a self-hosted model (vLLM at a base URL,
the scripted solver) is priced by no entry. Any failure — LiteLLM missing, a model it has no
price for — gives ``None``: the report says "unknown", it never fails for this.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

_TABLE = "model_prices_and_context_window_backup.json"


def estimated_cost(
    model: str | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """US dollars for the tokens at ``model``'s list price, or ``None`` when that is not known."""
    if not model or not (prompt_tokens or completion_tokens) or not _may_be_listed(model):
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


def _may_be_listed(model: str) -> bool:
    """Whether LiteLLM may price ``model``: an entry of its bundled table ends with the model's name
    (its lookups try the name with and without a provider). A fine-tune (``[openai/]ft:BASE:...``) and a
    LiteLLM this process already imported (user code may have registered prices with it) are
    always asked."""
    if "litellm" in sys.modules or "ft:" in model:
        return True
    names = _listed_names()
    return True if names is None else model.rsplit("/", 1)[-1].lower() in names


@functools.lru_cache(maxsize=1)
def _listed_names() -> frozenset[str] | None:
    """The last ``/`` part of every entry of LiteLLM's bundled price table, read from the file (30 ms,
    not the import's seconds); empty without LiteLLM, ``None`` if the file cannot be read."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return frozenset()
    try:
        table = json.loads((Path(spec.origin).parent / _TABLE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        logger.debug("cannot read LiteLLM's price table: %s", exc)
        return None
    return frozenset(str(name).rsplit("/", 1)[-1].lower() for name in table)
