"""How the parent and a worker process talk: pickled frames over two pipes, and a shared table of
which sample each worker is running since when.

**Pipes.** Every frame is a 4-byte big-endian length and a pickle.

* The command pipe (parent to worker) carries the worker's :class:`WorkerSettings` first, then
  batches: lists of ``(seq, payload)``, where ``payload`` is one sample's argument tuple, pickled by
  the parent when the sample was submitted (so a sample that cannot be sent fails at the call site).
  End of file tells the worker to exit.
* The result pipe (worker to parent) carries ``(READY,)`` or ``(FAILED, message, output)`` once, then
  ``(RESULTS, [(seq, status, value, duration, output), ...])`` frames.

**Slots.** A small file mapped by both sides holds one slot per sample the worker may run at once:
the sample's sequence number (``-1`` when the slot is idle) and the ``time.monotonic()`` at which
the worker started it. The monotonic clock is one clock for every process of the machine, so the
parent reads each deadline exactly where the worker set it, without a message per sample and
without the worker's help: a worker stuck in C code that holds the GIL cannot answer, but its slot
still says what it is running and since when.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
import tempfile
from dataclasses import dataclass
from typing import IO, Any

READY = "ready"
FAILED = "failed"
RESULTS = "results"

OK = 0
"""The reward returned a score (``value`` is the float)."""
ERROR = 1
"""The reward raised or returned no score (``value`` is the first line of the error)."""
TIMEOUT = 2
"""The reward ran past its timeout, measured in the worker (``value`` is :data:`CANCELLED` or :data:`LATE`)."""
CANCELLED = "cancelled"
LATE = "late"
MEMORY = 3
"""The reward ran out of memory (``value`` is the first line of the error)."""

_HEADER = struct.Struct("!I")
_PROTOCOL = pickle.HIGHEST_PROTOCOL


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker needs to know, sent as the first frame of its command pipe."""

    sys_path: list[str]
    argv: list[str]
    module: str
    attribute: str
    main_file: str | None
    keywords: tuple[str, ...] | None
    name: str
    kind: str
    timeout: float | None
    concurrency: int
    memory_limit_mb: int | None
    output_limit: int


def encode(message: object) -> bytes:
    """One frame: the length, then the pickle."""
    body = pickle.dumps(message, _PROTOCOL)
    return _HEADER.pack(len(body)) + body


def dumps(value: object) -> bytes:
    """The pickle of one sample's arguments (frames carry it as it is)."""
    return pickle.dumps(value, _PROTOCOL)


loads = pickle.loads


class FrameBuffer:
    """Bytes in, whole frames out, for a reader that gets data in pieces (an asyncio protocol)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        frames, position, size = [], 0, len(buffer)
        while size - position >= _HEADER.size:
            (length,) = _HEADER.unpack_from(buffer, position)
            end = position + _HEADER.size + length
            if end > size:
                break
            frames.append(pickle.loads(buffer[position + _HEADER.size : end]))
            position = end
        del buffer[:position]
        return frames


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame from a blocking stream, or ``None`` at end of file."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack(header)
    body = stream.read(length)
    if len(body) < length:
        return None
    return pickle.loads(body)


def write_frame(fd: int, message: object) -> None:
    """Write one frame to a blocking file descriptor, all of it."""
    view = memoryview(encode(message))
    while view:
        view = view[os.write(fd, view) :]


_SLOT = struct.Struct("=qd")
IDLE = -1


class Slots:
    """The shared table of running samples (see the module docstring)."""

    def __init__(self, buffer: mmap.mmap, count: int) -> None:
        self._buffer = buffer
        self.count = count

    @classmethod
    def create(cls, count: int) -> tuple[Slots, int]:
        """A new table and the file descriptor to pass to the worker (the caller closes it)."""
        with tempfile.TemporaryFile() as file:  # already unlinked: nothing to clean up on any path
            fd = os.dup(file.fileno())
        os.ftruncate(fd, _SLOT.size * count)
        slots = cls(mmap.mmap(fd, _SLOT.size * count), count)
        for index in range(count):
            slots.clear(index)
        return slots, fd

    @classmethod
    def attach(cls, fd: int, count: int) -> Slots:
        """The worker's view of the table its parent created."""
        return cls(mmap.mmap(fd, _SLOT.size * count), count)

    def start(self, index: int, seq: int, started: float) -> None:
        _SLOT.pack_into(self._buffer, index * _SLOT.size, seq, started)

    def clear(self, index: int) -> None:
        _SLOT.pack_into(self._buffer, index * _SLOT.size, IDLE, 0.0)

    def running(self) -> list[tuple[int, float]]:
        """``(seq, started)`` of every busy slot."""
        busy = []
        for index in range(self.count):
            while True:  # a slot read while the worker rewrites it can mix two writes: read it again
                first = _SLOT.unpack_from(self._buffer, index * _SLOT.size)
                if _SLOT.unpack_from(self._buffer, index * _SLOT.size) == first:
                    break
            if first[0] != IDLE:
                busy.append(first)
        return busy

    def close(self) -> None:
        self._buffer.close()
