"""0.3's framework integrations. Each lives in its own module and is imported from there
(``osmosis_ai.rollout.integrations.agents.strands``, say), so one framework never becomes a
dependency of another's users."""

__all__: list[str] = []
