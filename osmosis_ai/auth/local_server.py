"""The 0.2 module name of the login callback server: see :mod:`osmosis_ai.auth.callback`."""

from __future__ import annotations

from osmosis_ai.auth.callback import CallbackOutcome, CallbackServer

__all__ = ["CallbackOutcome", "CallbackServer"]
