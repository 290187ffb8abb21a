"""The place that imports LiteLLM.

LiteLLM is heavy (seconds of import time) and, by default, downloads its model cost map from the
internet while being imported. Every module that talks to a model calls :func:`import_litellm`
instead of ``import litellm``: the first call pins the cost map to the copy bundled with LiteLLM
(unless the user chose otherwise through ``LITELLM_LOCAL_MODEL_COST_MAP``), silences LiteLLM's
banner output, and caches the module; later calls are a dictionary lookup.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

_lock = threading.Lock()
_litellm: ModuleType | None = None


def import_litellm() -> ModuleType:
    """Return the ``litellm`` module, importing and configuring it on first use.

    Raises:
        ImportError: LiteLLM is not installed; the message says how to install it.
    """
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            try:
                import litellm
            except ImportError as exc:
                raise ImportError(
                    "LLM calls (rubric judging, LiteLLM backends) need the 'litellm' package, which is not "
                    "installed; install it with: pip install 'litellm>=1.40,<2'"
                ) from exc
            litellm.suppress_debug_info = True
            _litellm = litellm
    return _litellm


async def aimport_litellm() -> ModuleType:
    """:func:`import_litellm` for async code: the first, slow import runs in a worker thread.

    Importing LiteLLM takes seconds; doing it on the event loop would stall every other task.
    """
    if _litellm is not None:
        return _litellm
    import asyncio

    return await asyncio.to_thread(import_litellm)
