"""Which processes exist, read from ``/proc``: for tests that check nothing is left behind."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple


class Proc(NamedTuple):
    pid: int
    state: str
    ppid: int
    pgrp: int


def _proc(pid: int) -> Proc | None:
    """The process ``pid`` (a zombie too), or ``None`` when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:  # no such process, or it ended while we looked
        return None
    fields = stat.rsplit(b")", 1)[1].split()
    return Proc(pid, fields[0].decode(), int(fields[1]), int(fields[2]))


def processes() -> list[Proc]:
    """Every process of the machine (zombies included)."""
    found = (_proc(int(name)) for name in os.listdir("/proc") if name.isdigit())
    return [proc for proc in found if proc is not None]


def children(pid: int | None = None) -> set[int]:
    """The children of ``pid`` (default: this process), zombies included."""
    parent = os.getpid() if pid is None else pid
    return {p.pid for p in processes() if p.ppid == parent}


def in_groups(groups: Iterable[int]) -> set[int]:
    """Processes, zombies included, in any of the process groups ``groups``."""
    wanted = set(groups)
    return {p.pid for p in processes() if p.pgrp in wanted}


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (read from its own entry: tests poll this)."""
    proc = _proc(pid)
    return proc is not None and proc.state != "Z"
