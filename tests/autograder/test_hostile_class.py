"""A hostile class of the warm-up puzzles, through the instructor's whole cycle on the CPU emulator.

One release, one collect, one ``autograder grade`` of the whole class, one feedback, one export, shared by
the tests below: each attack a student's notebook (``submissions/puzzle_attacks.py``), graded beside its
honest twin in the same class run.  Each attack scores no more than its twin; nothing of the instructor's
solutions reaches ``submitted/``, ``autograded/``, the feedback or the exports; the honest students graded
after the attackers get exactly the points their kernels earn alone; a full disk under one student's graded
notebook ends that grading as the grader's failure, with no score.

Collect's attacks come from this account (the only one a test can submit as): a submission folder that is a
link to the solutions folder, a notebook that is a hard link to the solutions notebook, and a notebook that a
process swaps for a link to the solutions and back while collect reads it; besides, a folder named after
another student.  Each notebook holds one puzzle's cells, so that a student's grading is one puzzle's.
"""

from __future__ import annotations

import csv
import getpass
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from autograder import sandbox
from autograder.case_plan import plan_cases, submission_digest
from autograder.course_secret import student_key
from autograder.exercises import get_exercise
from autograder.submission import submission_from_cell
from nbgrader_course import cli_env, gradebook_grades, make_course, run_cli
from submissions import puzzle_attacks as attacks
from submissions.puzzle_attacks import ASSIGNMENT, ATTACKS, NOTEBOOK, TUNED, TUNED_ATTACK, TWINS
from test_exchange_guard import Swapper
from test_feedback_html import _inert
from test_infrastructure_failures import _mount_full_tmpfs

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason=f"the sandbox cannot start here: {sandbox.unavailable_reason()}"),
]

#: Time limit of one puzzle's grading (seconds): an honest puzzle needs a few on busy cores.
TIMEOUT_S = 30
SECRET = "hostile class secret"
COURSE_ID = "deep-learning-kernels"
ME = getpass.getuser()
#: The student whose graded notebook lands on a full disk (an honest map: it would score its twin's point).
FULL_DISK = "full_disk"
#: Exchange timestamps, oldest first: the honest submission, then the collect attacks.
STAMPS = {"honest": "2026-11-20 10:00:00.000000 UTC", "swapped_while_read": "2026-11-20 11:00:00.000000 UTC",
          "hard_link": "2026-11-20 12:00:00.000000 UTC", "linked_folder": "2026-11-20 13:00:00.000000 UTC"}


def _notebook(released: nbformat.NotebookNode, puzzle: str, kernel: str | None, markdown: str = "",
              outputs: tuple = ()) -> nbformat.NotebookNode:
    """The released notebook with only ``puzzle``'s cells, its kernel cell holding ``kernel`` (None: the stub),
    and the student's own markdown and saved outputs after the set-up cell."""
    nb = nbformat.from_dict(json.loads(json.dumps(released)))
    cells = []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith(("_kernel", "_correctness")) and grade_id not in (f"{puzzle}_kernel", f"{puzzle}_correctness"):
            continue
        if grade_id == f"{puzzle}_kernel" and kernel is not None:
            cell.source = kernel.rstrip("\n")
        cells.append(cell)
        if grade_id == "setup" and (markdown or outputs):
            if markdown:
                cells.append(new_markdown_cell(markdown, id="student-notes"))
            if outputs:
                shown = new_code_cell("# my plots", id="student-outputs")
                shown.outputs = [new_output("display_data", data=data) for data in outputs]
                cells.append(shown)
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def _secret_sizes(cell: str, student: str) -> set[int]:
    """The sizes of the map's hidden cases drawn for ``student``'s submission of ``cell`` beyond the public ones."""
    ex = get_exercise("map")
    sub = submission_from_cell(cell)
    launch = ex.validate_launch(sub.launch)
    key = student_key(SECRET, ASSIGNMENT, student).encode()
    plan = plan_cases(ex, launch, "hidden", key, student, submission_digest(sub.source, launch))
    return {c["shape"]["n"] for c in plan} - _public_sizes()


def _public_sizes() -> set[int]:
    ex = get_exercise("map")
    return {s["n"] for s in ex.visible_shapes} | {s["n"] for s in ex.hidden_shapes}


