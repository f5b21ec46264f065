"""The emulator's runtime, built once per host for every sandboxed grading on the CPU to link with.

A grading child on the CPU emulator links the student's kernel with the
emulator's runtime (``kernels/runtime/emulator/runtime.cpp``). Each student has
a build cache of their own (nothing one grading leaves in a cache is used for
another's), so built in the child the runtime costs g++ several seconds for
every student, for sources that never change: more than a whole grading of a
blank notebook. So the grading process (trusted: no student code runs in it)
builds it, into a folder of the grader's cache that only grading processes
write (:data:`HOST_FOLDER`), and every sandboxed child gets that folder
read-only (``$DLK_EMULATOR_PREBUILT``); the emulator takes the runtime from it
when the name -- a hash of the compiler, its flags and every source of the
runtime -- matches and its bytes hash to the hash recorded beside it, and
builds its own otherwise. A child can read the folder but never write it, so
nothing a grading does reaches another.

The folder outlives the process: the next ``autograder grade``, each worker of
a cluster and the first ``check()`` of a notebook find the runtime built and
verified (its record checked, a build that fails it made again) instead of
spending g++'s several seconds on it again.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from kernels.runtime.emulator import build

from .host_folders import lent_folder

_lock = threading.Lock()
_folder: str | None = None
#: The folder of the runtimes built on this host, below the grader's cache (each under a name that is a hash of
#: what built it, so that runtimes of other compilers, settings or sources lie side by side).
HOST_FOLDER = "prebuilt-host"


def folder(cache_base: Path, child_env: dict, profile: bool = False) -> str | None:
    """The folder holding the runtime a grading child with environment ``child_env`` links with (the
    compiler and the emulator's settings are the child's, which may differ from this process's):
    :data:`HOST_FOLDER` below ``cache_base`` (beside the students' build caches, on a file system their
    builds run from), the runtime built there unless an earlier grading process built it; None when it
    cannot be built here: the child then builds its own.  ``profile``: the runtime of the profiling build
    too (check() profiles a kernel; grading never does)."""
    global _folder
    with _lock:
        if _folder is not None and os.path.isdir(_folder):
            if profile:
                _add_profiling_runtime(_folder, child_env)
            return _folder
        try:
            cache_base.mkdir(parents=True, exist_ok=True)
            _remove_orphans(cache_base)
            made = lent_folder(cache_base, HOST_FOLDER)
            if made is None:
                return None  # only a folder of the grader's own is lent: no one else may have written it
            build.toolchain(made, env=child_env)  # a runtime found there is verified against its record first
            _readable(made)
        except Exception:  # noqa: BLE001 - the prebuilt runtime only saves time: without it the child builds
            return None
        _folder = str(made)
        if profile:
            _add_profiling_runtime(_folder, child_env)
        return _folder


_with_profiling: set[str] = set()


def _add_profiling_runtime(made: str, child_env: dict) -> None:
    """The profiling build's runtime (no AddressSanitizer) beside the other, built once per folder."""
    if made in _with_profiling:
        return
    try:
        build.toolchain(Path(made), env=child_env, profile=True)
        _readable(Path(made))
    except Exception:  # noqa: BLE001 - only saves time: without it the child builds its own
        return
    _with_profiling.add(made)


def _readable(made: Path) -> None:
    """Every build of the folder readable to the sandbox's uid (they are written private, by mkstemp)."""
    for built in made.iterdir():
        try:
            if built.is_file() and not built.is_symlink() and built.stat().st_mode & 0o777 != 0o644:
                built.chmod(0o644)
        except OSError:  # another grading process's build in progress, renamed or removed meanwhile
            continue


def _remove_orphans(cache_base: Path) -> None:
    """The folders a grading process made for itself alone (before the runtime was kept per host) whose
    process has ended without its exit handlers (a cluster worker that was killed): a few megabytes each,
    nothing else removes them."""
    for orphan in cache_base.glob("prebuilt-*-*"):
        try:
            os.kill(int(orphan.name.split("-")[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(orphan, ignore_errors=True)
        except (ValueError, PermissionError):
            continue


def built_folder() -> str | None:
    """The folder this process lends, if any (what every sandboxed CPU grading since got read-only)."""
    return _folder
