"""The seccomp filter the local tier hands bwrap (``--seccomp FD``): a denylist of kernel interfaces
code under test has no use for and that widen the kernel's attack surface.

A classic BPF program, written out here rather than compiled by libseccomp (one less native
dependency). It checks the architecture first: a system call made through another ABI (the 32-bit
``int 0x80`` entry, x32) kills the process, since its numbers would slip past the list. Listed calls
fail with ``EPERM``; everything else is allowed. Only x86-64 has a list; elsewhere :func:`program`
returns ``None`` and the tier runs without a filter, as ``osmosis sandbox check`` says.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000

DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "pivot_root": 155, "acct": 163, "mount": 165, "umount2": 166,
    "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176,
    "quotactl": 179, "lookup_dcookie": 212, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
}  # fmt: skip
"""System calls that fail with EPERM in the sandbox (x86-64 numbers)."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return code, jt, jf, k


def program() -> bytes | None:
    """The filter as bwrap reads it (an array of ``struct sock_filter``), or ``None`` on an
    architecture without a list."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    numbers = sorted(DENIED_X86_64.values())
    ops = [
        _op(_LD_ABS_W, 4),  # seccomp_data.arch
        _op(_JEQ_K, _ARCH_X86_64, jt=1),
        _op(_RET_K, _KILL_PROCESS),
        _op(_LD_ABS_W, 0),  # seccomp_data.nr
    ]
    deny = len(ops) + 1 + len(numbers) + 1  # the index of the final EPERM return
    ops.append(_op(_JGE_K, _X32_BIT, jt=deny - len(ops) - 1))
    for number in numbers:
        ops.append(_op(_JEQ_K, number, jt=deny - len(ops) - 1))
    ops += [_op(_RET_K, _ALLOW), _op(_RET_K, _ERRNO | errno.EPERM)]
    assert len(ops) == deny + 1
    return b"".join(struct.pack("=HBBI", *op) for op in ops)
