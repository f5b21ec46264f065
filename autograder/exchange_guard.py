"""What ``autograder collect`` accepts from the nbgrader exchange, read by descriptor.

A submission in the exchange's inbound folder is named
``<student>+<assignment>+<timestamp>``, but a name is only a claim: anyone
who may submit can create a folder named after another student, or put in it
a link to a file they cannot read themselves (the instructor's solutions),
which the collector, reading with the instructor's rights, would copy.  Nor
does a check hold for long: the student owns the folder, and can swap a
checked notebook for a link the moment copying starts.  So nothing is checked
by path and then copied by path.  Each submission is read once, by
descriptor, into a private staging folder, and nbgrader collects from there:

* the submission folder is opened with ``O_DIRECTORY | O_NOFOLLOW``, every
  entry below it with ``openat`` and ``O_NOFOLLOW`` relative to its folder's
  descriptor (a symbolic link anywhere, at any moment, fails to open);
* type, owner, link count and size are read from the opened descriptor
  (:func:`os.fstat`): the folder and every entry must belong to the account
  the name claims, every entry must be a plain file or folder (no devices,
  pipes, sockets), a file must have no other name (no hard link to another
  file), and the whole must fit nbgrader's ``max_dir_size``;
* the bytes are copied from that descriptor, and the file is checked again
  after the copy: a file whose size, change time or identity moved while it
  was read is refused, as is one that gave more or fewer bytes than it said.

A refused submission is left where it is and named, with the reason, in the
collector's output; an earlier genuine submission of the same student is
collected in its place.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

#: Bytes read from a submission's file at a time.
CHUNK = 1 << 20


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class Refused(Exception):
    """A submission that is not collected; the message is the sentence the collector prints."""


class _Limits:
    def __init__(self, max_file_bytes: int | None, max_total_bytes: int | None, ignore=(), include=("*",)):
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.ignore = tuple(ignore)
        self.include = tuple(include)
        self.total = 0

    def skipped(self, name: str, is_file: bool) -> bool:
        """What nbgrader's copy leaves out: ignored names, and files not included."""
        if any(fnmatch.fnmatch(name, pattern) for pattern in self.ignore):
            return True
        return is_file and not any(fnmatch.fnmatch(name, pattern) for pattern in self.include)


def _open_entry(name: str, dir_fd: int, rel: str) -> int:
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise Refused(f"'{rel}' is a symbolic link (a submission holds only its own files)") from None
        raise Refused(f"'{rel}' cannot be read ({exc.strerror})") from None


def _check(info: os.stat_result, rel: str, owner: int, student_id: str) -> None:
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise Refused(f"'{rel}' is not a plain file")
    if info.st_uid != owner:
        raise Refused(f"'{rel}' belongs to the account '{account_name(info.st_uid)}', not to '{student_id}'")
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise Refused(f"'{rel}' is a hard link to another file")


def _copy_file(fd: int, before: os.stat_result, rel: str, dest_dir: int | None, name: str, limits: _Limits) -> None:
    """The bytes of the open file ``fd`` into ``name`` in ``dest_dir`` (None: read only), checked unchanged after."""
    if limits.max_file_bytes is not None and before.st_size > limits.max_file_bytes:
        return  # left out, as nbgrader leaves out a file over max_file_size
    limits.total += before.st_size
    if limits.max_total_bytes is not None and limits.total > limits.max_total_bytes:
        raise Refused(f"it holds more than {limits.max_total_bytes // 1000} kB (nbgrader's max_dir_size)")
    out = None
    if dest_dir is not None:
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dest_dir)
    copied = 0
    try:
        while copied <= before.st_size:
            block = os.read(fd, CHUNK)
            if not block:
                break
            copied += len(block)
            if out is not None:
                view = memoryview(block)
                while view:
                    view = view[os.write(out, view):]
    finally:
        if out is not None:
            os.close(out)
    after = os.fstat(fd)
    moved = (after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino, after.st_dev) != \
            (before.st_size, before.st_mtime_ns, before.st_ctime_ns, before.st_ino, before.st_dev)
    if moved or copied != before.st_size:
        raise Refused(f"'{rel}' changed while it was being collected")