def _tuned_kernel() -> tuple[str, set[int], set[int]]:
    """The worst case for the grader: the student knows every size its first grading (of the honest map) drew,
    and resubmits a kernel right only on those; returns it, the sizes it knows and the ones it now draws."""
    known = _public_sizes() | _secret_sizes(attacks.MAP, TUNED)
    kernel = attacks.special_cased(known)
    drawn = _secret_sizes(kernel, TUNED)
    assert drawn and not drawn & known, "the resubmission drew a size it knows: this attack would prove nothing"
    return kernel, known, drawn


def _exchange_folder(exchange: Path, student: str, stamp: str, notebook: bytes | None = None) -> Path:
    folder = exchange / COURSE_ID / "inbound" / f"{student}+{ASSIGNMENT}+{stamp}"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text(stamp)
    if notebook is not None:
        (folder / f"{NOTEBOOK}.ipynb").write_bytes(notebook)
    return folder


def _submit(course: Path, student: str, notebook: bytes) -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / f"{NOTEBOOK}.ipynb").write_bytes(notebook)
    (folder / "timestamp.txt").write_text(STAMPS["honest"] + "\n")


def _collect_with_the_attacks(course: Path, tmp: Path, honest: bytes, blank: bytes) -> dict:
    """This account's exchange folders (the honest one and the attacks) and one named after another student,
    collected once while a process swaps the racing notebook."""
    exchange = tmp / "exchange"
    solutions_notebook = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    _exchange_folder(exchange, ME, STAMPS["honest"], honest)
    racing = _exchange_folder(exchange, ME, STAMPS["swapped_while_read"], honest)
    hard = _exchange_folder(exchange, ME, STAMPS["hard_link"])
    os.link(solutions_notebook, hard / f"{NOTEBOOK}.ipynb")
    linked = exchange / COURSE_ID / "inbound" / f"{ME}+{ASSIGNMENT}+{STAMPS['linked_folder']}"
    linked.symlink_to(course / "solutions" / ASSIGNMENT, target_is_directory=True)
    impostor = _exchange_folder(exchange, attacks.IMPERSONATED, STAMPS["linked_folder"], blank)
    honest_file = tmp / "honest.ipynb"
    honest_file.write_bytes(honest)
    with Swapper(racing, solutions_notebook, honest_file, NOTEBOOK) as swapper:
        swaps_before = swapper.swaps
        out = run_cli(course, "collect", ASSIGNMENT, "--exchange", str(exchange)).stdout
        swaps_during = swapper.swaps - swaps_before
    return {"out": out, "swaps_during": swaps_during, "refused": {"linked_folder": linked.name, "hard_link": hard.name,
                                                                   "impostor": impostor.name}}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    course = make_course(tmp)
    run_cli(course, "release", ASSIGNMENT)
    released = nbformat.read(course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    tuned, known, drawn = _tuned_kernel()
    notebooks = {name: _notebook(released, puzzle, kernel) for name, (puzzle, kernel) in TWINS.items()}
    notebooks.update({name: _notebook(released, attack.puzzle, kernel, attack.markdown, attack.outputs)
                      for name, (attack, kernel) in ATTACKS.items()})
    notebooks[TUNED] = _notebook(released, "map", tuned)
    notebooks[FULL_DISK] = notebooks["twin_map"]
    as_bytes = {name: nbformat.writes(nb).encode() for name, nb in notebooks.items()}
    for name, data in as_bytes.items():
        _submit(course, name, data)
    collected = _collect_with_the_attacks(course, tmp, as_bytes["twin_map"], as_bytes["stub_map"])

    full = course / "autograded" / FULL_DISK
    why_not_full = _mount_full_tmpfs(full) if os.geteuid() == 0 else "mounting a full filesystem needs root"
    try:
        graded = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", ASSIGNMENT, "--timeout", str(TIMEOUT_S),
                                 "--course-dir", str(course)], cwd=course, capture_output=True, text=True, timeout=1100,
                                env=cli_env(DLK_GRADER_SECRET=SECRET))
    finally:
        if not why_not_full:
            subprocess.run(["umount", "-l", str(full)], check=True)
    print(graded.stdout, graded.stderr)  # the per-student grading times, in pytest's report
    assert graded.returncode == (1 if not why_not_full else 0), graded.stdout + graded.stderr
    feedback = run_cli(course, "feedback", ASSIGNMENT)
    exported = run_cli(course, "export", ASSIGNMENT, "--csv", str(tmp / "grades.csv"), "--gradescope", str(tmp / "gradescope"))
    return {"course": course, "tmp": tmp, "notebooks": as_bytes, "collected": collected, "grade_out": graded.stdout,
            "feedback_out": feedback.stdout, "export_out": exported.stdout, "grades": gradebook_grades(course),
            "full_disk": not why_not_full, "why_not_full": why_not_full, "known": known, "drawn": drawn}


