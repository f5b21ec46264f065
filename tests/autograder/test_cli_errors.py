"""Every usual wrong input to every `autograder` command is one sentence on stderr that says what to do.

Each command runs in this process (nothing is graded): a non-zero exit status, exactly one line on stderr,
naming what is wrong, and no traceback (`-v` adds one).
"""

from __future__ import annotations

import os

import pytest

import autograder.course
from in_process import run_main
from nbgrader_course import ASSIGNMENT, REPO, SUBMISSIONS, make_course, released_course

pytestmark = pytest.mark.filterwarnings("ignore:.*not in session.*")


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """A released course with one submission, a course never released (no gradebook), and files to pass."""
    tmp = tmp_path_factory.mktemp("cli_errors")
    released = released_course(tmp / "released", ["correct"])
    unreleased = make_course(tmp / "unreleased")
    exchange_file = tmp / "not_a_folder"
    exchange_file.write_text("")
    (tmp / "empty_exchange").mkdir()
    cut = tmp / "cuda_from_python.ipynb"
    cut.write_bytes((SUBMISSIONS / "correct.ipynb").read_bytes()[:3000])
    return {"released": released, "unreleased": unreleased, "tmp": tmp, "exchange_file": exchange_file,
            "cut": cut, "other": REPO / "solutions" / "02_perceptrons_mlp" / "perceptrons_mlp.ipynb"}


