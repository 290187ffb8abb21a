"""Adapters for agent frameworks: ``.openai_agents`` (the OpenAI Agents SDK, extra ``openai-agents``)
and ``.strands`` (Strands Agents, extra ``strands``). Import the one you use; this package imports
neither."""

__all__: list[str] = []
