"""Model-written code run safely: ``await run(code, tests=...)`` -> a typed :class:`SandboxResult`.

The local tier isolates each run with bubblewrap (namespaces, read-only binds, tmpfs, rlimits);
remote tiers (``provider="e2b"``, ``"modal"``, or a :class:`RemoteProvider` registered by entry
point) run it in a provider's sandbox; :class:`SandboxPool` runs many at once in local sandboxes
started ahead of them; :func:`probe` says what this machine offers and which tier is in force. ``code_tests_reward`` is a
ready reward scoring a fenced code block against a row's asserts. docs/design/sandbox.md has the
threat model; docs/guides/rewards.md the reward pattern.
"""

from __future__ import annotations

from osmosis_ai._lazy import lazy_exports

_EXPORTS = {
    "run": "osmosis_ai.sandbox.api",
    "run_sync": "osmosis_ai.sandbox.api",
    "SandboxPool": "osmosis_ai.sandbox.pool",
    "SandboxResult": "osmosis_ai.sandbox.result",
    "SandboxOutcome": "osmosis_ai.sandbox.result",
    "OUTPUT_LIMIT": "osmosis_ai.sandbox.result",
    "probe": "osmosis_ai.sandbox.machine",
    "Machine": "osmosis_ai.sandbox.machine",
    "RemoteProvider": "osmosis_ai.sandbox.remote",
    "Executed": "osmosis_ai.sandbox.remote",
    "ProviderFailure": "osmosis_ai.sandbox.remote",
    "code_tests_reward": "osmosis_ai.sandbox.reward",
    "extract_code": "osmosis_ai.sandbox.reward",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
