"""Which processes exist, read from ``/proc``: for tests that check nothing is left behind."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


class Proc(NamedTuple):
    pid: int
    state: str
    ppid: int
    pgrp: int


def processes() -> list[Proc]:
    """Every process of the machine (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found.append(Proc(int(entry.name), fields[0], int(fields[1]), int(fields[2])))
    return found


def children(pid: int | None = None) -> set[int]:
    """The children of ``pid`` (default: this process), zombies included."""
    parent = os.getpid() if pid is None else pid
    return {p.pid for p in processes() if p.ppid == parent}


def in_groups(groups: Iterable[int]) -> set[int]:
    """Processes, zombies included, in any of the process groups ``groups``."""
    wanted = set(groups)
    return {p.pid for p in processes() if p.pgrp in wanted}


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    return any(p.pid == pid and p.state != "Z" for p in processes())
