"""Keeping user code's exceptions inside the rollout that raised them.

asyncio treats ``SystemExit`` and ``KeyboardInterrupt`` raised in a task as the process's own: it
re-raises them out of the event loop, which stops the server with every other rollout in it. Agent
code raises them for ordinary reasons (``argparse`` in a tool on a bad argument, a library calling
``sys.exit``), and custom ``BaseException`` subclasses slip past every ``except Exception``.
:func:`contain` turns all of these into :class:`AgentRaised`, an ordinary exception, before they leave
the task running the user's code.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class AgentRaised(Exception):
    """User code raised a ``BaseException`` that is not an ``Exception`` (``SystemExit``, ...)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        self.original = exc


def forget_traceback(exc: BaseException) -> None:
    """Drop the frames a handled exception keeps alive.

    A traceback holds every frame of the failed call with its locals, often in a reference cycle
    that only the cyclic collector frees; with the server's tuned collector thousands of failed
    rollouts would pile up between full collections.
    """
    tb = exc.__traceback__
    if tb is not None:
        traceback.clear_frames(tb)
        exc.__traceback__ = None


async def contain(call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``; a ``BaseException`` it raises (but cancellation) comes back as :class:`AgentRaised`.

    Run inside its own task, this is what keeps ``SystemExit``/``KeyboardInterrupt`` from reaching
    the event loop, which asyncio re-raises them into.
    """
    try:
        return await call()
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:
        raise AgentRaised(exc) from None
