"""The course secret: created once, kept in the course directory, reused by every grading.

This module alone reads and creates it.  The hidden seeds and the per-student
hidden sizes derive from it (see :func:`autograder.case_plan.derive_seed`), so
regrading a submission draws the same cases and gives the same correctness
score. The file lies in the course directory beside ``nbgrader_config.py``,
outside ``exercises/`` (released), ``submitted/`` and ``autograded/``;
``.gitignore`` keeps it out of git. Losing it only means later gradings draw
other hidden cases.  ``--secret-file`` or ``$DLK_GRADER_SECRET`` name another one.

The course secret stays in the instructor's process: what grades one
student's submission (in this process or on a cluster worker) is given that
student's key, :func:`student_key`, from which the hidden seeds and sizes of
that student's cases derive, and nothing about any other student's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

#: The file name, in the course directory (``.gitignore`` lists ``course_secret*``).
FILE_NAME = "course_secret"
#: Where a course secret given in the environment overrides the file.
COURSE_SECRET_ENV = "DLK_GRADER_SECRET"


def secret_path(course_dir: str) -> str:
    return os.path.join(os.path.abspath(course_dir), FILE_NAME)


def get_course_secret(course_dir: str, secret_file: str | None = None) -> tuple[str, str]:
    """``(course secret, where it came from)``: ``secret_file``, else $DLK_GRADER_SECRET, else the course's file
    (made on first use), so that regrades agree."""
    if secret_file:
        return _given_file(secret_file), secret_file
    env = os.environ.get(COURSE_SECRET_ENV)
    if env:
        return env, f"${COURSE_SECRET_ENV}"
    path = secret_path(course_dir)
    try:
        # O_EXCL: two gradings started at once still agree on one secret.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        return read_secret_file(path), f"{path} (created now; keep it, out of version control)"
    return read_secret_file(path), path


def existing_course_secret(course_dir: str, secret_file: str | None = None) -> str | None:
    """The course secret if there is one (``secret_file``, $DLK_GRADER_SECRET, the course's file); never made here."""
    if secret_file:
        return _given_file(secret_file)
    if os.environ.get(COURSE_SECRET_ENV):
        return os.environ[COURSE_SECRET_ENV]
    path = secret_path(course_dir)
    return read_secret_file(path) if os.path.isfile(path) else None


def course_secret_of_this_run() -> str:
    """Where no course directory is at hand: $DLK_GRADER_SECRET, else a fresh random secret, for this run only
    (nothing to reproduce its hidden cases from)."""
    return os.environ.get(COURSE_SECRET_ENV) or secrets.token_hex(32)


def _given_file(secret_file: str) -> str:
    if not os.path.isfile(secret_file):
        raise SystemExit(f"autograder: --secret-file {secret_file}: no such file")
    return read_secret_file(secret_file)


def read_secret_file(path: str) -> str:
    """The secret in ``path``; a clear error when it is empty."""
    with open(path) as f:
        value = f.read().strip()
    if not value:
        raise SystemExit(f"autograder: the secret file {path} is empty; delete it to make a new one "
                         f"(later gradings then draw other hidden cases) or restore it")
    return value


def student_key(course_secret: str | bytes, assignment: str, student: str) -> str:
    """The key one student's hidden cases in one assignment derive from (hex): an HMAC of the course secret.

    A grading worker holds only this key: it cannot compute another student's
    cases, nor the course secret, from it.
    """
    key = course_secret if isinstance(course_secret, bytes) else str(course_secret).encode()
    message = b"dlk student key\0" + assignment.encode() + b"\0" + student.encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()
