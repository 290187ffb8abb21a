"""Keeping user code's exceptions inside the rollout that raised them (:mod:`osmosis_ai._usercode`).

Agent code raises ``SystemExit``/``KeyboardInterrupt`` for ordinary reasons (``argparse`` in a tool
on a bad argument, a library calling ``sys.exit``), and custom ``BaseException`` subclasses slip past
every ``except Exception``; the server runs every call into the agent through :func:`contain`.
"""

from __future__ import annotations

from osmosis_ai._usercode import UserCodeRaised as AgentRaised
from osmosis_ai._usercode import contain, forget_traceback

__all__ = ["AgentRaised", "contain", "forget_traceback"]
