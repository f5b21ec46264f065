"""A cgroup (v2) of its own for every grading, where the machine lets the grader make one.

Limits the kernel keeps count of are the only ones a submission cannot hide
from: ``memory.max`` counts what no process's resident set shows (page cache,
socket buffers, pipes, the pages of a tmpfs, kernel memory), ``pids.max`` every
task, and an I/O weight keeps one grading's disk traffic from starving the
others.  So where the unified hierarchy is mounted and writable (a grader
running as root on a GPU runner, most CI containers), each grading's sandbox
starts inside a cgroup of its own, below ``<cgroup2 mount>/dlk-grading``:

* the grader makes it before the sandbox starts, and the sandbox's first
  process moves itself into it before it becomes bubblewrap
  (:func:`entering_command`), so that nothing of the submission ever runs
  outside it;
* ``memory.max`` (no swap, the whole group killed on an out-of-memory),
  ``pids.max`` and ``io.weight`` are written where those controllers are
  enabled (:attr:`GradingCgroup.limited` says which; a grader at the root of
  the hierarchy enables those the root offers and does not yet hand down);
* at the end, whatever the end, ``cgroup.kill`` ends every task in it and the
  cgroup is removed; cgroups left by a grader that was itself killed are
  removed by the next one (their names carry the grader's pid).

Where the controllers are not available (this hierarchy may be mounted without
them, beside a v1 one) the cgroup still holds the grading's processes, and the
limits are the sandbox's own (:mod:`autograder.sandbox`: the seccomp filter
refuses sockets, System V IPC and pipe resizing without a GPU; the scratch is a
size-limited tmpfs whose blocks and inodes the grader counts; a process limit
per sandbox uid).  :func:`unavailable_reason` says which applies here.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import threading
import time
from pathlib import Path

#: The folder of the gradings' cgroups, below the root of the unified hierarchy this process sees.
BASE_NAME = "dlk-grading"
#: Controllers each grading's cgroup is limited by, where the hierarchy has them.
CONTROLLERS = ("memory", "pids", "io")
#: The I/O weight of a grading (1..10000; the default of every other cgroup is 100).
IO_WEIGHT = 10

_counter = itertools.count()
_counter_lock = threading.Lock()


def _unified_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (the first cgroup2 mount of this process's namespace)."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                separator = fields.index("-")
                if fields[separator + 1] == "cgroup2":
                    return Path(fields[4])
    except (OSError, ValueError, IndexError):
        pass
    return None


@functools.lru_cache(maxsize=1)
def _base() -> tuple[Path | None, frozenset[str], str]:
    """(the folder of the gradings' cgroups, the controllers enabled in it, '' or why there is none)."""
    mount = _unified_mount()
    if mount is None:
        return None, frozenset(), "no cgroup v2 hierarchy is mounted"
    base = mount / BASE_NAME
    try:
        base.mkdir(mode=0o755, exist_ok=True)
        (base / "cgroup.procs").stat()
    except OSError as exc:
        return None, frozenset(), f"the cgroup v2 hierarchy at {mount} cannot be written ({exc.strerror})"
    wanted = set(CONTROLLERS) - set((base / "cgroup.controllers").read_text().split())
    if wanted:
        # the folder's parent is the hierarchy's root, where a grader run as root may hand its controllers down
        for name in sorted(wanted & set((mount / "cgroup.controllers").read_text().split())):
            try:
                (mount / "cgroup.subtree_control").write_text(f"+{name}")
            except OSError:
                pass
    available = set((base / "cgroup.controllers").read_text().split()) & set(CONTROLLERS)
    for name in sorted(available):
        try:
            (base / "cgroup.subtree_control").write_text(f"+{name}")
        except OSError:
            available.discard(name)
    _remove_orphans(base)
    return base, frozenset(available), ""


def unavailable_reason() -> str:
    """'' where every grading gets a cgroup of its own, else why not."""
    return _base()[2]


def limiting_controllers() -> frozenset[str]:
    """The controllers a grading's cgroup is limited by here (empty where no cgroup can be made)."""
    return _base()[1]


def _remove_orphans(base: Path) -> None:
    """The cgroups of gradings whose grader process has ended: their tasks killed, the cgroups removed."""
    for child in base.iterdir():
        if not child.is_dir():
            continue
        try:
            owner = int(child.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if owner != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            GradingCgroup(child, frozenset()).remove()


class GradingCgroup:
    """The cgroup of one grading."""

    def __init__(self, path: Path, limited: frozenset[str]):
        self.path = path
        self.limited = limited

    @classmethod
    def create(cls, memory_bytes: int, tasks: int) -> "GradingCgroup | None":
        """A fresh cgroup with these limits (where their controllers are enabled); None where none can be made."""
        base, controllers, _ = _base()
        if base is None:
            return None
        with _counter_lock:
            name = f"grading-{os.getpid()}-{next(_counter)}"
        path = base / name
        try:
            path.mkdir(mode=0o755)
        except OSError:
            return None
        group = cls(path, controllers)
        settings = {"memory": {"memory.max": str(memory_bytes), "memory.swap.max": "0", "memory.oom.group": "1"},
                    "pids": {"pids.max": str(tasks)}, "io": {"io.weight": f"default {IO_WEIGHT}"}}
        for controller in controllers:
            for file, value in settings[controller].items():
                try:
                    (path / file).write_text(value)
                except OSError:
                    pass  # a knob this kernel does not have (memory.swap.max without swap accounting, ...)
        return group

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a task of this grading for passing ``memory.max``."""
        try:
            events = dict(line.split() for line in (self.path / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return int(events.get("oom_kill", 0)) > 0 or int(events.get("oom_group_kill", 0)) > 0

    def kill(self) -> None:
        """Every task in the cgroup ended (``cgroup.kill``; on older kernels, SIGKILL to each until none is left)."""
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            pass
        for _ in range(200):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove the cgroup (a cgroup goes once its last task has been reaped)."""
        self.kill()
        for _ in range(250):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def entering_command(argv: list[str], group: GradingCgroup | None) -> list[str]:
    """``argv``, run by a process that first moves itself into ``group`` (``echo 0 > cgroup.procs``, then exec):
    everything it starts is in the cgroup from its first instruction."""
    if group is None:
        return argv
    return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', group.procs, *argv]
