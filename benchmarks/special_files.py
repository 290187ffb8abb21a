"""Special files at an output path, for the fault suite's output slice (and the tests of the output
flags): a character device made with ``mknod`` (root only), a FIFO drained by a reader thread, a
symbolic link to a regular file."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
from pathlib import Path

NULL_DEVICE = (1, 3)  # Linux's major/minor numbers of /dev/null
FULL_DEVICE = (1, 7)  # and of /dev/full: every write fails with ENOSPC


def make_char_device(path: Path, numbers: tuple[int, int] = NULL_DEVICE) -> str | None:
    """Make a character device node at ``path``; ``None``, or why it cannot be made here."""
    if os.geteuid() != 0:
        return "making a character device with mknod needs root"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*numbers))
    except OSError as exc:  # a container without CAP_MKNOD, or a filesystem mounted nodev
        return f"cannot make a character device here: {exc.strerror}"
    return None


def still_char_device(path: Path, numbers: tuple[int, int] = NULL_DEVICE) -> bool:
    found = path.lstat()
    return stat.S_ISCHR(found.st_mode) and (os.major(found.st_rdev), os.minor(found.st_rdev)) == numbers


class FifoReader:
    """A FIFO at ``path`` and a thread reading everything written to it, as ``cat`` on a pipe would."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.data = b""
        # The read end is open from the start (so a writer never waits), non-blocking, and polled:
        # Linux reports a hang-up on it only once a writer has come and gone since it was opened.
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        chunks = []
        while True:
            poller.poll()
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:  # a writer (re)opened between the wake-up and the read
                continue
            if not chunk:  # the writer closed its end
                break
            chunks.append(chunk)
        self.data = b"".join(chunks)

    def received(self) -> bytes:
        """What was written once the writer closed; ``b""`` when nothing ever opened the FIFO."""
        if self._thread.is_alive():
            # A write end opened and closed through /proc reaches this FIFO even if something replaced
            # the path, and ends the read: when the writer is already done, nothing more comes anyway.
            with contextlib.suppress(OSError):
                os.close(os.open(f"/proc/self/fd/{self._fd}", os.O_WRONLY | os.O_NONBLOCK))
        self._thread.join()
        os.close(self._fd)
        return self.data


def symlink_to_file(link: Path, target: Path) -> Path:
    """``link`` pointing at the regular file ``target`` (made with old content)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("old content\n")
    link.symlink_to(target)
    return link
