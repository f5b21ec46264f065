"""The course as nbgrader lays it out: its configuration, its folders, and what its gradebook holds.

Every command and every grading path (in this process, on a cluster) finds the
course's notebooks and submissions through these functions.  The ``require_*``
functions stop a command whose input names something the course does not have
(a course directory, an assignment, a gradebook, an exchange, a student) with
one sentence that says what to do, as ``SystemExit``.
"""

from __future__ import annotations

import os

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader


def load_config(course_dir: str, db: str | None = None, exchange: str | None = None) -> Config:
    """The course's ``nbgrader_config.py`` (else the book's course layout), with its root, database and exchange."""
    course_dir = os.path.abspath(course_dir)
    config = Config()
    path = os.path.join(course_dir, "nbgrader_config.py")
    if os.path.exists(path):
        config.merge(PyFileConfigLoader("nbgrader_config.py", path=course_dir).load_config())
    else:
        print(f"note: no nbgrader_config.py in {course_dir}; using the course layout defaults", flush=True)
        config.CourseDirectory.source_directory = "solutions"
        config.CourseDirectory.release_directory = "exercises"
        config.ClearSolutions.code_stub = {"python": "// YOUR CODE HERE"}
    config.CourseDirectory.root = course_dir
    if db:
        config.CourseDirectory.db_url = db
    if exchange:
        config.Exchange.root = os.path.abspath(exchange)
    return config


def require_course_dir(course_dir: str) -> None:
    if not os.path.isdir(course_dir):
        raise SystemExit(f"autograder: there is no course directory {os.path.abspath(course_dir)}: pass --course-dir "
                         f"with the course's folder (the one holding nbgrader_config.py), or run from inside it")


def gradebook_file(cd: CourseDirectory) -> str | None:
    """The gradebook's file when it is SQLite (the default), else None."""
    url = cd.db_url
    return url[len("sqlite:///"):] if url.startswith("sqlite:///") else None


def course_assignments(cd: CourseDirectory) -> list[str]:
    """The assignments of the course: the folders of the instructor's notebooks (``solutions/``)."""
    base = os.path.join(cd.root, cd.source_directory)
    return sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))) if os.path.isdir(base) else []


def released_assignments(cd: CourseDirectory) -> list[str]:
    """The assignments in the gradebook (released); none when there is no gradebook yet."""
    path = gradebook_file(cd)
    if path is not None and not os.path.exists(path):
        return []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        return sorted(a.name for a in gb.assignments)


def require_assignment(cd: CourseDirectory, assignment: str, released: bool = True) -> None:
    """Stop, saying what to do, unless ``assignment`` is one of the course's (and, if ``released``, is in the
    gradebook)."""
    known = course_assignments(cd)
    in_gradebook = released_assignments(cd)
    if assignment not in known and assignment not in in_gradebook:
        names = ", ".join(sorted(set(known) | set(in_gradebook))) or "none yet"
        raise SystemExit(f"autograder: there is no assignment {assignment} in this course (its assignments: {names}; "
                         f"each is a folder of {os.path.join(cd.root, cd.source_directory)})")
    if not released or assignment in in_gradebook:
        return
    path = gradebook_file(cd)
    if path is not None and not os.path.exists(path):
        raise SystemExit(f"autograder: there is no gradebook at {path}: `autograder release {assignment}` makes it "
                         f"(pass --db with the gradebook's URL if it is elsewhere)")
    raise SystemExit(f"autograder: {assignment} is not in the gradebook: release it first with "
                     f"`autograder release {assignment}`")


def require_exchange(root: str, releasing: bool) -> None:
    """The exchange ``root`` must be a folder this account can write (nbgrader needs that to release and to collect)."""
    if not os.path.exists(root):
        if releasing:
            raise SystemExit(f"autograder: there is no exchange at {root}; create it first, writable by every student "
                             f"(`mkdir -p {root} && chmod 777 {root}`), then release again")
        raise SystemExit(f"autograder: there is no exchange at {root}: pass the --exchange the assignment was "
                         f"released to (the folder students' `nbgrader submit` writes to)")
    if not os.path.isdir(root):
        raise SystemExit(f"autograder: the exchange {root} is not a folder: pass --exchange with the exchange's folder")
    if not os.access(root, os.W_OK | os.X_OK):
        raise SystemExit(f"autograder: the exchange {root} is not writable by this account, which nbgrader needs to "
                         f"{'release' if releasing else 'collect'}: make it writable (`chmod 777 {root}`, as its "
                         f"owner) or run as an account that can write it")


def require_submission(cd: CourseDirectory, assignment: str, student: str) -> None:
    if not os.path.isdir(submission_folder(cd, assignment, student)):
        others = submitted_students(cd, assignment)
        listed = ", ".join(others[:8]) + (", ..." if len(others) > 8 else "") if others else "none"
        raise SystemExit(f"autograder: there is no submission of {assignment} by {student} (no folder "
                         f"{submission_folder(cd, assignment, student)}; students who submitted: {listed})")


def coursedir(config: Config, assignment: str, student: str = "*") -> CourseDirectory:
    """nbgrader's view of the course's folders for ``assignment`` (and ``student``, else every one)."""
    cd = CourseDirectory(config=config)
    cd.assignment_id = assignment
    cd.student_id = student
    return cd


def submitted_students(cd: CourseDirectory, assignment: str) -> list[str]:
    """Every student with a folder of ``assignment`` under ``submitted/``."""
    base = os.path.join(cd.root, cd.submitted_directory)
    return sorted(
        s for s in os.listdir(base) if os.path.isdir(os.path.join(base, s, assignment))
    ) if os.path.isdir(base) else []


def source_root(cd: CourseDirectory) -> str:
    """The folder of the instructor's notebooks, one subfolder per assignment (``solutions/``)."""
    return os.path.join(cd.root, cd.source_directory)


def submission_folder(cd: CourseDirectory, assignment: str, student: str) -> str:
    return cd.format_path(cd.submitted_directory, student, assignment)


def assignment_notebooks(cd: CourseDirectory, assignment: str) -> list[str]:
    """The notebooks of ``assignment`` the gradebook knows (nbgrader grades only those)."""
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)
        except MissingEntry:
            raise SystemExit(f"autograder: {assignment} is not in the gradebook {cd.db_url}; "
                             f"run `autograder release {assignment}` first") from None


def students_in_gradebook(cd: CourseDirectory, assignment: str) -> set[str]:
    """The students the gradebook holds a submission of ``assignment`` for."""
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            return {sub.student.id for sub in gb.find_assignment(assignment).submissions}
        except MissingEntry:
            return set()


def gradebook_snapshot(cd: CourseDirectory, assignment: str, student: str) -> dict | None:
    """What the gradebook holds of ``student``'s submission (its timestamp and automatic grades), None if nothing."""
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        return {"timestamp": sub.timestamp,
                "grades": {(nb.name, g.name): (g.auto_score, g.needs_manual_grade) for nb in sub.notebooks
                           for g in nb.grades}}


def restore_gradebook(cd: CourseDirectory, assignment: str, student: str, snapshot: dict | None) -> None:
    """Put ``student``'s submission back as :func:`gradebook_snapshot` found it (none: no submission at all)."""
    with Gradebook(cd.db_url, cd.course_id) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return
        if snapshot is None:
            gb.remove_submission(assignment, student)
            return
        sub.timestamp = snapshot["timestamp"]
        for nb in sub.notebooks:
            for grade in nb.grades:
                if (nb.name, grade.name) in snapshot["grades"]:
                    grade.auto_score, grade.needs_manual_grade = snapshot["grades"][(nb.name, grade.name)]
        gb.db.commit()
