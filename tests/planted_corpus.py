"""The chapters' planted-bug corpora, graded through the real grader.

``tests/planted_bugs/<exercise>/`` holds, for each graded exercise, planted
bugs and, where the chapter has them, other correct ways to write the kernel.
The correct kernel itself is not kept here: it is the instructor's solution,
the ``%%cuda`` (or ``%%tc``) cell of ``solutions/*/*.ipynb``.

A planted bug (``<bug>.edit``) is an edit of that solution's cell, so that when
the solution changes its bugs follow it.  It starts with comment lines (``//``,
or ``#`` for an index-notation exercise): what is wrong, what the grader must
conclude, ``// Expect: rejected, <reason>`` with a reason of :data:`REASONS`,
``// Feedback: <regex>`` (the words in which the feedback on the CPU emulator
must name the bug's cause, for example which kind of race: one cause, so no
``|`` outside parentheses offering several), ``// Feedback-GPU: <regex>``
(what it must say on a GPU where that differs: a race a GPU shows only as a
wrong or unsteady result, whichever that run shows, so it may name several)
and ``// Launch: %%cuda ...`` (a launch other than
the solution's).  Then come one or more replacements::

    <<<<<<< solution
    text of the solution kernel (it must occur exactly once)
    =======
    what the planted bug has there instead
    >>>>>>> planted bug

applied in order.  An edit whose text no longer occurs exactly once in the
solution fails loudly, naming the bug (:class:`PlantedBugDoesNotApply`).  A bug
that lies in the launch alone (a block size or shared-memory size the kernel
cannot work with) has a ``// Launch:`` line and no replacements.

Every planted bug records those words, except the few listed in
:data:`CAUSE_NOT_NAMED_YET` whose feedback does not name their cause yet (a
bug on that list has no ``// Feedback:`` line, and every bug without one is on
it: :func:`check_causes_recorded`).  A listed bug whose feedback comes to name
a mistake from its output (:mod:`autograder.mistakes`) fails its grading test:
the words go on the bug and the bug off the list, or, if the mistake is not
its cause, the hint misleads and is the thing to fix.

Another correct way to write a kernel (``.cu``, ``.tc``) is a whole kernel:
its ``%%cuda`` line, what is different about it, ``// Expect: accepted``.
Graded in hidden mode, an accepted kernel must get every correctness point,
and a planted bug must fail for its planted reason.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.exercises import get_exercise
from autograder.isolation import grade_submission
from autograder.mistakes import names_a_mistake
from autograder.submission import KernelSubmission, parse_magic_line, submissions_from_notebook

CORPUS = Path(__file__).resolve().parent / "planted_bugs"
#: The planted bugs (``<exercise>/<bug>``, one a line) whose feedback does not yet name their cause, and so have no
#: ``// Feedback:`` line: a diagnosis to write for each.
CAUSE_NOT_NAMED_YET = CORPUS / "cause_not_named_yet.txt"
SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
SECRET = b"planted-bug corpus"

#: Why a kernel is rejected, as the grader reports it.
REASONS = {
    "wrong_result": "ran, but some output is wrong (status failed)",
    "out_of_bounds": "read or wrote outside a buffer (the emulator's bounds check)",
    "race": "a data race (the emulator runs the threads in two orders and the results differ)",
    "barrier_divergence": "a __syncthreads() that not every thread of the block reaches",
    "uninitialised_shared_memory": "read shared memory that no thread wrote",
    "compile_error": "does not compile",
    "wrong_kernel": "compiles, but is not the kernel asked for (name, parameters, or a requirement on its source)",
    "not_written": "no code was written (empty cell or the released stub)",
    "invalid_launch": "launch integers out of range",
    "timeout": "did not finish in the time limit",
}
_LAUNCH_ERRORS = (("out-of-bounds", "out_of_bounds"), ("data race", "race"), ("barrier divergence", "barrier_divergence"),
                  ("shared memory that no", "uninitialised_shared_memory"))


def rejection_reason(result) -> str:
    """The :data:`REASONS` key of a rejected result (its status, and for a launch error what the emulator found)."""
    if result.status == "failed":
        return "wrong_result"
    if result.status == "launch_error":
        for words, reason in _LAUNCH_ERRORS:
            if words in result.message:
                return reason
    return result.status


@dataclass(frozen=True)
class CorpusKernel:
    path: Path
    submission: KernelSubmission
    what: str  # the second line: what is wrong or different
    accepted: bool
    reason: str  # for a planted bug: the REASONS key it must be rejected for
    feedback: str = ""  # a regex the emulator's feedback must match ("" when the file names none)
    feedback_gpu: str = ""  # a regex a GPU's feedback must match where it differs from the emulator's ("" if not)


class PlantedBugDoesNotApply(AssertionError):
    """A planted bug's edit no longer fits the solution kernel it edits."""


