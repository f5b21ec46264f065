"""The nbgrader bridge, with a stand-in for the grading engine (fast, no kernels run).

What is checked here is the wiring: which test cell gets which score, that the
score nbgrader stores is exactly ours, that the submitted notebook's Python is
never run, and that nbgrader's own sanitizing still applies. The engine itself
grades the real kernels in test_nbgrader_cycle.py.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from nbgrader import utils as nbutils

from autograder.course import load_config
from autograder.exercises import get_exercise
from autograder.grade_cells import GradeTarget, format_points, grade_target, part_points, write_outputs
from autograder.nbgrader_autograde import TRUSTED_AUTOGRADE_PREPROCESSORS, TrustedAutograde
from autograder.nbgrader_bridge import NotebookGrading
from autograder.result import ExerciseResult
from autograder.submission import submissions_from_notebook
from nbgrader_course import (
    ASSIGNMENT,
    NOTEBOOK,
    POINTS,
    SUBMISSIONS,
    gradebook_grades,
    make_course,
    manifest,
    released_course,
    results_file,
    run_cli,
    submit,
)

# nbgrader 0.9.6's gradebook code trips SQLAlchemy autoflush warnings; they are not ours.
pytestmark = pytest.mark.filterwarnings("ignore:.*not in session.*")

CORRECT = {s.exercise: s.source for s in submissions_from_notebook(SUBMISSIONS / "correct.ipynb")}


class StandIn:
    """Passes a kernel exactly when its text is the sample correct kernel's; records every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, sub, **kwargs):
        self.calls.append((sub, kwargs))
        ex = get_exercise(sub.exercise)
        ok = sub.source.strip() == CORRECT[sub.exercise].strip()
        return ExerciseResult(
            exercise=sub.exercise,
            status="passed" if ok else "failed",
            correctness_score=ex.correctness_points if ok else 0.0,
            correctness_max=ex.correctness_points,
            speed_score=ex.speed_points / 2 if ok else 0.0,
            speed_max=ex.speed_points,
            speed_measured=ok,
            message="all cases correct" if ok else "wrong values at n=257: missing bounds check?",
            timing={"speedup": 0.8, "device": "Stand-in GPU", "driver": "0.0"} if ok else None,
            backend="gpu",
            device="Stand-in GPU",
        )


def test_grade_target_reads_the_hidden_call():
    src = '# x\ncheck("saxpy")\n### BEGIN HIDDEN TESTS\nfrom autograder.nbgrader_cells import grade\ngrade("saxpy", part="speed")\n### END HIDDEN TESTS'
    assert grade_target(src) == GradeTarget("saxpy", "speed")
    assert grade_target('grade("reduce_sum")') == GradeTarget("reduce_sum", "correctness")
    assert grade_target('check("saxpy")') is None
    assert grade_target("this is not python(") is None
    with pytest.raises(ValueError):
        grade_target('grade("saxpy", part="style")')
    with pytest.raises(ValueError):
        grade_target('grade("saxpy")\ngrade("reduce_sum")')


@pytest.mark.parametrize("score,maximum,points", [(6.0, 6.0, 6.0), (1.0, 3.0, 8.0), (2.0, 7.0, 4.0),
                                                   (0.0, 2.0, 2.0), (0.75, 2.0, 2.0), (5.0, 6.0, 8.0)])
def test_nbgrader_reads_back_exactly_our_points(score, maximum, points):
    """The outputs we write make nbgrader's determine_grade return our number, to the bit."""
    result = ExerciseResult("saxpy", "failed", correctness_score=score, correctness_max=maximum,
                            speed_score=0.0, speed_max=2.0, message="why")
    cell = new_code_cell('grade("saxpy", part="correctness")')
    cell.metadata = {"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t",
                                  "points": points, "schema_version": 3}}
    student = new_code_cell("print('hi')", outputs=[nbformat.v4.new_output("stream", name="stdout", text="hi")])
    nb = nbformat.v4.new_notebook(cells=[student, cell])
    grading = NotebookGrading(student="s", notebook="n", results={"saxpy": result})
    write_outputs(nb, grading.results)
    expected = part_points(result, "correctness", points)
    assert expected == (score if maximum == points else points * score / maximum)
    assert nbutils.determine_grade(cell) == (expected, points)
    assert float(format_points(expected)) == expected
    assert student.outputs == []  # student cells are cleared
    assert [o.output_type for o in cell.outputs] == ["stream", "execute_result"]
    assert cell.outputs[0].name == "stdout" and "why" in cell.outputs[0].text


def test_a_test_cell_without_a_result_scores_zero_not_full_marks():
    cell = new_code_cell('check("saxpy")')
    cell.metadata = {"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t",
                                  "points": 5, "schema_version": 3}}
    nb = nbformat.v4.new_notebook(cells=[cell])
    write_outputs(nb, NotebookGrading(student="s", notebook="n").results)
    assert nbutils.determine_grade(cell) == (0.0, 5.0)


