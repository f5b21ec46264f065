"""The one place a grading may write: a tmpfs of its own, limited in size, counted in inodes, gone at its end.

Inside the sandbox the grading child's working directory (its ``HOME``,
``TMPDIR``, build cache and the arrays it hands back) is a tmpfs that
bubblewrap mounts there (``--size``: the kernel refuses a write past
:data:`SCRATCH_BYTES`), not a folder of the grader's disk.  Nothing a grading
writes can fill the disk, reach the next grading, or outlive it: the tmpfs
belongs to the sandbox's mount namespace, and once the grader has read what it
needs the last reference to it goes and the kernel frees it, whatever the
grading's end (the grader's own death included: its descriptor goes with it).

The grader takes its reference when the child says it is ready, before any of
the submission's code exists (the child waits for it): it opens the tmpfs
through ``/proc/<pid>/root`` of a process of the sandbox, and reads the arrays
through that descriptor after the sandbox is gone (:attr:`GradingScratch.path`).
While the grading runs it counts the tmpfs's blocks (memory, with the rest the
grading holds) and inodes (an empty file takes no block, but kernel memory
still), from ``fstatvfs``: a tmpfs mounted in a user namespace takes no inode
limit, so :data:`SCRATCH_INODES` is the grader's.

Where the sandbox cannot start (``check()`` on a student's own machine) the
scratch space is a temporary folder, counted by walking it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from .process_tree import descendants, folder_usage

#: The size of a grading's tmpfs: the arrays it hands back (the largest exercise's timing-size output is about
#: 220 MiB), the compiler's temporary files and the emulator's builds, with room to spare.
SCRATCH_BYTES = 1 * 2**30
#: Files and folders a grading may make there (an honest one makes a few dozen).
SCRATCH_INODES = 20_000
#: A tmpfs this full was filled by the submission (the grader's own files take a fraction of it).
FULL_SHARE = 0.9


class GradingScratch:
    """The scratch space of one grading: made before the child starts, attached when it is ready, closed at the end."""

    def __init__(self, sandboxed: bool):
        self.sandboxed = sandboxed
        self.limit_bytes, self.limit_inodes = SCRATCH_BYTES, SCRATCH_INODES
        # on the host: the sandbox's working directory (its tmpfs is mounted there inside), or the scratch itself
        self.host_dir = tempfile.mkdtemp(prefix="dlk-grade-")
        self._fd = -1

    # ------------------------------------------------------------------ the tmpfs, from outside the sandbox
    def attach(self, root_pid: int) -> bool:
        """Open the sandbox's tmpfs through a process below ``root_pid`` in another mount namespace (the
        sandbox's); False when none shows it (the sandbox is gone, or never made it)."""
        if not self.sandboxed:
            return True
        own_namespace = os.stat("/proc/self/ns/mnt").st_ino
        host = os.stat(self.host_dir)
        for pid in descendants(root_pid)[1:]:
            try:
                if os.stat(f"/proc/{pid}/ns/mnt").st_ino == own_namespace:
                    continue
                fd = os.open(f"/proc/{pid}/root{self.host_dir}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) == (host.st_dev, host.st_ino):
                os.close(fd)  # the host's folder, not the tmpfs over it
                continue
            self._fd = fd
            return True
        return False

    @property
    def attached(self) -> bool:
        return not self.sandboxed or self._fd >= 0

    @property
    def path(self) -> str:
        """Where the grader reads what the grading left: the tmpfs through the descriptor it holds, or the folder."""
        return f"/proc/self/fd/{self._fd}" if self.sandboxed else self.host_dir

    # ------------------------------------------------------------------ what the grading wrote
    def usage(self) -> tuple[int, int]:
        """(bytes, inodes) the grading's files take."""
        if not self.sandboxed:
            return folder_usage([self.host_dir], 2**62, self.limit_inodes + 1)
        if self._fd < 0:
            return 0, 0
        vfs = os.fstatvfs(self._fd)
        return (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, max(0, vfs.f_files - vfs.f_ffree - 1)

    def in_memory_bytes(self) -> int:
        """What the tmpfs holds (memory, as the processes' own pages are); nothing for a folder on disk."""
        return self.usage()[0] if self.sandboxed else 0

    def over_limit(self) -> bool:
        """The grading wrote more than it may: too many inodes, or (a folder on disk) too many bytes."""
        size, inodes = self.usage()
        return inodes > self.limit_inodes or (not self.sandboxed and size > self.limit_bytes)

    def full(self) -> bool:
        """Whether the submission filled the space (a write that failed then is its own doing)."""
        size, inodes = self.usage()
        return size >= FULL_SHARE * self.limit_bytes or inodes >= FULL_SHARE * self.limit_inodes

    def limit_text(self) -> str:
        """The limits, as a student reads them."""
        size = (f"{self.limit_bytes / 2**30:g} GiB" if self.limit_bytes >= 2**30
                else f"{self.limit_bytes / 2**20:g} MiB")
        return f"{size} of files, or {self.limit_inodes} files and folders"

    def close(self) -> None:
        """Let go of the tmpfs (the kernel frees it) and remove the host's folder."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        shutil.rmtree(self.host_dir, ignore_errors=True)