def _total(hostile, student) -> float:
    return sum(g["auto"] or 0.0 for g in hostile["grades"][student].values())


def _result(hostile, student, exercise) -> dict:
    path = hostile["course"] / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.results.json"
    return json.loads(path.read_text())["exercises"][exercise]


#: attacker -> (its twin, its puzzle), the collect attacks' student (this account) among them.
PAIRS = {**{name: (attack.twin, attack.puzzle) for name, (attack, _) in ATTACKS.items()},
         TUNED: (TUNED_ATTACK.twin, TUNED_ATTACK.puzzle), ME: ("twin_map", "map")}


# ------------------------------------------------------------------ scores


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_an_attack_scores_no_more_than_its_honest_twin(hostile, name):
    twin, puzzle = PAIRS[name]
    assert _total(hostile, name) <= _total(hostile, twin), (name, _result(hostile, name, puzzle)["message"])
    for cell, grade in hostile["grades"][name].items():
        assert (grade["auto"] or 0.0) <= (hostile["grades"][twin][cell]["auto"] or 0.0), (name, cell)


def test_the_twins_score_what_their_kernels_earn_though_attackers_were_graded_before_them(hostile):
    """Graded after every attacker (the daemon, the fillers, the hoarders): what an honest puzzle earns alone."""
    for twin, puzzle, points in (("twin_map", "map", 1.0), ("twin_dot", "dot", 2.0), (ME, "map", 1.0)):
        assert _result(hostile, twin, puzzle)["status"] == "passed", _result(hostile, twin, puzzle)["message"]
        assert _total(hostile, twin) == points, twin
    assert _total(hostile, "stub_map") == 0.0


def test_what_each_attack_came_to(hostile):
    def status(name, puzzle="map"):
        return _result(hostile, name, puzzle)["status"], _result(hostile, name, puzzle)["message"]

    # disk: the scratch space is a tmpfs of its own, its files and inodes counted; nothing reaches the next grading
    assert status("fills_scratch")[0] == "crashed" and "wrote more than it may" in status("fills_scratch")[1]
    assert status("fills_inodes")[0] == "crashed" and "files and folders" in status("fills_inodes")[1]
    assert _total(hostile, "looks_for_leftovers") == 0.0, status("looks_for_leftovers")
    # memory: every kernel buffer refused (its kernel computes only then), pipes bounded and counted
    assert status("kernel_buffers")[0] == "passed", status("kernel_buffers")
    # approximation: no sampled or halved sum passes
    for name in ("dot_half", "dot_sampled"):
        assert status(name, "dot")[0] == "failed", status(name, "dot")
    # compiler identity: the emulator defines what nvcc's device pass defines; asking for a header is refused
    for name in ("nvcc_tell", "host_compiler_tell"):
        assert status(name)[0] == "failed", status(name)
    assert status("header_tell")[0] == "compile_error" and "asks whether a header exists" in status("header_tell")[1]
    # feedback HTML: the hostile page grades as its honest twin does
    assert status("markup_in_markdown")[0] == "passed"
    assert status("markup_in_messages")[0] == "compile_error"