def _walk(dir_fd: int, prefix: str, owner: int, student_id: str, dest_dir: int | None, limits: _Limits) -> None:
    for name in sorted(os.listdir(dir_fd)):
        rel = f"{prefix}{name}"
        fd = _open_entry(name, dir_fd, rel)
        try:
            info = os.fstat(fd)
            _check(info, rel, owner, student_id)
            if limits.skipped(name, stat.S_ISREG(info.st_mode)):
                continue
            if stat.S_ISDIR(info.st_mode):
                sub_dest = None
                if dest_dir is not None:
                    os.mkdir(name, 0o755, dir_fd=dest_dir)
                    sub_dest = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dest_dir)
                try:
                    _walk(fd, rel + "/", owner, student_id, sub_dest, limits)
                finally:
                    if sub_dest is not None:
                        os.close(sub_dest)
            else:
                _copy_file(fd, info, rel, dest_dir, name, limits)
        finally:
            os.close(fd)


def read_submission(folder: Path, student_id: str, dest: Path | None = None, *, max_file_bytes: int | None = None,
                    max_total_bytes: int | None = None, ignore=(), include=("*",)) -> None:
    """Read the submission ``folder`` as ``student_id``'s, by descriptor, into ``dest`` (a folder made here; None:
    read only, to check).  Raises :class:`Refused`, saying why, and leaves no ``dest``, where it is not theirs."""
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Refused("it is a link or not a folder" if exc.errno in (errno.ENOTDIR, errno.ELOOP) else
                      f"it cannot be read ({exc.strerror})") from None
    dest_fd = None
    try:
        info = os.fstat(top)
        owner = info.st_uid
        if account_name(owner) != student_id:
            raise Refused(f"it was submitted by the account '{account_name(owner)}', not by '{student_id}'")
        if dest is not None:
            os.mkdir(dest, 0o755)
            dest_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        _walk(top, "", owner, student_id, dest_fd, _Limits(max_file_bytes, max_total_bytes, ignore, include))
    except BaseException:
        if dest_fd is not None:
            os.close(dest_fd)
            dest_fd = None
            shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(top)
        if dest_fd is not None:
            os.close(dest_fd)


def inspect_submission(folder: Path, student_id: str) -> str:
    """'' if ``folder`` may be collected as ``student_id``'s submission, else one sentence why not."""
    try:
        read_submission(folder, student_id)
    except Refused as exc:
        return str(exc)
    return ""


def guarded_collect_class():
    """nbgrader's ExchangeCollect, collecting each submission from a copy made by :func:`read_submission`."""
    from nbgrader.exchange.default import ExchangeCollect

    class GuardedCollect(ExchangeCollect):
        refused: list[tuple[str, str]]

        def start(self):
            self.refused = []
            self._staging = tempfile.mkdtemp(prefix="dlk-collect-")
            try:
                return super().start()
            finally:
                shutil.rmtree(self._staging, ignore_errors=True)

        def init_src(self):
            super().init_src()  # the exchange's checks, and the due date
            self.check_owner = False  # checked on the descriptors below; the staged copies are the grader's own
            student = self.coursedir.student_id or "*"
            pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
            by_student: dict[str, list[dict]] = {}
            for path in glob.glob(pattern):
                record = self._path_to_record(path)
                by_student.setdefault(record["username"], []).append(record)
            self.src_records = []
            for records in by_student.values():
                records = self._sort_by_timestamp(records)
                if self.duedate is not None and self.before_duedate:
                    records = [r for r in records if r["timestamp"] <= self.duedate] or records
                for record in records:  # the newest the student really made, read once into the staging folder
                    if self._stage(record):
                        self.src_records.append(record)
                        break
            self.inbound_path = self._staging  # nbgrader copies the staged folders, under the same names

        def _stage(self, record: dict) -> bool:
            cd = self.coursedir
            try:
                read_submission(Path(self.inbound_path) / record["filename"], record["username"],
                                Path(self._staging) / record["filename"],
                                max_file_bytes=1000 * cd.max_file_size, max_total_bytes=1000 * cd.max_dir_size,
                                ignore=cd.ignore, include=cd.include)
            except Refused as exc:
                self.refused.append((record["filename"], str(exc)))
                self.log.warning("Refused submission %s: %s", record["filename"], exc)
                return False
            return True

    return GuardedCollect