#: One replacement of a planted bug: the solution's text, then the bug's.
EDIT = re.compile(r"^<<<<<<< solution\n(.*?)^=======\n(.*?)^>>>>>>> planted bug[ \t]*(?:\n|\Z)", re.S | re.M)


def apply_edits(name: str, solution: str, edits: str) -> str:
    """``solution`` with the replacements of ``edits`` made in order; :class:`PlantedBugDoesNotApply` if one
    does not occur exactly once (``name`` says which bug)."""
    found = list(EDIT.finditer(edits))
    rest = EDIT.sub("", edits)
    if not found or rest.strip():
        raise PlantedBugDoesNotApply(
            f"planted bug {name}: expected replacements '<<<<<<< solution' ... '=======' ... '>>>>>>> planted bug'"
            + (f", found other text: {rest.strip()[:120]!r}" if rest.strip() else ", found none"))
    source = solution.rstrip("\n") + "\n"
    for number, edit in enumerate(found, 1):
        old, new = edit.group(1), edit.group(2)
        count = source.count(old)
        if count != 1:
            raise PlantedBugDoesNotApply(
                f"planted bug {name}: its edit {number} of {len(found)} no longer applies to the solution kernel "
                f"(the text it replaces occurs {count} times, not once; update the bug to the solution):\n{old}")
        source = source.replace(old, new)
    return source


def _read_planted_bug(path: Path) -> CorpusKernel:
    """A planted bug: its comment lines, and the solution kernel with its edits made."""
    name = f"{path.parent.name}/{path.stem}"
    lines = path.read_text().split("\n")
    header = []
    while lines and lines[0].startswith(("//", "#")):
        header.append(lines.pop(0).lstrip("/# ").strip())
    fields = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in header[1:] if ":" in line}
    assert header and "Expect" in fields, (
        f"{path}: a planted bug starts with what is wrong, then '// Expect: rejected, <reason>'")
    reason = fields["Expect"].removeprefix("rejected, ").strip()
    assert fields["Expect"].startswith("rejected, ") and reason in REASONS, (
        f"{path}: unknown verdict {fields['Expect']!r}; a planted bug is 'rejected, <reason>' with a reason of "
        f"{', '.join(REASONS)}")
    # the emulator finds the cause itself (a GPU shows a race as whichever symptom that run has: Feedback-GPU)
    assert _one_cause(fields.get("Feedback", "")), (
        f"{path}: '// Feedback: {fields['Feedback']}' offers several causes ('|' outside parentheses); the feedback "
        f"must name the one cause the bug has")
    solution = solution_kernel(path.parent.name)
    launch = solution.launch
    if "Launch" in fields:
        magic = parse_magic_line(fields["Launch"])
        assert not magic.error and magic.exercise == path.parent.name, f"{path}: {magic.error or fields['Launch']}"
        launch = magic.launch
    edits = "\n".join(lines)
    if edits.strip():
        source = apply_edits(name, solution.source, edits)
    elif launch != solution.launch:  # the bug is in the launch alone
        source = solution.source.rstrip("\n") + "\n"
    else:
        raise PlantedBugDoesNotApply(f"planted bug {name}: no replacements and no launch of its own: it is the solution")
    sub = KernelSubmission(exercise=path.parent.name, source=source, launch=launch, cell_line=solution.cell_line)
    return CorpusKernel(path, sub, header[0], False, reason, fields.get("Feedback", ""), fields.get("Feedback-GPU", ""))