# (argv with {released}, {unreleased}, {tmp}... filled in, what the one line must say)
CASES = {
    # an assignment the course does not have
    "release unknown": (["release", "99_nope", "--course-dir", "{released}"], "there is no assignment 99_nope"),
    "collect unknown": (["collect", "99_nope", "--exchange", "{tmp}/empty_exchange", "--course-dir", "{released}"],
                        "there is no assignment 99_nope"),
    "grade unknown": (["grade", "99_nope", "--course-dir", "{released}"], "there is no assignment 99_nope"),
    "feedback unknown": (["feedback", "99_nope", "--course-dir", "{released}"], "there is no assignment 99_nope"),
    "export unknown": (["export", "99_nope", "--course-dir", "{released}"], "there is no assignment 99_nope"),
    "leaderboard unknown": (["leaderboard", "99_nope", "--course-dir", "{released}"],
                            "there is no assignment 99_nope"),
    "status unknown": (["status", "99_nope", "--course-dir", "{released}"], "there is no assignment 99_nope"),
    "similarity unknown": (["similarity", "99_nope", "--course-dir", "{released}"], "unknown assignment '99_nope'"),
    "grade-notebook unknown": (["grade-notebook", "{cut}", "--assignment", "99_nope", "--course-dir", "{released}"],
                               "there is no assignment 99_nope"),
    # a course directory that is not there
    **{f"{cmd} no course": ([cmd, ASSIGNMENT, "--course-dir", "{tmp}/no_course"], "there is no course directory")
       for cmd in ("release", "collect", "grade", "feedback", "export", "leaderboard", "status", "similarity")},
    "grade-notebook no course": (["grade-notebook", "{cut}", "--assignment", ASSIGNMENT, "--course-dir",
                                  "{tmp}/no_course"], "there is no course directory"),
    # the exchange: missing, not a folder, or a folder without the course
    "release to a missing exchange": (["release", ASSIGNMENT, "--exchange", "{tmp}/no_exchange", "--course-dir",
                                       "{released}"], "there is no exchange at {tmp}/no_exchange; create it first"),
    "release to a file": (["release", ASSIGNMENT, "--exchange", "{exchange_file}", "--course-dir", "{released}"],
                          "is not a folder"),
    "collect from a missing exchange": (["collect", ASSIGNMENT, "--exchange", "/nonexistent", "--course-dir",
                                         "{released}"], "there is no exchange at /nonexistent: pass the --exchange"),
    "collect from an exchange without the course": (["collect", ASSIGNMENT, "--exchange", "{tmp}/empty_exchange",
                                                     "--course-dir", "{released}"], "has no folder of this course"),
    # a student with no submission or no grade
    "grade unknown student": (["grade", ASSIGNMENT, "--student", "nobody", "--course-dir", "{released}"],
                              f"there is no submission of {ASSIGNMENT} by nobody"),
    "feedback unknown student": (["feedback", ASSIGNMENT, "--student", "nobody", "--course-dir", "{released}"],
                                 f"nobody has no graded {ASSIGNMENT}"),
    # no gradebook (never released)
    **{f"{cmd} no gradebook": ([cmd, ASSIGNMENT, "--course-dir", "{unreleased}"], "there is no gradebook at")
       for cmd in ("grade", "feedback", "export", "leaderboard", "status")},
    # notebooks that cannot be graded
    "grade-notebook not JSON": (["grade-notebook", "{cut}", "--assignment", ASSIGNMENT, "--course-dir", "{released}"],
                                "not gradable: cuda_from_python.ipynb is cut off"),
    "grade-notebook another assignment's": (["grade-notebook", "{other}", "--assignment", ASSIGNMENT, "--course-dir",
                                             "{released}"], "is the notebook of 02_perceptrons_mlp"),
    "grade-notebook missing": (["grade-notebook", "{tmp}/nothing.ipynb", "--assignment", ASSIGNMENT, "--course-dir",
                                "{released}"], "there is no notebook at"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_input_is_one_line_with_the_fix(courses, monkeypatch, case):
    monkeypatch.setenv("DLK_GRADER_SECRET", "cli-errors-secret")
    argv, expected = CASES[case]
    fill = {k: str(v) for k, v in courses.items()}
    code, out, err = run_main(*(a.format(**fill) for a in argv))
    assert code != 0, (case, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, (case, err)
    assert "Traceback" not in err + out
    assert expected.format(**fill) in lines[0], (case, lines[0])
    assert lines[0].startswith("autograder")


def test_release_to_a_missing_exchange_creates_nothing(courses):
    missing = courses["tmp"] / "never_made"
    code, _, err = run_main("release", ASSIGNMENT, "--exchange", str(missing), "--course-dir", str(courses["released"]))
    assert code == 1 and not missing.exists()
    assert f"mkdir -p {missing} && chmod 777 {missing}" in err


def test_an_unwritable_exchange_is_named(courses, monkeypatch):
    exchange = courses["tmp"] / "read_only_exchange"
    exchange.mkdir(exist_ok=True)
    access = os.access
    # Root may write anywhere, so the test asks the question the command asks, with the answer "no".
    monkeypatch.setattr(autograder.course.os, "access",
                        lambda path, mode, **kw: False if str(path) == str(exchange) else access(path, mode, **kw))
    for command in ("release", "collect"):
        code, _, err = run_main(command, ASSIGNMENT, "--exchange", str(exchange), "--course-dir",
                                str(courses["released"]))
        (line,) = err.splitlines()
        assert code == 1 and f"the exchange {exchange} is not writable by this account" in line, line


def test_verbose_adds_the_traceback(courses):
    code, _, err = run_main("export", "99_nope", "--course-dir", str(courses["released"]), "-v")
    assert code == 1 and "Traceback" in err and err.splitlines()[-1].startswith("autograder: there is no assignment")


def test_the_commands_still_work_after_the_errors(courses, tmp_path):
    """The honest twin: the same commands with right inputs succeed (status and export need no grading)."""
    code, out, err = run_main("status", ASSIGNMENT, "--course-dir", str(courses["released"]))
    assert code == 0 and err == "" and "correct  not graded yet" in out
    code, out, err = run_main("export", ASSIGNMENT, "--csv", str(tmp_path / "g.csv"), "--course-dir",
                              str(courses["released"]))
    assert code == 0 and err == "" and (tmp_path / "g.csv").exists()
