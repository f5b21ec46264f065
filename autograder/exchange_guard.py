"""What ``autograder collect`` accepts from the nbgrader exchange.

A submission in the exchange's inbound folder is named
``<student>+<assignment>+<timestamp>``, but a name is only a claim: anyone
who may submit can create a folder named after another student, or put in it
a link to a file they cannot read themselves (the instructor's solutions),
which the collector, reading with the instructor's rights, would copy.  So a
submission is taken only if what the file system records agrees with it:

* the submitting account -- the owner of the submission folder -- is the
  student the name claims (the exchange's default layout has every student
  submit from their own account);
* every entry inside is a plain file or folder owned by that same account
  (no symbolic links, no hard links to someone else's file, no devices or
  pipes).

A refused submission is left where it is and named, with the reason, in the
collector's output; an earlier genuine submission of the same student is
collected in its place.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def inspect_submission(folder: Path, student_id: str) -> str:
    """'' if ``folder`` may be collected as ``student_id``'s submission, else one sentence why not."""
    try:
        top = os.lstat(folder)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(top.st_mode) or not stat.S_ISDIR(top.st_mode):
        return "it is a link or not a folder"
    owner = account_name(top.st_uid)
    if owner != student_id:
        return f"it was submitted by the account '{owner}', not by '{student_id}'"
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            st = os.lstat(path)
            rel = path.relative_to(folder)
            if stat.S_ISLNK(st.st_mode):
                return f"'{rel}' is a symbolic link (a submission holds only its own files)"
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                return f"'{rel}' is not a plain file"
            if st.st_uid != top.st_uid:
                return f"'{rel}' belongs to the account '{account_name(st.st_uid)}', not to '{student_id}'"
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                return f"'{rel}' is a hard link to another file"
    return ""


def guarded_collect_class():
    """nbgrader's ExchangeCollect, taking only the submissions :func:`inspect_submission` accepts."""
    import glob

    from nbgrader.exchange.default import ExchangeCollect

    class GuardedCollect(ExchangeCollect):
        refused: list[tuple[str, str]]

        def init_src(self):
            super().init_src()  # the exchange's checks, and the due date
            self.refused = []
            student = self.coursedir.student_id or "*"
            pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
            by_student: dict[str, list[dict]] = {}
            for path in glob.glob(pattern):
                record = self._path_to_record(path)
                problem = inspect_submission(Path(path), record["username"])
                if problem:
                    self.refused.append((record["filename"], problem))
                    self.log.warning("Refused submission %s: %s", record["filename"], problem)
                    continue
                by_student.setdefault(record["username"], []).append(record)
            self.src_records = []
            for records in by_student.values():
                records = self._sort_by_timestamp(records)
                if self.duedate is not None and self.before_duedate:
                    records = [r for r in records if r["timestamp"] <= self.duedate] or records
                self.src_records.append(records[0])

        def do_copy(self, src, dest, log=None):
            # Checked above; checked again here, as the files may have changed since.
            student = os.path.basename(src).rsplit("+", 3)[0]
            problem = inspect_submission(Path(src), student)
            if problem:
                self.refused.append((os.path.basename(src), problem))
                self.log.warning("Refused submission %s: %s", os.path.basename(src), problem)
                return
            super().do_copy(src, dest, log)

    return GuardedCollect