def _one_cause(pattern: str) -> bool:
    """True when ``pattern`` compiles and has no ``|`` outside parentheses and character classes (a choice between
    wordings of one cause is a group; a choice between causes at the top is a hedge)."""
    re.compile(pattern)
    depth, in_class, escaped = 0, False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            return False
    return True


def read_corpus_file(path: Path) -> CorpusKernel:
    if path.suffix == ".edit":
        return _read_planted_bug(path)
    magic_line, what, expect, rest = path.read_text().split("\n", 3)
    magic = parse_magic_line(magic_line.lstrip("/# "))
    assert not magic.error, f"{path}: {magic.error}"
    verdict = expect.lstrip("/# ")
    assert verdict.startswith("Expect: "), f"{path}: the third line must be '// Expect: accepted'"
    verdict = verdict[len("Expect: "):].strip()
    assert verdict == "accepted", (
        f"{path}: a whole kernel in the corpus is another correct way to write it ('Expect: accepted'); a planted "
        f"bug is an edit of the solution kernel, a .edit file")
    sub = KernelSubmission(exercise=magic.exercise, source=rest, launch=magic.launch, cell_line=4)
    return CorpusKernel(path, sub, what.lstrip("/# "), True, "")


def solution_kernel(exercise: str) -> KernelSubmission:
    """The instructor's solution of ``exercise``: its ``%%cuda`` (or ``%%tc``) cell in ``solutions/``, solution markers removed."""
    found = [sub for notebook in sorted(SOLUTIONS.glob("*/*.ipynb")) for sub in submissions_from_notebook(notebook)
             if sub.exercise == exercise]
    assert len(found) == 1, f"{exercise}: {len(found)} solution cells in {SOLUTIONS}"
    sub = found[0]
    source = "\n".join(line for line in sub.source.splitlines() if "SOLUTION" not in line)
    return KernelSubmission(exercise=exercise, source=source, launch=sub.launch, cell_line=sub.cell_line)


def corpus_files(exercise: str) -> list[Path]:
    """The corpus of one exercise: planted bugs (``.edit``) and other correct kernels (``.cu``) or comprehensions (``.tc``)."""
    folder = CORPUS / exercise
    return sorted([*folder.glob("*.edit"), *folder.glob("*.cu"), *folder.glob("*.tc")])


def corpus(exercises) -> list:
    """pytest parameters: every file of the exercises' corpora."""
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}")
            for name in exercises for path in corpus_files(name)]


def grade(sub: KernelSubmission):
    return grade_submission(sub, mode="hidden", student_key=SECRET, student_id="corpus")


def check_accepted(sub: KernelSubmission) -> None:
    result = grade(sub)
    assert result.passed, result.message
    assert result.correctness_score == get_exercise(sub.exercise).correctness_points


def check_corpus_file(path: Path) -> None:
    """Grade one corpus file in hidden mode: full points if accepted, else rejected for its planted reason."""
    kernel = read_corpus_file(path)
    if kernel.accepted:
        check_accepted(kernel.submission)
        return
    result = grade(kernel.submission)
    assert not result.passed, f"{path.name} ({kernel.what}) was not rejected"
    assert result.correctness_score < get_exercise(kernel.submission.exercise).correctness_points
    assert result.message
    assert rejection_reason(result) == kernel.reason, (
        f"{path.name} ({kernel.what}) was rejected as {rejection_reason(result)}, not as {kernel.reason}: {result.message}")
    if result.backend == "cpu":  # the words name the cause as the emulator finds it (a GPU's are Feedback-GPU's)
        assert kernel.feedback or _listed_without_cause(path), (
            f"{path.name} ({kernel.what}) has no '// Feedback:' line with the words that name its cause")
        if kernel.feedback:
            assert re.search(kernel.feedback, feedback_of(result), re.I | re.S), (
                f"{path.name} ({kernel.what}): the feedback does not name the cause "
                f"(/{kernel.feedback}/):\n{feedback_of(result)}")
        else:  # listed as not named yet: a mistake named from its output now is either its cause or misleading
            named = [s.hint for s in result.shapes if names_a_mistake(s.hint)]
            assert not named, (
                f"{path.name} ({kernel.what}) is listed in {CAUSE_NOT_NAMED_YET.name}, but its feedback now names a "
                f"mistake: if that is its cause, record the words ('// Feedback:') and take it off the list; if not, "
                f"the hint misleads:\n{named[0]}")


