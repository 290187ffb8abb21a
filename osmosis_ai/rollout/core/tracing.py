"""Per-rollout JSONL debug traces, written off the event loop.

``RolloutContext.log_event`` serialises the event on the caller's thread (cheap) and hands the file
append to one process-wide writer thread, so the event loop never blocks on disk and lines of one
rollout stay in order. The hand-off is bounded: past ``MAX_PENDING_WRITES`` queued lines new events
are dropped with a warning instead of growing memory without limit.

File names come from the untrusted ``rollout_id`` and are sanitised by ``safe_trace_filename``: a
plain id (letters, digits, ``.``, ``_``, ``-``; at most 128 characters; not starting with a dot) is
used as is, anything else is rewritten and suffixed with a hash, so no id can escape the directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import threading
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor

logger = logging.getLogger(__name__)

MAX_PENDING_WRITES = 10_000
_MAX_PLAIN_NAME = 128
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_pending = 0
_dropped = 0


def safe_trace_filename(rollout_id: str) -> str:
    """Return ``<name>.jsonl`` for ``rollout_id``: never a path, never hidden, distinct per id."""
    cleaned = _UNSAFE_CHARS.sub("_", rollout_id).lstrip(".")
    if cleaned == rollout_id and 0 < len(cleaned) <= _MAX_PLAIN_NAME:
        return f"{cleaned}.jsonl"
    digest = hashlib.sha256(rollout_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stem = f"{cleaned[:100]}-{digest}" if cleaned else digest
    return f"{stem}.jsonl"


def _append_line(path: str, line: str) -> bool:
    global _pending
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        return True
    except OSError as exc:
        logger.warning("Could not write debug trace to %s: %s", path, exc)
        return False
    finally:
        with _lock:
            _pending -= 1


class TraceWrite:
    """A queued trace line. ``await`` it (or call ``wait()``) to know it reached the file.

    Ignoring it is fine: the line is written anyway. The result is ``True`` once written, ``False``
    if the write failed or the event was dropped.
    """

    __slots__ = ("_future",)

    def __init__(self, future: Future[bool] | None) -> None:
        self._future = future

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the line is written (for synchronous callers, never on an event loop)."""
        return False if self._future is None else self._future.result(timeout)

    def __await__(self) -> Generator[object, None, bool]:
        if self._future is None:
            return False
        return (yield from asyncio.wrap_future(self._future).__await__())


def write_trace_line(path: str, line: str) -> TraceWrite:
    """Queue ``line`` for appending to ``path`` on the writer thread."""
    global _executor, _pending, _dropped
    with _lock:
        if _pending >= MAX_PENDING_WRITES:
            _dropped += 1
            dropped = _dropped
        else:
            dropped = 0
            _pending += 1
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osmosis-trace")
            executor = _executor
    if dropped:
        if dropped == 1 or dropped % 1000 == 0:
            logger.warning(
                "Debug trace writer is %d lines behind; dropped %d events", MAX_PENDING_WRITES, dropped
            )
        return TraceWrite(None)
    try:
        return TraceWrite(executor.submit(_append_line, path, line))
    except RuntimeError:  # interpreter shutting down: the writer no longer accepts work
        with _lock:
            _pending -= 1
        return TraceWrite(None)
