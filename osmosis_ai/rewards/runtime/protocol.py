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

**Finished.** After the slots, the same file holds the last samples the worker finished, each with
its status, duration and value (a score, or the first bytes of the error), written before the slot
is cleared. Results travel in frames a little later, so a worker that dies or garbles its result
pipe right after a sample returned leaves what it had finished here: those samples are settled
from this record and never run again. The record holds at least as many samples as a worker is
ever sent at once, so every finished sample still unreported is in it.

**Garbled pipe.** A reward can write to the result pipe itself. Every frame must start with the
pickle protocol's opening bytes; anything else is refused at once (never waited on as a long frame).
The worker's own writes use functions bound when this module is imported, so a reward that
replaces ``pickle.dumps`` or ``os.write`` afterwards does not change what the worker sends.
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
"""The reward returned a score (``value`` is the float; for a ``raw`` target, whatever it returned)."""
ERROR = 1
"""The reward raised or returned no score (``value`` is the first line of the error)."""
TIMEOUT = 2
"""The reward ran past its timeout, measured in the worker (``value`` is :data:`CANCELLED` or :data:`LATE`)."""
CANCELLED = "cancelled"
LATE = "late"
MEMORY = 3
"""The reward ran out of memory (``value`` is the first line of the error)."""
UNRECORDED = "its worker process ended after it returned, before its result was sent"
"""What the finished record says of a ``raw`` target's return value, which the record cannot hold:
such a sample is an error when its worker dies in that moment, and is not run again."""
INFRA = 4
"""The reward raised :class:`~osmosis_ai.errors.InfrastructureError`: its own machinery failed (``value`` is the first line)."""

_HEADER = struct.Struct("!I")
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_OPENING = bytes((pickle.PROTO[0], _PROTOCOL))
"""The first bytes of every pickle this protocol makes."""
_pickle_dumps, _write, _memoryview = pickle.dumps, os.write, memoryview  # see "Garbled pipe" above


class FrameError(ValueError):
    """Bytes on a pipe that are not a frame of this protocol; ``frames`` holds the whole frames that
    came before them."""

    def __init__(self, message: str, frames: list[Any] | None = None) -> None:
        super().__init__(message)
        self.frames = frames or []


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
    window: int
    """The most samples the worker is ever sent at once (it records that many finished ones)."""
    memory_limit_mb: int | None
    output_limit: int
    raw: bool = False
    """The target's return value goes back as it is (mode ``raw``), not made a score."""
    setup: str | None = None
    """``module:attribute`` of an async function the worker awaits once with ``setup_args`` before it
    answers ``READY``, on the event loop it then runs every sample on."""
    setup_args: tuple[Any, ...] = ()


def encode(message: object) -> bytes:
    """One frame: the length, then the pickle."""
    body = _pickle_dumps(message, _PROTOCOL)
    return _HEADER.pack(len(body)) + body


def dumps(value: object) -> bytes:
    """The pickle of one sample's arguments (frames carry it as it is)."""
    return _pickle_dumps(value, _PROTOCOL)


loads = pickle.loads


class FrameBuffer:
    """Bytes in, whole frames out, for a reader that gets data in pieces (an asyncio protocol);
    :class:`FrameError` for bytes that are not frames (see "Garbled pipe" in the module docstring)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        frames: list[Any] = []
        position, size = 0, len(buffer)
        opening = _HEADER.size + len(_OPENING)
        while size - position >= _HEADER.size:
            (length,) = _HEADER.unpack_from(buffer, position)
            start = position + _HEADER.size
            if length < len(_OPENING) or (
                size - position >= opening and buffer[start : start + len(_OPENING)] != _OPENING
            ):
                raise FrameError("bytes that are not a frame of the runtime's protocol", frames)
            end = start + length
            if end > size:
                break
            try:
                frames.append(pickle.loads(buffer[start:end]))
            except Exception as exc:
                raise FrameError(f"a frame that does not unpickle: {exc}", frames) from exc
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
    view = _memoryview(encode(message))
    while view:
        view = view[_write(fd, view) :]


_SLOT = struct.Struct("=qd")
IDLE = -1
_INT64 = struct.Struct("=q")
_DONE = struct.Struct("=qidd")
_DONE_TEXT = 240
"""Bytes of a finished sample's error that are kept in the table."""
_TEXT = struct.Struct(f"=H{_DONE_TEXT}s")
_ENTRY = _DONE.size + _TEXT.size


class Slots:
    """The shared table of running and finished samples (see the module docstring)."""

    def __init__(self, buffer: mmap.mmap, count: int, finished: int) -> None:
        self._buffer = buffer
        self.count = count
        self.finished_capacity = finished
        self._log = _SLOT.size * count
        self._entries = self._log + _INT64.size

    @staticmethod
    def _size(count: int, finished: int) -> int:
        return _SLOT.size * count + _INT64.size + _ENTRY * finished

    @classmethod
    def create(cls, count: int, finished: int) -> tuple[Slots, int]:
        """A new table of ``count`` slots and ``finished`` records, and the file descriptor to pass
        to the worker (the caller closes it)."""
        with tempfile.TemporaryFile() as file:  # already unlinked: nothing to clean up on any path
            fd = os.dup(file.fileno())
        size = cls._size(count, finished)
        os.ftruncate(fd, size)
        slots = cls(mmap.mmap(fd, size), count, finished)
        for index in range(count):
            slots.clear(index)
        for index in range(finished):
            _INT64.pack_into(slots._buffer, slots._entries + index * _ENTRY, IDLE)
        return slots, fd

    @classmethod
    def attach(cls, fd: int, count: int, finished: int) -> Slots:
        """The worker's view of the table its parent created (the mapping outlives ``fd``)."""
        return cls(mmap.mmap(fd, cls._size(count, finished)), count, finished)

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

    def finish(self, seq: int, status: int, value: Any, duration: float) -> None:
        """Record a finished sample (worker side, one thread): ``value`` a float score or a text."""
        (written,) = _INT64.unpack_from(self._buffer, self._log)
        offset = self._entries + (written % self.finished_capacity) * _ENTRY
        if status == OK and type(value) is not float:  # a raw value: see UNRECORDED
            status, value = ERROR, UNRECORDED
        if status == OK:
            score, text = value, b""
        else:
            score, text = 0.0, str(value).encode("utf-8", "replace")[:_DONE_TEXT]
        # The body first and the seq last: a record is never read with a seq and someone else's body.
        _DONE.pack_into(self._buffer, offset, IDLE, status, duration, score)
        _TEXT.pack_into(self._buffer, offset + _DONE.size, len(text), text)
        _INT64.pack_into(self._buffer, offset, seq)
        _INT64.pack_into(self._buffer, self._log, written + 1)

    def finished(self) -> dict[int, tuple[int, Any, float]]:
        """``seq -> (status, value, duration)`` of the samples recorded (parent side, once the worker
        is gone): ``value`` is the score for a completed sample, else the text (its first bytes)."""
        records: dict[int, tuple[int, Any, float]] = {}
        for index in range(self.finished_capacity):
            offset = self._entries + index * _ENTRY
            seq, status, duration, score = _DONE.unpack_from(self._buffer, offset)
            if seq == IDLE:
                continue
            length, text = _TEXT.unpack_from(self._buffer, offset + _DONE.size)
            records[seq] = (
                status,
                score if status == OK else text[:length].decode("utf-8", "replace"),
                duration,
            )
        return records

    def close(self) -> None:
        self._buffer.close()