def feedback_of(result) -> str:
    """What check() and the grading feedback say about a rejected kernel: the message, and each case's hint and error."""
    return "\n".join([result.message] + [s.hint + " " + s.error for s in result.shapes])


def causes_not_named_yet() -> list[str]:
    """The bugs listed in :data:`CAUSE_NOT_NAMED_YET`."""
    lines = CAUSE_NOT_NAMED_YET.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _listed_without_cause(path: Path) -> bool:
    return f"{path.parent.name}/{path.stem}" in causes_not_named_yet()


def check_causes_recorded() -> None:
    """Every planted bug of every exercise records the words of its cause, or is listed as not named yet; and a
    listed bug exists, once, and has no such words (a diagnosis written moves it off the list)."""
    listed = causes_not_named_yet()
    assert listed == sorted(set(listed)), f"{CAUSE_NOT_NAMED_YET.name}: keep it sorted, each bug once"
    without = sorted(f"{path.parent.name}/{path.stem}" for path in CORPUS.glob("*/*.edit")
                     if not read_corpus_file(path).feedback)
    assert sorted(set(without) - set(listed)) == [], (
        "planted bugs without a '// Feedback:' line naming their cause (write the words the hint gives, or the hint)")
    assert sorted(set(listed) - set(without)) == [], (
        f"listed in {CAUSE_NOT_NAMED_YET.name} but with a '// Feedback:' line, or no longer planted: take them off")


def check_solution_kernel(exercise: str) -> None:
    """The solution's kernel, the corpus's correct kernel, gets every correctness point."""
    check_accepted(solution_kernel(exercise))


def check_corpus_complete(exercises, minimum: int = 5) -> None:
    """Every exercise has a solution kernel and at least ``minimum`` planted bugs, each with a reason."""
    for name in exercises:
        solution_kernel(name)
        kernels = [read_corpus_file(p) for p in corpus_files(name)]
        bugs = [k for k in kernels if not k.accepted]
        assert len(bugs) >= minimum, f"{name}: only {len(bugs)} planted bugs"
        assert all(k.submission.exercise == name for k in kernels)


def check_solution_graded_end_to_end(tmp_path: Path, assignment: str, notebook: str, exercises) -> None:
    """release -> submit (the instructor's solutions, and the released stubs) -> ``autograder grade``.

    The solutions get every correctness point; the stubs, which compile but compute nothing, get none.
    """
    spec = importlib.util.spec_from_file_location(
        "nbgrader_course", Path(__file__).resolve().parent / "autograder" / "nbgrader_course.py")
    course_tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course_tools)

    course = course_tools.make_course(tmp_path)
    course_tools.run_cli(course, "release", assignment)
    released = course / "exercises" / assignment / f"{notebook}.ipynb"
    assert released.exists()
    assert "BEGIN SOLUTION" not in released.read_text()
    for student, source in (("solution", course / "solutions" / assignment / f"{notebook}.ipynb"), ("blank", released)):
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        shutil.copy(source, folder / f"{notebook}.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")
    course_tools.run_cli(course, "grade", assignment, "--timeout", "120", DLK_GRADER_SECRET="test-secret")

    results = course / "autograded" / "solution" / assignment / f"{notebook}.results.json"
    text = json.dumps(json.loads(results.read_text()))
    for name in exercises:
        assert name in text
    grades = course_tools.gradebook_grades(course)
    for name in exercises:
        cell = grades["solution"][f"{name}_correctness"]
        assert cell["auto"] == cell["max"] == get_exercise(name).correctness_points, (name, cell)
        assert grades["blank"][f"{name}_correctness"]["auto"] == 0, name
