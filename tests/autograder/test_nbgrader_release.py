"""The course layout: solutions/ (instructor) -> exercises/ (students), via nbgrader."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbgrader import utils as nbutils

from autograder.grade_cells import grade_target, instructor_test_cells
from autograder.submission import submissions_from_notebook
from nbgrader_course import ASSIGNMENT, NOTEBOOK, POINTS, REPO, make_course, run_cli

SOLUTION = REPO / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
RELEASED = REPO / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("release")
    course = make_course(tmp)
    (tmp / "exchange").mkdir(mode=0o777)  # an instructor makes the exchange once; release refuses a missing one
    out = run_cli(course, "release", "all", "--exchange", str(tmp / "exchange"))
    assert f"exercises/{ASSIGNMENT}/{NOTEBOOK}.ipynb" in out.stdout
    return course


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts)


def test_exercises_folder_is_exactly_what_generation_produces(generated):
    ours = REPO / "exercises"
    theirs = generated / "exercises"
    assert _files(ours) == _files(theirs)
    for rel in _files(ours):
        a, b = ours / rel, theirs / rel
        if rel.endswith(".ipynb"):
            # Nothing in a generated notebook is volatile: compare everything.
            assert json.loads(a.read_text()) == json.loads(b.read_text()), (
                f"{rel} differs from what `autograder release {ASSIGNMENT}` generates; regenerate exercises/")
        else:
            assert a.read_bytes() == b.read_bytes(), rel


def test_release_to_an_exchange(generated):
    released = generated.parent / "exchange" / "deep-learning-kernels" / "outbound" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert json.loads(released.read_text()) == json.loads((generated / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text())


def test_generation_records_the_assignment_in_the_gradebook(generated):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{generated / 'gradebook.db'}") as gb:
        nb = gb.find_notebook(NOTEBOOK, ASSIGNMENT)
        assert {c.name: c.max_score for c in nb.grade_cells} == POINTS
        # The hidden tests are kept in the gradebook (OverwriteCells restores them).
        sources = {c.name: c.source for c in nb.source_cells}
        assert 'grade("saxpy", part="correctness")' in sources["saxpy_correctness"]


def test_solution_notebook_has_the_graded_cells_and_points():
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = instructor_test_cells(nb)
    assert {c.grade_id: c.points for c in cells} == POINTS
    assert {(c.exercise, c.part) for c in cells} == {
        ("saxpy", "correctness"), ("saxpy", "speed"), ("reduce_sum", "correctness"), ("reduce_sum", "speed")}
    for cell in nb.cells:
        if cell.cell_type == "code" and nbutils.is_grade(cell):
            assert nbutils.is_locked(cell)
            assert "### BEGIN HIDDEN TESTS" in cell.source
    kernels = {s.exercise: s for s in submissions_from_notebook(nb)}
    assert set(kernels) == {"saxpy", "reduce_sum"}
    assert kernels["saxpy"].launch == {"block": 256}
    assert kernels["reduce_sum"].launch == {"block": 256, "grid": 1056, "shared": 1024}
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%cuda"):
            assert nbutils.is_solution(cell) and "// BEGIN SOLUTION" in cell.source


def test_student_notebook_has_c_stubs_and_no_hidden_tests():
    nb = nbformat.read(RELEASED, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "BEGIN HIDDEN TESTS" not in text and "grade(" not in code
    assert "BEGIN SOLUTION" not in text and "NotImplementedError" not in text
    assert "atomicAdd(out, partial" not in code and "for (int" not in code  # no solution left
    kernels = {s.exercise: s for s in submissions_from_notebook(nb)}
    assert set(kernels) == {"saxpy", "reduce_sum"}
    for sub in kernels.values():
        assert "// YOUR CODE HERE" in sub.source
        assert sub.source.count("{") == sub.source.count("}")  # the stub is still a complete function
    # Every test cell still says which exercise it checks, visibly.
    for cell in nb.cells:
        if cell.cell_type == "code" and nbutils.is_grade(cell):
            assert grade_target(cell.source) is None


def test_stub_kernels_compile_with_nvcc_syntax(tmp_path):
    """The stub is a C comment, so the student's starting kernel compiles (and fails the checks)."""
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not shutil.os.path.exists(nvcc):
        pytest.skip("nvcc not installed")
    nb = nbformat.read(RELEASED, as_version=4)
    for sub in submissions_from_notebook(nb):
        src = tmp_path / f"{sub.exercise}.cu"
        src.write_text(sub.source)
        proc = subprocess.run([nvcc, "-arch=sm_90", "-cubin", "-o", str(tmp_path / "x.cubin"), str(src)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr


def test_exchange_round_trip_fetch_submit_collect(generated, tmp_path, monkeypatch):
    """Released to the exchange, fetched and submitted by a student, collected by ``autograder collect``."""
    import getpass
    import shutil

    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeSubmit
    from traitlets.config import Config

    from nbgrader_course import SUBMISSIONS

    exchange = generated.parent / "exchange"
    home = tmp_path / "student"
    home.mkdir()
    monkeypatch.chdir(home)
    c = Config()
    c.Exchange.root = str(exchange)
    c.CourseDirectory.course_id = "deep-learning-kernels"
    c.CourseDirectory.root = str(home)
    cd = CourseDirectory(config=c)
    cd.assignment_id = ASSIGNMENT
    auth = Authenticator(config=c)
    ExchangeFetchAssignment(coursedir=cd, authenticator=auth, config=c).start()
    fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert json.loads(fetched.read_text()) == json.loads(RELEASED.read_text())
    shutil.copy(SUBMISSIONS / "correct.ipynb", fetched)
    ExchangeSubmit(coursedir=cd, authenticator=auth, config=c).start()

    out = run_cli(generated, "collect", ASSIGNMENT, "--exchange", str(exchange))
    assert "1 submission(s)" in out.stdout
    folder = generated / "submitted" / getpass.getuser() / ASSIGNMENT
    assert (folder / "timestamp.txt").exists()
    assert json.loads((folder / f"{NOTEBOOK}.ipynb").read_text()) == json.loads((SUBMISSIONS / "correct.ipynb").read_text())
