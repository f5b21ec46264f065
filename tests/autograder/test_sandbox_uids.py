"""Sandbox uids are leased from a pool under a lock: no two gradings running at once ever share one.

A uid drawn from a hash of the student's name gives two of 300 students one uid about 4% of the time, and two
such gradings at once would share a process limit, files and each other's processes.  A grader running as root
(a GPU runner, CI's container) leases each sandbox's uid instead: held by a lock on a file named after it for
as long as the sandbox runs, in this process or another grader's, and let go when the sandbox is gone.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from autograder import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a grader that is not root runs its sandboxes as itself")


def test_three_hundred_gradings_at_once_run_as_three_hundred_users():
    leases = [sandbox.lease_ids() for _ in range(300)]
    try:
        uids = [lease.ids[0] for lease in leases]
        assert len(set(uids)) == 300
        assert all(uid not in (0, 65534) for uid in uids)
        assert all(lease.ids[0] == lease.ids[1] for lease in leases)  # the gid of the same number
    finally:
        for lease in leases:
            lease.release()


def _free(uid: int) -> bool:
    """Whether no one holds the lease of ``uid`` (a lock taken and let go at once)."""
    fd = os.open(os.path.join(sandbox._lease_folder(), str(uid)), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_lease_is_held_until_given_back_and_one_held_elsewhere_is_never_leased_here():
    first = sandbox.lease_ids()
    uid = first.ids[0]
    assert not _free(uid)
    first.release()
    assert _free(uid)
    # held by another grading process (another grader on the machine): never leased here meanwhile
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.path[:0] = [sys.argv[1]]; from autograder import sandbox; "
                               "lease = sandbox.lease_ids(); print(lease.ids[0], flush=True); sys.stdin.read()",
         str(sandbox.REPO_ROOT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held_elsewhere = int(holder.stdout.readline())
        mine = [sandbox.lease_ids() for _ in range(20)]
        assert held_elsewhere not in {lease.ids[0] for lease in mine}
        for lease in mine:
            lease.release()
    finally:
        holder.stdin.close()
        holder.wait()
    assert _free(held_elsewhere)  # its process has ended: the lock went with it


def test_the_leases_are_kept_where_no_one_else_may_write():
    folder = sandbox._lease_folder()
    info = os.lstat(folder)
    assert info.st_uid == 0 and not info.st_mode & 0o022
