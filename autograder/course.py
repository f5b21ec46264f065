"""The course as nbgrader lays it out: its configuration, its folders, and what its gradebook holds.

Every command and every grading path (in this process, on a cluster) finds the
course's notebooks and submissions through these functions.
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


def gradebook_total(cd: CourseDirectory, assignment: str, student: str) -> tuple[float, float]:
    """(score, max score) of ``student``'s submission of ``assignment``, as the gradebook has it."""
    with Gradebook(cd.db_url, cd.course_id) as gb:
        sub = gb.find_submission(assignment, student)
        return float(sub.score), float(sub.max_score)
