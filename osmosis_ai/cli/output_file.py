"""The writer of the files a command line names: ``-o``, ``--report``, ``--output-path``.

What is at the path decides how it is written:

* nothing yet, or a regular file: replaced atomically. The content goes to a temporary file that
  :func:`tempfile.mkstemp` creates (``O_EXCL``, an unguessable name) in the target's own directory,
  is flushed to disk and renamed over the target, so a reader sees the old file or the new one,
  never half of one, and no link planted at a predictable name is ever written through. A replaced
  file keeps its permission bits (and, for root, its owner); a new one gets ``0666`` less the umask.
* a symbolic link: followed; the file it leads to is the target and the link stays a link.
* a character device or a FIFO (``/dev/null``, ``/dev/stdout`` on a terminal, ``>(gzip > out.gz)``):
  opened and written in place, never replaced, never created.
* a directory, a block device (a disk) or a socket: refused with one line.

:func:`check_output` applies the refusals, and proves the directory writable, before a command does
any paid work (:func:`check_output_directory` for a directory a command writes files into);
:func:`write_output` writes a whole document; :func:`open_output` opens a file that is written as it
goes (``rollout run -o``), in place whatever is there.

A file a command writes is never one it reads: each command declares which of its options name
files it reads, writes, or both (:func:`declare_files`), and :func:`check_files`, run by ``main``
(and the 0.2 command objects) before the command itself, refuses a written file that is one of the others, by identity (a symbolic
or hard link to the dataset is the dataset), with one line and before anything is read or written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from osmosis_ai.cli.errors import CLIError
from osmosis_ai.cli.parser import option_label


class OutputPathError(CLIError):
    """A file named by a flag cannot be written: ``reason`` says why, the message names the flag."""

    def __init__(self, path: Path, flag: str, reason: str) -> None:
        super().__init__(f"cannot write {flag} {path}: {reason}")
        self.path = path
        self.flag = flag
        self.reason = reason


_REFUSED = (
    (stat.S_ISDIR, "it is a directory; give a file name"),
    (stat.S_ISBLK, "it is a block device; refusing to write over a disk"),
    (stat.S_ISSOCK, "it is a socket; give a file name"),
)


def _refuse(path: Path, flag: str, mode: int) -> None:
    for kind, reason in _REFUSED:
        if kind(mode):
            raise OutputPathError(path, flag, reason)


def _failure(path: Path, flag: str, exc: OSError) -> OutputPathError:
    return OutputPathError(path, flag, exc.strerror or str(exc))


def _lookup(path: Path) -> os.stat_result | None:
    """What the path leads to (links followed), or None when nothing is there yet."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):  # a missing file, or a file on its way
        return None


def _target(path: Path) -> Path:
    """The file a path names: a symbolic link's destination (the link itself stays), else the path."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def is_regular_output(path: str | Path) -> bool:
    """Whether ``path`` leads to a regular file, which can be read back once written (a device or a
    FIFO cannot)."""
    found = _lookup(Path(path))
    return found is not None and stat.S_ISREG(found.st_mode)


def check_output(path: str | Path, *, flag: str) -> None:
    """Fail now, with one line, when ``path`` could not be written later.

    Refuses a directory, a block device and a socket. For a regular file or a new path, the nearest
    existing directory on its way must take a new file: that is proved by creating one there and
    removing it at once, because permission bits alone do not tell (root, read-only mounts).
    """
    path = Path(path)
    try:
        found = _lookup(path)
        if found is not None:
            _refuse(path, flag, found.st_mode)
            if not stat.S_ISREG(found.st_mode):
                return  # a device or a FIFO is opened when written
    except OSError as exc:
        raise _failure(path, flag, exc) from exc
    _prove_writable(path, _target(path).parent, flag=flag)


def _prove_writable(path: Path, directory: Path, *, flag: str) -> None:
    """The nearest existing directory on the way to ``directory`` takes a new file (``path`` is what
    the refusal names)."""
    try:
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        if not directory.is_dir():
            raise OutputPathError(path, flag, f"{directory} is not a directory")
    except OSError as exc:
        raise _failure(path, flag, exc) from exc
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".osmosis-probe-", dir=directory)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(path, flag, f"{directory} is not writable ({exc.strerror or exc})") from exc


def check_output_directory(path: str | Path, *, flag: str) -> None:
    """Fail now, with one line, when ``path`` cannot be the directory a command writes files into:
    anything but a directory there, or a new directory that could not be made, is refused."""
    path = Path(path)
    try:
        found = _lookup(path)
    except OSError as exc:
        raise _failure(path, flag, exc) from exc
    if found is not None and not stat.S_ISDIR(found.st_mode):
        raise OutputPathError(path, flag, "it is not a directory; give a directory (made when missing)")
    _prove_writable(path, path, flag=flag)


def write_output(path: str | Path, text: str, *, flag: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` by the rules of this module; returns ``path``.

    ``flag`` names the option in the one-line :class:`OutputPathError` raised when it cannot be written.
    """
    path = Path(path)
    data = text.encode("utf-8")
    try:
        found = _lookup(path)
        if found is not None:
            _refuse(path, flag, found.st_mode)
            if not stat.S_ISREG(found.st_mode):
                _write_in_place(path, data)
                return path
        _replace(_target(path), data, found)
    except OSError as exc:
        raise _failure(path, flag, exc) from exc
    return path


