"""Reward output, kept per sample and bounded.

In a worker process ``sys.stdout`` and ``sys.stderr`` are :class:`CaptureStream` objects: what a
sample prints goes into that sample's :class:`Capture`, found through a context variable, so the
samples one worker runs at once keep their output apart. A capture keeps the first ``limit``
characters and counts the rest, so a reward that prints 10 MB costs its own time, not the run's
memory. Output that belongs to no sample (printed at import, or by a thread the reward left running)
goes to the worker's own capture, which is reported if the worker fails to start, and to the
descriptor too, so a worker that dies without reporting (``os._exit`` at import) is not silent.

What is written to the file descriptors directly — C code, child processes, ``faulthandler`` on a
fatal signal — reaches the parent through a pipe, of which the parent keeps the last bytes since
the worker last reported results (:class:`Tail`): a crashed worker's last words.
"""

from __future__ import annotations

import contextlib
import io
import os
from contextvars import ContextVar

CURRENT: ContextVar[Capture | None] = ContextVar("osmosis_reward_capture", default=None)


class Capture:
    """The first ``limit`` characters written, and how many more were not kept."""

    __slots__ = ("_dropped", "_kept", "_parts", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self._dropped = 0

    def write(self, text: str) -> None:
        room = self.limit - self._kept
        if room >= len(text):
            self._parts.append(text)
            self._kept += len(text)
            return
        if room > 0:
            self._parts.append(text[:room])
            self._kept = self.limit
        self._dropped += len(text) - max(room, 0)

    def take(self) -> str:
        """What was kept (with a note of what was not), and start afresh."""
        if not self._parts and not self._dropped:
            return ""
        text = "".join(self._parts)
        if self._dropped:
            text += f"\n[{self._dropped:,} more characters not kept]"
        self._parts, self._kept, self._dropped = [], 0, 0
        return text


class CaptureStream(io.TextIOBase):
    """A text stream that writes to the current sample's capture (see the module docstring).

    ``fileno()`` is the real descriptor, for code that needs one (``faulthandler``, ``subprocess``).
    """

    def __init__(self, fd: int, fallback: Capture) -> None:
        super().__init__()
        self._fd = fd
        self._fallback = fallback

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        capture = CURRENT.get()
        if capture is None:  # no sample's: also to the descriptor, so a worker that dies before it
            capture = self._fallback  # can report (os._exit at import) leaves its last words in the tail
            with contextlib.suppress(OSError):
                os.write(self._fd, text.encode("utf-8", "replace"))
        capture.write(text)
        return len(text)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "replace"

    @property
    def buffer(self) -> _BinaryCapture:
        return _BinaryCapture(self)


class _BinaryCapture(io.RawIOBase):
    """``sys.stdout.buffer``: bytes decoded into the same capture."""

    def __init__(self, text: CaptureStream) -> None:
        super().__init__()
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def fileno(self) -> int:
        return self._text.fileno()


class Tail:
    """The last ``limit`` bytes of a stream (the parent's view of a worker's descriptors 1 and 2)."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._data = bytearray()

    def feed(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > 2 * self.limit:
            del self._data[: -self.limit]

    def clear(self) -> None:
        self._data.clear()

    def text(self) -> str:
        return bytes(self._data[-self.limit :]).decode("utf-8", "replace").strip()