def test_the_grading_pass_cannot_be_configured_to_execute(tmp_path):
    from nbgrader.preprocessors import Execute

    course = make_course(tmp_path)
    config = load_config(course)
    config.Autograde.autograde_preprocessors = [Execute]
    conv = TrustedAutograde(config=config)
    conv.exporter = conv.exporter_class(parent=conv, config=config)
    conv._sanitizing = False
    conv._init_preprocessors()
    names = [type(p).__name__ for p in conv.exporter._preprocessors]
    assert "Execute" not in names and names[0] == "TrustedGrade"


def test_the_course_config_names_the_trusted_grading_pass():
    """nbgrader_config.py's list (what a plain `nbgrader autograde` would run) imports, and is the enforced one."""
    from traitlets.utils.importstring import import_item

    config = load_config(Path(__file__).parents[2])
    assert [import_item(name) for name in config.Autograde.autograde_preprocessors] == TRUSTED_AUTOGRADE_PREPROCESSORS


@pytest.fixture(scope="module")
def standin_course(tmp_path_factory):
    """A course graded with the stand-in: the samples, the Python-level hostiles and a canary."""
    tmp = tmp_path_factory.mktemp("standin")
    course = released_course(tmp, ["correct", "wrong", "blank", "input_transformer", "monkeypatch",
                                   "print_score", "read_hidden", "write_gradebook", "forged_metadata"])

    # A canary: correct kernels, plus Python that would leave a file behind if it ever ran.
    canary_file = tmp / "the-notebook-ran"
    nb = nbformat.read(SUBMISSIONS / "correct.ipynb", as_version=4)
    nb.cells.insert(2, new_code_cell(f"open({str(canary_file)!r}, 'w').write('ran')"))
    nb.cells.append(new_code_cell(f"open({str(canary_file)!r}, 'w').write('ran')"))
    path = tmp / "canary.ipynb"
    nbformat.write(nb, path)
    submit(course, "canary", path)
    # Late by two days: nbgrader's late penalty still applies.
    submit(course, "late", SUBMISSIONS / "correct.ipynb", timestamp="2026-12-30 10:00:00.000000 UTC")

    standin = StandIn()
    config = load_config(course)
    config.CourseDirectory.student_id = "*"
    config.LateSubmissionPlugin.penalty_method = "zero"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=nbutils.parse_utc("2026-12-01 00:00:00 UTC"))
    from nbgrader.coursedir import CourseDirectory

    cd = CourseDirectory(config=config)
    cd.assignment_id = ASSIGNMENT
    messages = []
    conv = TrustedAutograde(coursedir=cd, config=config)
    conv.force = True
    conv.grade_fn = standin
    conv.progress = messages.append
    conv.start()
    return course, standin, canary_file, messages


def _total(grades: dict) -> float:
    return sum(g["auto"] for g in grades.values())


def test_scores_are_the_engine_results_scaled_to_the_cells(standin_course):
    course, standin, _, messages = standin_course
    grades = gradebook_grades(course)
    # Stand-in: correct kernels get full correctness and half the speed points.
    assert {k: v["auto"] for k, v in grades["correct"].items()} == {
        "saxpy_correctness": 6.0, "saxpy_speed": 1.0, "reduce_sum_correctness": 8.0, "reduce_sum_speed": 2.0}
    assert _total(grades["wrong"]) == 0.0
    assert _total(grades["blank"]) == 0.0
    res = results_file(course, "correct")
    assert res["exercises"]["saxpy"]["device"] == "Stand-in GPU"
    assert res["exercises"]["saxpy"]["timing"]["speedup"] == 0.8
    assert res["grading_seconds"] >= 0
    assert any("graded in" in m for m in messages)


def test_the_engine_gets_only_kernel_text_and_launch_integers(standin_course):
    _, standin, _, _ = standin_course
    assert standin.calls
    for sub, kwargs in standin.calls:
        assert kwargs["mode"] == "hidden" and isinstance(kwargs["student_key"], bytes)
        assert kwargs["student_id"]
        assert all(isinstance(v, int) for v in sub.launch.values())
        assert "import" not in sub.source and "get_ipython" not in sub.source
    # One call per exercise per student: the correctness and speed cells share it.
    students = [kw["student_id"] for _, kw in standin.calls]
    assert students.count("correct") == 2


def test_the_submitted_notebook_never_runs(standin_course):
    course, _, canary_file, _ = standin_course
    assert not canary_file.exists()
    assert _total(gradebook_grades(course)["canary"]) == 17.0


