"""The course's grading secret: created once, kept in the course directory, reused by every grading.

The hidden seeds and the per-student hidden sizes derive from it (see
:func:`autograder.case_plan.derive_seed`), so regrading a submission draws the
same cases and gives the same correctness score. The file lies in the course
directory beside ``nbgrader_config.py``, outside ``exercises/`` (released),
``submitted/`` and ``autograded/``; ``.gitignore`` keeps it out of git. Losing it
only means later gradings draw other hidden cases.

The secret itself stays in the instructor's process: what grades one
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
#: Where a secret given in the environment overrides the file.
SECRET_ENV = "DLK_GRADER_SECRET"


def secret_path(course_dir: str) -> str:
    return os.path.join(os.path.abspath(course_dir), FILE_NAME)


def course_secret(course_dir: str) -> tuple[str, str]:
    """``(secret, where it came from)``: $DLK_GRADER_SECRET, else the course's file (made on first use)."""
    env = os.environ.get(SECRET_ENV)
    if env:
        return env, f"${SECRET_ENV}"
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


def read_secret_file(path: str) -> str:
    """The secret in ``path``; a clear error when it is empty."""
    with open(path) as f:
        value = f.read().strip()
    if not value:
        raise SystemExit(f"autograder: the secret file {path} is empty; delete it to make a new one "
                         f"(later gradings then draw other hidden cases) or restore it")
    return value


def student_key(secret: str | bytes, assignment: str, student: str) -> str:
    """The key one student's hidden cases in one assignment derive from (hex): an HMAC of the course secret.

    A grading worker holds only this key: it cannot compute another student's
    cases, nor the course secret, from it.
    """
    key = secret if isinstance(secret, bytes) else str(secret).encode()
    message = b"dlk student key\0" + assignment.encode() + b"\0" + student.encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()
