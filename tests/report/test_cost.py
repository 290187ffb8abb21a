"""Estimated cost from LiteLLM's bundled price table; unknown prices are unknowns, never errors."""

from __future__ import annotations

from osmosis_ai._litellm import import_litellm
from osmosis_ai.report.cost import estimated_cost


def test_a_priced_model_costs_its_list_price() -> None:
    price = import_litellm().model_cost["gpt-4o-mini"]
    expected = 1000 * price["input_cost_per_token"] + 500 * price["output_cost_per_token"]
    assert estimated_cost("gpt-4o-mini", 1000, 500) == expected > 0


def test_unknown_models_and_missing_figures_have_no_cost() -> None:
    assert estimated_cost("no-such-provider/no-such-model", 1000, 500) is None
    assert estimated_cost(None, 1000, 500) is None
    assert estimated_cost("gpt-4o-mini", None, 0) is None
