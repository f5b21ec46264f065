"""Grades out of the gradebook: CSV and Gradescope's ``results.json``.

Scores come from nbgrader's gradebook (what ``autograder grade`` wrote, plus any
manual grades and late penalties). The feedback text of each test cell comes
from the autograded notebook, and the device, backend, status and speed-up of
each exercise from the ``<notebook>.results.json`` written beside it.  Every
row carries the outcome of the student's grading (:mod:`autograder.outcome`),
which every export prints through :func:`autograder.outcome.outcome_text`: a
grading that failed has no score anywhere, one that was not gradable scores 0
with its reason.  Files are written whole or not at all
(:func:`autograder.safe_writes.write_text`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict
from typing import Any

import nbformat

from autograder.feedback import device_label, part_feedback, speedup_of
from autograder.grade_cells import GradedCell, grade_target, part_points
from autograder.grading_record import GradingRecord
from autograder.leaderboard import gradescope_leaderboard
from autograder.nbgrader_bridge import RESULTS_SUFFIX, NotebookGrading, read_results_file, results_outcome
from autograder.outcome import FAILED, GRADED, NOT_GRADABLE, Outcome, outcome_summary, outcome_text, total_text
from autograder.result import speed_is_pending
from autograder.safe_writes import write_text


def _cell_outputs(nb_path: str) -> dict[str, str]:
    """grade_id -> the stdout text of that test cell in the autograded notebook."""
    if not os.path.exists(nb_path):
        return {}
    nb = nbformat.read(nb_path, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and "grade_id" in meta:
            out[meta["grade_id"]] = "".join(
                o.get("text", "") for o in cell.get("outputs", [])
                if o.get("output_type") == "stream" and o.get("name") == "stdout"
            )
    return out


def _cell_targets(ass) -> dict[tuple[str, str], Any]:
    """(notebook, grade_id) -> what that test cell grades (exercise, part), from the instructor's cells."""
    targets = {}
    for nb in ass.notebooks:
        for sc in nb.source_cells:
            target = grade_target(sc.source) if sc.cell_type == "code" else None
            if target is not None:
                targets[(nb.name, sc.name)] = target
    return targets


def _gradebook_row(cd, assignment: str, sub, cell_targets: dict) -> dict[str, Any]:
    """One student's row as the gradebook and the graded folder hold it."""
    student = sub.student.id
    row: dict[str, Any] = {
        "student": student,
        "assignment": assignment,
        "timestamp": sub.timestamp.isoformat() if sub.timestamp else "",
        "score": float(sub.score),
        "max_score": float(sub.max_score),
        "late_penalty": float(sub.late_submission_penalty or 0.0),
        "needs_manual_grade": bool(sub.needs_manual_grade),
        "cells": [],
        "exercises": {},
        "grading_seconds": 0.0,
        "outcome": Outcome(GRADED),
    }
    reasons = []
    folder = cd.format_path(cd.autograded_directory, student, assignment)
    for snb in sub.notebooks:
        texts = _cell_outputs(os.path.join(folder, snb.name + ".ipynb"))
        results = read_results_file(os.path.join(folder, snb.name + RESULTS_SUFFIX))
        if results_outcome(results).kind == NOT_GRADABLE:
            reasons.append(results_outcome(results).reason)
        row["grading_seconds"] += float(results.get("grading_seconds", 0.0))
        for name, res in results.get("exercises", {}).items():
            row["exercises"][name] = res
        order = {gid: i for i, gid in enumerate(texts)}
        for grade in sorted(snb.grades, key=lambda g: (order.get(g.name, len(order)), g.name)):
            target = cell_targets.get((snb.name, grade.name))
            row["cells"].append({
                "notebook": snb.name,
                "grade_id": grade.name,
                "exercise": target.exercise if target else "",
                "part": target.part if target else "",
                "score": float(grade.score),
                "max_score": float(grade.max_score),
                "output": texts.get(grade.name, ""),
            })
    if reasons:
        row["outcome"] = Outcome(NOT_GRADABLE, "; ".join(reasons))
    return row


def _failed_row(assignment: str, student: str, ass, cell_targets: dict, reason: str) -> dict[str, Any]:
    """A student whose last grading failed: no score, no exercise; the test cells listed, none scored."""
    cells = []
    for nb in ass.notebooks:
        order = [c.name for c in nb.source_cells]
        for gc in sorted(nb.grade_cells, key=lambda c: order.index(c.name) if c.name in order else len(order)):
            target = cell_targets.get((nb.name, gc.name))
            cells.append({"notebook": nb.name, "grade_id": gc.name, "exercise": target.exercise if target else "",
                          "part": target.part if target else "", "score": None, "max_score": float(gc.max_score),
                          "output": ""})
    return {"student": student, "assignment": assignment, "timestamp": "", "score": None,
            "max_score": sum(c["max_score"] for c in cells), "late_penalty": 0.0, "needs_manual_grade": False,
            "cells": cells, "exercises": {}, "grading_seconds": 0.0, "outcome": Outcome(FAILED, reason)}


