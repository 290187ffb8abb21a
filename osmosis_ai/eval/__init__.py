"""0.3's evaluation namespace: ``osmosis_ai.eval.rubric.evaluate_rubric`` (async, keyword-only)."""