@pytest.mark.parametrize("name", ["input_transformer", "monkeypatch", "print_score", "read_hidden", "write_gradebook",
                                  "forged_metadata"])
def test_python_tricks_score_what_their_honest_twin_scores(standin_course, name):
    course, _, _, _ = standin_course
    twin = manifest()[name]["twin"]
    grades = gradebook_grades(course)
    assert _total(grades[name]) <= _total(grades[twin])
    assert _total(grades[name]) == 0.0  # blank kernels: nothing to earn, whatever the Python does
    for g in grades[name].values():
        assert g["manual"] is None and g["extra"] is None
    assert {k: v["max"] for k, v in grades[name].items()} == POINTS


def test_forged_metadata_is_undone(standin_course):
    course, _, _, _ = standin_course
    nb = nbformat.read(course / "autograded" / "forged_metadata" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
              for c in nb.cells if nbutils.is_grade(c)}
    assert graded == POINTS
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code" and c.source == "8.0")


def test_autograded_notebook_has_scores_in_test_cells_only(standin_course):
    course, _, _, _ = standin_course
    nb = nbformat.read(course / "autograded" / "input_transformer" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if nbutils.is_grade(cell):
            # OverwriteCells restored the instructor's test cell, hidden part included.
            assert grade_target(cell.source) is not None
            assert nbutils.determine_grade(cell)[0] == 0.0
            assert "failed" in cell.outputs[0].text or "No `%%cuda" in cell.outputs[0].text
        else:
            assert cell.outputs == []


def test_late_penalty_is_nbgraders(standin_course):
    from nbgrader.api import Gradebook

    course, _, _, _ = standin_course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        late = gb.find_submission(ASSIGNMENT, "late")
        on_time = gb.find_submission(ASSIGNMENT, "correct")
        assert late.score == on_time.score == 17.0
        assert late.late_submission_penalty == 17.0 and on_time.late_submission_penalty == 0.0


def test_export_csv_and_gradescope(standin_course, tmp_path):
    import csv
    import json

    course, _, _, _ = standin_course
    run_cli(course, "export", ASSIGNMENT, "--csv", str(tmp_path / "g.csv"), "--gradescope", str(tmp_path / "gs"))
    rows = {r["student"]: r for r in csv.DictReader(open(tmp_path / "g.csv"))}
    assert rows["correct"]["score"] == "17" and rows["correct"]["final_score"] == "17"
    assert rows["late"]["final_score"] == "0"
    assert rows["correct"]["saxpy_correctness"] == "6" and rows["correct"]["reduce_sum_speed"] == "2"
    assert rows["correct"]["saxpy_speedup"] == "0.800" and rows["correct"]["device"] == "Stand-in GPU"
    assert rows["wrong"]["saxpy_status"] == "failed"
    gs = json.loads((tmp_path / "gs" / "correct" / "results.json").read_text())
    assert gs["score"] == 17.0
    assert [(t["name"], t["score"], t["max_score"]) for t in gs["tests"]] == [
        ("saxpy (correctness)", 6.0, 6.0), ("saxpy (speed)", 1.0, 2.0),
        ("reduce_sum (correctness)", 8.0, 8.0), ("reduce_sum (speed)", 2.0, 4.0)]
    assert "Stand-in GPU" in gs["output"]
    wrong = json.loads((tmp_path / "gs" / "wrong" / "results.json").read_text())
    assert wrong["score"] == 0.0 and "missing bounds check" in wrong["tests"][0]["output"]


def test_grade_notebook_writes_gradescope_results(tmp_path, monkeypatch, capsys):
    """``autograder grade-notebook`` (no gradebook), as a Gradescope runner would call it."""
    import json

    import autograder.nbgrader_bridge as bridge
    from autograder.cli import main

    standin = StandIn()
    monkeypatch.setattr(bridge, "_default_grade_fn", lambda: standin)
    monkeypatch.setenv("DLK_GRADER_SECRET", "test-secret")  # the course here is the project: leave no secret in it
    out = tmp_path / "results.json"
    main(["grade-notebook", str(SUBMISSIONS / "correct.ipynb"), "--assignment", ASSIGNMENT,
          "--student", "s1", "--results-json", str(out), "--course-dir", str(Path(__file__).parents[2])])
    data = json.loads(out.read_text())
    assert data["score"] == 17.0
    assert [(t["name"], t["score"], t["max_score"]) for t in data["tests"]] == [
        ("saxpy (correctness)", 6.0, 6.0), ("saxpy (speed)", 1.0, 2.0),
        ("reduce_sum (correctness)", 8.0, 8.0), ("reduce_sum (speed)", 2.0, 4.0)]
    assert "grading took" in capsys.readouterr().out
    assert [kw["student_id"] for _, kw in standin.calls] == ["s1", "s1"]
