"""The one output writer: regular files replaced atomically, special files written in place or refused,
every temporary file made by ``mkstemp``."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from osmosis_ai.cli.output_file import (
    OutputPathError,
    check_output,
    is_regular_output,
    open_output,
    write_output,
)
from tests.support.special_files import (
    FULL_DEVICE,
    FifoReader,
    char_device,
    still_char_device,
    symlink_to_file,
)


def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old\n")
    target.chmod(0o640)
    before = target.stat().st_ino
    write_output(target, "new\n", flag="-o")
    assert target.read_text() == "new\n"
    assert target.stat().st_ino != before  # a new file renamed over the old one
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_new_file_gets_the_umask_mode_and_its_directories(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        target = write_output(tmp_path / "a" / "b" / "out.json", "x", flag="-o")
    finally:
        os.umask(previous)
    assert target.read_text() == "x" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_symlink_stays_a_link_and_its_file_gets_the_content(tmp_path: Path) -> None:
    link = symlink_to_file(tmp_path / "latest.json", tmp_path / "runs" / "run-1.json")
    write_output(link, "fresh\n", flag="-o")
    assert link.is_symlink() and link.readlink() == tmp_path / "runs" / "run-1.json"
    assert (tmp_path / "runs" / "run-1.json").read_text() == "fresh\n"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-1.json"]


def test_a_dangling_symlink_creates_its_file(tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    write_output(link, "made\n", flag="-o")
    assert link.is_symlink() and (tmp_path / "elsewhere.json").read_text() == "made\n"


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = FifoReader(tmp_path / "pipe")
    write_output(fifo.path, "through the pipe\n", flag="-o")
    assert fifo.received() == b"through the pipe\n"
    assert stat.S_ISFIFO(fifo.path.lstat().st_mode)
    assert not is_regular_output(fifo.path)


def test_a_character_device_is_written_in_place(tmp_path: Path) -> None:
    device = char_device(tmp_path / "null")
    check_output(device, flag="-o")
    write_output(device, "into the void\n", flag="-o")
    assert still_char_device(device)
    with open_output(device, flag="-o") as handle:
        handle.write("streamed\n")
    assert still_char_device(device)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_full_device_is_one_line_error(tmp_path: Path) -> None:
    device = char_device(tmp_path / "full", FULL_DEVICE)
    with pytest.raises(OutputPathError) as caught:
        write_output(device, "x" * 10_000, flag="--report")
    assert str(caught.value) == f"cannot write --report {device}: No space left on device"
    assert still_char_device(device, FULL_DEVICE)


def test_directories_block_devices_and_sockets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputPathError, match="it is a directory; give a file name"):
        check_output(tmp_path, flag="-o")
    with pytest.raises(OutputPathError, match="it is a directory"):
        write_output(tmp_path, "x", flag="-o")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        for call in (check_output, open_output):
            with pytest.raises(OutputPathError, match="it is a socket"):
                call(tmp_path / "sock", flag="-o")
    finally:
        server.close()
    if os.geteuid() == 0:
        # A loop device number no loop device uses: refused before any open, so nothing is touched.
        os.mknod(tmp_path / "disk", stat.S_IFBLK | 0o600, os.makedev(7, 250))
        for call in (check_output, open_output):
            with pytest.raises(OutputPathError, match="it is a block device; refusing to write over a disk"):
                call(tmp_path / "disk", flag="-o")
        with pytest.raises(OutputPathError, match="block device"):
            write_output(tmp_path / "disk", "x", flag="-o")
        assert stat.S_ISBLK((tmp_path / "disk").lstat().st_mode)


@pytest.mark.parametrize("planted", [".out.json.tmp", "out.json.tmp"])
def test_a_link_planted_at_a_predictable_temporary_name_is_never_written_through(
    tmp_path: Path, planted: str
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / planted).symlink_to(victim)
    write_output(tmp_path / "out.json", "report\n", flag="-o")
    assert victim.read_text() == "precious\n"
    assert (tmp_path / planted).is_symlink()
    assert (tmp_path / "out.json").read_text() == "report\n"


def test_a_path_under_a_file_or_in_proc_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputPathError) as caught:
        check_output(tmp_path / "afile" / "out.json", flag="-o")
    assert caught.value.reason == f"{tmp_path / 'afile'} is not a directory"
    if Path("/proc/self").is_dir():
        with pytest.raises(OutputPathError, match=r"/proc is not writable"):
            check_output("/proc/out.json", flag="-o")