def open_output(path: str | Path, *, flag: str) -> TextIO:
    """``path`` opened for writing as it goes (created or truncated; a device or FIFO in place)."""
    path = Path(path)
    try:
        found = _lookup(path)
        if found is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            _refuse(path, flag, found.st_mode)
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise _failure(path, flag, exc) from exc


def _write_in_place(path: Path, data: bytes) -> None:
    # No O_CREAT: if the device or FIFO went away meanwhile, nothing is created in its place.
    descriptor = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError):  # Linux says it without changing it
        for line in Path("/proc/self/status").read_text().split("\n"):
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def _replace(target: Path, data: bytes, found: os.stat_result | None) -> None:
    if found is None:
        target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if hasattr(os, "fchmod"):  # POSIX: mkstemp made it 0600
                mode = 0o666 & ~_umask() if found is None else stat.S_IMODE(found.st_mode)
                os.fchmod(handle.fileno(), mode)
            if found is not None and hasattr(os, "fchown") and found.st_uid != os.geteuid():
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(handle.fileno(), found.st_uid, found.st_gid)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


READ, READ_AND_WRITTEN, WRITTEN = 0, 1, 2
"""What a command does with a named file; of two options naming one file, the one written most is
what the refusal names first."""
NAMED_FILES = "_named_files"


@dataclass(frozen=True)
class NamedFile:
    """A file option of a command: how the help shows it, and what the command does with the file.
    ``path`` gives the file from the parsed arguments: the option's value, or (for a file the command
    derives from another option, like ``eval --log-samples``'s) a function of them."""

    label: str
    use: int
    path: str | Callable[[argparse.Namespace], str | None]
    fix: str = "choose another output path"

    def paths(self, args: argparse.Namespace) -> Iterator[str]:
        value = self.path(args) if callable(self.path) else getattr(args, self.path, None)
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if item:
                yield os.fspath(item)


def declare_files(
    parser: argparse.ArgumentParser,
    *,
    read: Sequence[str] = (),
    written: Sequence[str] = (),
    read_and_written: Sequence[str] = (),
    derived: Mapping[str, tuple[Callable[[argparse.Namespace], str | None], str]] | None = None,
) -> None:
    """Declare the options (by ``dest``, added to ``parser`` already) naming files the command reads,
    writes, or both (a journal); ``derived`` maps a label to ``(path of the parsed arguments, how to
    fix a clash)`` for a file the command writes at a path of its own making. Declarations add up."""
    declared: tuple[NamedFile, ...] = parser.get_default(NAMED_FILES) or ()
    for dests, use in ((read, READ), (written, WRITTEN), (read_and_written, READ_AND_WRITTEN)):
        declared += tuple(NamedFile(option_label(parser, dest), use, dest) for dest in dests)
    declared += tuple(NamedFile(label, WRITTEN, path, fix) for label, (path, fix) in (derived or {}).items())
    parser.set_defaults(**{NAMED_FILES: declared})


def _identity(path: str) -> Any:
    """What makes two paths one file: an existing regular file's device and inode (links followed),
    else the real path a new file would get; None for a directory, device or FIFO, which a command
    never replaces (``-o /dev/null --report /dev/null`` is fine)."""
    try:
        found = os.stat(path)
    except OSError:  # nothing there yet, or a dangling link: where the file would be created
        return os.path.realpath(path)
    return (found.st_dev, found.st_ino) if stat.S_ISREG(found.st_mode) else None


def read_files(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The files the command reads (:func:`declare_files`), each with the label of its option."""
    entries = getattr(args, NAMED_FILES, ())
    return tuple(
        (path, entry.label) for entry in entries if entry.use != WRITTEN for path in entry.paths(args)
    )


def check_files(args: argparse.Namespace) -> None:
    """Refuse, with one line, a file the command writes that is also a file it reads or writes under
    another option (:func:`declare_files`); the command has not started yet."""
    named = [
        (entry, path, _identity(path))
        for entry in getattr(args, NAMED_FILES, ())
        for path in entry.paths(args)
    ]
    for i, (first, first_path, identity) in enumerate(named):
        for second, second_path, other in named[i + 1 :]:
            if identity is None or identity != other or max(first.use, second.use) == READ:
                continue
            subject, shown = (first, second_path) if first.use > second.use else (second, first_path)
            other_label = second.label if subject is first else first.label
            raise CLIError(f"{subject.label} names the same file as {other_label} ({shown}): {subject.fix}")