def gradebook_row(cd, assignment: str, student: str) -> dict[str, Any]:
    """``student``'s row as the gradebook holds it now (whatever the grading record says)."""
    from nbgrader.api import Gradebook

    with Gradebook(cd.db_url, cd.course_id) as gb:
        ass = gb.find_assignment(assignment)
        return _gradebook_row(cd, assignment, gb.find_submission(assignment, student), _cell_targets(ass))


def collect(cd, assignment: str) -> list[dict]:
    """One row per student with a submission of ``assignment`` in the gradebook, or a failed grading of one.

    Each row's ``outcome`` (:mod:`autograder.outcome`) is what the grading record says of the student's
    last grading where it failed (then the row has no score: an older score in the gradebook is not
    this submission's), else what the graded folder says (graded, or not gradable with the reason).
    """
    from nbgrader.api import Gradebook

    record = GradingRecord(cd.root, assignment)
    failed = {s: e.reason for s, e in record.students.items() if e.status == FAILED}
    rows = []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        ass = gb.find_assignment(assignment)
        cell_targets = _cell_targets(ass)
        in_gradebook = {sub.student.id: sub for sub in ass.submissions}
        for student in sorted(set(in_gradebook) | set(failed)):
            if student in failed:
                rows.append(_failed_row(assignment, student, ass, cell_targets, failed[student]))
            else:
                rows.append(_gradebook_row(cd, assignment, in_gradebook[student], cell_targets))
    return rows


def row_outcome(row: dict) -> Outcome:
    """The outcome of a row (a row made without one, as before outcomes were recorded, is graded)."""
    return row.get("outcome") or Outcome(GRADED)


def _final_score(row: dict) -> float:
    return max(row["score"] - row["late_penalty"], 0.0)


NOT_MEASURED = "not measured"


def _pending(cell: dict, row: dict) -> bool:
    """A speed cell whose kernel was correct but not timed (graded without a GPU): neither a fail nor a zero."""
    res = row["exercises"].get(cell.get("exercise") or "", {})
    return cell.get("part") == "speed" and speed_is_pending(res)


def pending_points(row: dict) -> float:
    """The speed points of ``row`` still to be measured on a GPU."""
    return sum(c["max_score"] for c in row["cells"] if _pending(c, row))


def row_total(row: dict) -> str:
    """The row's outcome and points in a few words, as the console says them ("14 of 14 measured points, 6 pending",
    "not gradable: ...; 0 / 20 points", "failed to grade: ...")."""
    return outcome_summary(row_outcome(row), row["score"], row["max_score"], pending_points(row))


def _speedup(res: dict) -> str:
    """The speed-up in a results file's entry for one exercise, as text ("" when not measured)."""
    value = speedup_of(res.get("timing"))
    return f"{value:.3f}" if value else ""


def _devices(row: dict) -> list[str]:
    """Where the row's exercises ran, as a person says it ("NVIDIA H100 80GB HBM3", "CPU emulator (no GPU)")."""
    return sorted({device_label(r.get("backend", ""), r.get("device", "")) for r in row["exercises"].values()
                   if r.get("backend")})


def write_csv(rows: list[dict], path: str) -> None:
    """One line per student; a failed grading has its outcome and no score, a pending speed says "not measured"."""
    grade_ids = []
    exercises = []
    for row in rows:
        for c in row["cells"]:
            if c["grade_id"] not in grade_ids:
                grade_ids.append(c["grade_id"])
            if c["exercise"] and c["exercise"] not in exercises:
                exercises.append(c["exercise"])
        for name in row["exercises"]:
            if name not in exercises:
                exercises.append(name)
    header = ["student", "assignment", "timestamp", "outcome", "score", "max_score", "late_penalty", "final_score"]
    header += grade_ids
    for name in exercises:
        header += [f"{name}_status", f"{name}_speedup"]
    header += ["measured_max_score", "pending_points", "backend", "device", "driver", "grading_seconds"]
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    for row in rows:
        w.writerow(_csv_line(row, grade_ids, exercises))
    write_text(path, out.getvalue())


def _csv_line(row: dict, grade_ids: list[str], exercises: list[str]) -> list[str]:
    head = [row["student"], row["assignment"], row["timestamp"], outcome_text(row_outcome(row))]
    if not row_outcome(row).scored:  # no score was written: every number is left empty
        return head + ["", _num(row["max_score"]), "", ""] + [""] * (len(grade_ids) + 2 * len(exercises) + 6)
    by_id = {c["grade_id"]: NOT_MEASURED if _pending(c, row) else _num(c["score"]) for c in row["cells"]}
    res = row["exercises"]
    backends = sorted({r.get("backend", "") for r in res.values() if r.get("backend")})
    line = head + [_num(row["score"]), _num(row["max_score"]), _num(row["late_penalty"]), _num(_final_score(row))]
    line += [by_id.get(g, "") for g in grade_ids]
    for name in exercises:
        r = res.get(name, {})
        line += [r.get("status", ""), NOT_MEASURED if speed_is_pending(r) else _speedup(r)]
    pending = pending_points(row)
    drivers = sorted({str((r.get("timing") or {}).get("driver")) for r in res.values()
                      if (r.get("timing") or {}).get("driver")})
    line += [_num(row["max_score"] - pending), _num(pending), "; ".join(backends), "; ".join(_devices(row)),
             "; ".join(drivers), f"{row['grading_seconds']:.1f}"]
    return line


