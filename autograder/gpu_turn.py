"""Whose turn it is on the GPU: one grading at a time per card, the turn taken by the grading child itself.

:mod:`autograder.isolation` opens the lock file for each GPU grading child and
passes it in; the child (:mod:`autograder.checker`) takes its turn before its
first launch and keeps it until it ends.  Compiling and drawing inputs happen
before, beside another grading's turn; nothing of another grading runs on the
card while a kernel is timed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def pycuda_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("pycuda") is not None


def grades_on_gpu(backend: str | None = None) -> bool:
    """Whether a grading child runs on the GPU (``backend``, else ``$DLK_BACKEND``, else where PyCUDA is)."""
    choice = (backend or os.environ.get("DLK_BACKEND", "auto")).lower()
    return choice == "gpu" or (choice == "auto" and pycuda_importable())


class GpuTurn:
    """One GPU grading at a time per card, held by the grading child itself.

    The child starts, compiles the kernel and draws its inputs while another grading has the card; it takes
    this lock (an exclusive ``flock`` on a file the grader opens for it and passes in) before its first
    launch and holds it until it ends, so nothing of another grading runs on the card while a kernel is
    timed.  The grader does not count the time the child waits for its turn against the child's limit.
    """

    WAITING = "waiting_for_gpu"  # the stage the child reports while it waits for its turn

    def __init__(self, mode: str, backend: str | None):
        self.wants_gpu = grades_on_gpu(backend)
        # one lock per GPU: two workers given two cards of one host time their kernels at the same time
        card = "".join(c if c.isalnum() or c in "-_" else "_" for c in os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
        lock_name = f"dlk-gpu-grading-{os.getuid()}-{card[:64] or 'none'}.lock"
        self.path = Path(tempfile.gettempdir()) / lock_name if mode == "hidden" and self.wants_gpu else None

    def open_for_child(self) -> int | None:
        """A descriptor of the lock file of the child's own (a new open file: the child's lock is its own), or None."""
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600) if self.path is not None else None


def take_gpu_turn(fd: int, send) -> None:
    """In the child, before its first launch: wait for the card (saying so), then hold it until the process ends."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        send("stage", stage=GpuTurn.WAITING)
        fcntl.flock(fd, fcntl.LOCK_EX)