def test_a_resubmission_draws_new_hidden_sizes_and_the_feedback_tells_none(hostile):
    """A kernel special-cased to every size its first grading drew fails the size its resubmission draws, named
    by number and nature only."""
    res = _result(hostile, TUNED, "map")
    assert res["status"] == "failed" and _total(hostile, TUNED) < _total(hostile, "twin_map"), res["message"]
    failing = [s for s in res["shapes"] if not s["passed"]]
    assert failing and all(s["label"].startswith("hidden case") for s in failing), failing
    seen = res["message"] + "\n" + "\n".join(s["label"] for s in res["shapes"])
    seen += "\n" + (hostile["course"] / "feedback" / TUNED / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    for n in hostile["drawn"]:
        assert not re.search(rf"(?<![\d.#-]){n}(?![\d.])", seen), f"the feedback tells the hidden size {n}"


# ------------------------------------------------------------------ collect and the solutions


def test_collect_takes_the_honest_notebook_and_refuses_the_links_and_the_impostor(hostile):
    collected = hostile["collected"]
    out = collected["out"]
    for what, folder in collected["refused"].items():
        assert f"refused the submission {folder}" in out, (what, out)
    assert "symbolic link" in out or "is a link" in out, out
    assert "hard link" in out and f"submitted by the account '{ME}'" in out, out
    assert collected["swaps_during"] > 0, "the notebook was not swapped while collect ran: the race proved nothing"
    course = hostile["course"]
    mine = course / "submitted" / ME / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert mine.read_bytes() == hostile["notebooks"]["twin_map"]
    impersonated = course / "submitted" / attacks.IMPERSONATED / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert impersonated.read_bytes() == hostile["notebooks"][attacks.IMPERSONATED]


def _solution_lines(course: Path, students_notebooks: dict[str, bytes]) -> set[str]:
    """Lines of the instructor's solutions that no student wrote (each puzzle's code between its solution markers)."""
    written = b"\n".join(students_notebooks.values()).decode()
    solutions = nbformat.read(course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    lines = set()
    for cell in solutions.cells:
        for block in re.findall(r"BEGIN SOLUTION\n(.*?)// END SOLUTION", cell.source, re.S):
            lines |= {line.strip() for line in block.splitlines() if len(line.strip()) > 24}
    return {line for line in lines if json.dumps(line)[1:-1] not in written and line not in written}


def test_nothing_of_the_solutions_reaches_submitted_autograded_feedback_or_exports(hostile):
    course, tmp = hostile["course"], hostile["tmp"]
    secret_lines = _solution_lines(course, hostile["notebooks"])
    assert len(secret_lines) > 20  # the puzzles no student submitted: this test would prove nothing without them
    places = [course / "submitted", course / "autograded", course / "feedback", tmp / "gradescope", tmp / "grades.csv"]
    for place in places:
        for path in [place] if place.is_file() else place.rglob("*"):
            assert not path.is_symlink(), path
            if path.is_file():
                text = path.read_text(errors="replace")
                text += json.dumps(text)  # as a notebook's JSON escapes it
                leaked = [line for line in secret_lines if line in text or json.dumps(line)[1:-1] in text]
                assert not leaked, (path, leaked[:3])


# ------------------------------------------------------------------ the grader's own failure


def test_a_full_disk_is_the_grader_s_failure_never_a_score(hostile):
    if not hostile["full_disk"]:
        pytest.skip(hostile["why_not_full"])
    out = hostile["grade_out"]
    assert re.search(rf"^  {FULL_DISK}: .*(?:failed|the grader could not write)", out, re.M), out
    assert "1 failed to grade (no score written" in out, out
    assert all(g["auto"] is None for g in hostile["grades"].get(FULL_DISK, {}).values()), hostile["grades"].get(FULL_DISK)
    record = json.loads((hostile["course"] / "grading_record" / f"{ASSIGNMENT}.json").read_text())
    entry = record["students"][FULL_DISK]
    assert entry["status"] == "failed" and entry["score"] is None and "ENOSPC" in entry["reason"], entry
    rows = {r["student"]: r for r in csv.DictReader(open(hostile["tmp"] / "grades.csv"))}
    assert FULL_DISK not in rows or rows[FULL_DISK]["outcome"] != "graded", rows.get(FULL_DISK)


# ------------------------------------------------------------------ feedback


def test_every_feedback_page_is_inert_and_carries_its_policy(hostile):
    pages = sorted((hostile["course"] / "feedback").glob(f"*/{ASSIGNMENT}/{NOTEBOOK}.html"))
    students = {p.parts[-3] for p in pages}
    assert set(PAIRS) | set(TWINS) <= students, set(PAIRS) | set(TWINS) - students
    for page in pages:
        text = page.read_text()
        assert _inert(text) == [], (page, _inert(text))
        assert 'http-equiv="Content-Security-Policy"' in text, page
    messages = (hostile["course"] / "feedback" / "markup_in_messages" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    assert "&lt;img src=x onerror" in messages or "&lt;script&gt;" in messages  # quoted as text, not as markup