def _num(x: float) -> str:
    """Whole numbers without ".0"; anything else exactly (float(text) == x)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def _test_name(cell: dict) -> str:
    return f"{cell['exercise']} ({cell['part']})" if cell["exercise"] else cell["grade_id"]


def gradescope_results(row: dict) -> dict:
    """Gradescope's results.json for one student's row."""
    if not row_outcome(row).scored:
        return _gradescope_failed(row)
    tests = []
    for c in row["cells"]:
        name = _test_name(c)
        if _pending(c, row):
            # No score, no max_score, no status: Gradescope shows it as neither passed nor failed,
            # and leaves its points out of the total until a GPU grading measures them.
            tests.append({
                "name": f"{name}: pending, not measured",
                "output": (f"Speed not measured: this grading ran without a GPU (on the CPU emulator, which checks "
                           f"results but says nothing about speed). The {c['max_score']:g} speed points are pending, "
                           f"not failed; they are filled in when the course is graded on a GPU.\n\n{c['output']}"),
                "extra_data": {"pending": True, "points": c["max_score"]},
            })
            continue
        tests.append({
            "name": name,
            "score": c["score"],
            "max_score": c["max_score"],
            "output": c["output"],
            "status": "passed" if c["score"] >= c["max_score"] else "failed",
        })
    backends = sorted({r.get("backend", "") for r in row["exercises"].values() if r.get("backend")})
    final = _final_score(row)
    pending = pending_points(row)
    measured_max = row["max_score"] - pending
    if row_outcome(row).kind == NOT_GRADABLE:
        summary = [f"Not gradable: {row['outcome'].reason}. Score 0 / {row['max_score']:g}: every test scores 0 until "
                   f"a notebook that can be read is submitted."]
    else:
        summary = [f"Graded on {', '.join(_devices(row)) or 'no device (no kernel ran)'}."]
        for name, r in row["exercises"].items():
            sp = _speedup(r)
            summary.append(f"{name}: {r.get('status', '?')}" + (f", {float(sp):.2f}x the reference kernel" if sp else ""))
    if pending:
        summary.append(f"Score: {total_text(row['score'], row['max_score'], pending)}: the {pending:g} speed points "
                       f"pending were not measured without a GPU; a grading on a GPU fills them in, out of "
                       f"{row['max_score']:g} in all.")
    if row["late_penalty"]:
        summary.append(f"Late penalty: -{row['late_penalty']:g} points.")
    return {
        "score": final,
        "execution_time": round(row.get("grading_seconds", 0.0), 1),
        "output": "\n".join(summary),
        "tests": tests,
        "leaderboard": gradescope_leaderboard(row),
        "extra_data": {
            "outcome": outcome_text(row_outcome(row)),
            "measured_max_score": measured_max,
            "pending_points": pending,
            "devices": _devices(row),
            "backends": backends,
            "exercises": {
                name: {k: r.get(k) for k in ("status", "device", "backend", "timing", "speed_measured", "speed_pending")}
                for name, r in row["exercises"].items()
            },
        },
    }


def _gradescope_failed(row: dict) -> dict:
    """A grading that failed (ours): no score at all (Gradescope records none), no test passed or failed."""
    why = (f"Failed to grade: {row['outcome'].reason}. This is not a score: the grader could not grade the "
           f"submission, and the instructor grades it again.")
    return {
        "output": why,
        "tests": [{"name": f"{_test_name(c)}: not graded", "output": "Not graded: the grading failed (why is above); "
                                                                       "this is not a score.",
                   "extra_data": {"not_graded": True, "points": c["max_score"]}} for c in row["cells"]],
        "leaderboard": [],
        "extra_data": {"outcome": outcome_text(row_outcome(row)), "max_score": row["max_score"]},
    }


def write_gradescope(rows: list[dict], directory: str) -> list[str]:
    paths = []
    for row in rows:
        path = os.path.join(directory, row["student"], "results.json")
        write_text(path, json.dumps(gradescope_results(row), indent=1) + "\n")
        paths.append(path)
    return paths


def gradescope_from_grading(grading: NotebookGrading, cells: list[GradedCell]) -> dict:
    """results.json straight from a NotebookGrading (no gradebook)."""
    row = {"student": grading.student, "score": 0.0, "max_score": 0.0, "late_penalty": 0.0, "cells": [],
           "exercises": {}, "grading_seconds": grading.total_seconds, "outcome": grading.outcome}
    data = grading.to_json()
    row["exercises"] = data["exercises"]
    for c in cells:
        result = grading.results[c.exercise]
        awarded = part_points(result, c.part, c.points)
        row["score"] += awarded
        row["max_score"] += c.points
        row["cells"].append({**asdict(c), "score": awarded, "max_score": c.points,
                             "output": part_feedback(result, c.part, c.points, awarded)})
    return gradescope_results(row)
