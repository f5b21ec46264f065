"""What a grading child's process tree holds, read from /proc, and how it is ended.

The parent (:mod:`autograder.isolation`) polls these while the child runs: the
processes below it, their resident memory, the memfds and pipes they hold and
the sandbox's own /dev/shm (memory no RSS shows), their number of tasks (what
``RLIMIT_NPROC`` counts), and the space and entries of the files in a folder;
and ends the whole tree, waiting until every process of it is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the sandbox, the child, its compiler, the emulator's worker)."""
    found, stack = [], [pid]
    while stack and len(found) < 4096:
        p = stack.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                stack += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def _summed(pids: list[int], read) -> int:
    """``read(pid)`` summed over ``pids``; a process that ended meanwhile (or cannot be read) adds nothing."""
    total = 0
    for p in pids:
        try:
            total += read(p)
        except (OSError, ValueError):
            continue
    return total


def _vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def rss_bytes(pids: list[int]) -> int:
    """Resident memory (anonymous, file-backed and shared pages) of ``pids``, from /proc."""
    return _summed(pids, _vm_rss)


def task_count(pids: list[int]) -> int:
    """Processes and threads among ``pids`` (what ``RLIMIT_NPROC`` counts)."""
    return _summed(pids, lambda pid: len(os.listdir(f"/proc/{pid}/task")))


#: What a pipe may hold when the sandbox refuses to resize it (F_SETPIPE_SZ): Linux's default, 16 pages.
PIPE_BYTES = 16 * 4096


def held_buffer_bytes(pids: list[int]) -> int:
    """Memory no process maps that ``pids`` hold through their descriptors (each object counted once): the
    pages of their memfds, and every pipe at what it may hold (its contents are the kernel's, in no RSS)."""
    seen: dict[tuple[int, int], int] = {}
    for p in pids:
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{p}/fd/{fd}"
            try:
                target = os.readlink(path)
                if target.startswith("pipe:"):
                    seen[("pipe", target)] = PIPE_BYTES
                    continue
                if not target.startswith("/memfd:"):
                    continue
                st = os.stat(path)
            except OSError:
                continue
            seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def sandbox_tmpfs_bytes(pids: list[int]) -> int:
    """What the files in the sandbox's own /dev/shm take (a tmpfs: memory, whether or not a process maps them)."""
    own = os.stat("/proc/self/ns/mnt").st_ino
    seen: dict[int, int] = {}
    for p in pids:
        try:
            if os.stat(f"/proc/{p}/ns/mnt").st_ino == own:
                continue  # not in the sandbox (bwrap's outer process): that /dev/shm is the machine's
            shm = f"/proc/{p}/root/dev/shm"
            dev = os.stat(shm).st_dev
            if dev not in seen:
                vfs = os.statvfs(shm)
                seen[dev] = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
        except OSError:
            continue
    return sum(seen.values())


def folder_usage(folders: list[str], stop_above: int, stop_above_entries: int = 2**62) -> tuple[int, int]:
    """(bytes of the blocks the files below ``folders`` take, entries below them: files, folders, links), counted
    until either passes its limit.  Inodes cost room too: an empty file or folder takes no block but one entry."""
    total = entries = 0
    pending = [f for f in folders if f]
    while pending and total <= stop_above and entries <= stop_above_entries:
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    else:
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    return total, entries


def tree_memory_bytes(pids: list[int]) -> int:
    """Memory the process tree ``pids`` holds: resident pages, the memfds and pipes it holds, its /dev/shm."""
    return rss_bytes(pids) + held_buffer_bytes(pids) + sandbox_tmpfs_bytes(pids)


def kill_group(proc: subprocess.Popen) -> list[int]:
    """SIGKILL to the child's process group and to every process below it (the sandbox's first process
    among them, whose end takes every process of its PID namespace along); the processes it found."""
    tree = descendants(proc.pid)
    for pid in tree[1:]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    return tree


def wait_gone(pids: list[int], timeout_s: float = 10.0) -> None:
    """Until none of ``pids`` exists any more: a killed sandbox's processes (a fork bomb's hundred) are
    gone before the next grading starts."""
    end = time.monotonic() + timeout_s
    left = [p for p in pids if os.path.exists(f"/proc/{p}")]
    while left and time.monotonic() < end:
        time.sleep(0.02)
        left = [p for p in left if os.path.exists(f"/proc/{p}")]
