"""Grades out of the gradebook: CSV and Gradescope's ``results.json``.

Scores come from nbgrader's gradebook (what ``autograder grade`` wrote, plus any
manual grades and late penalties). The feedback text of each test cell comes
from the autograded notebook, and the device, backend, status and speed-up of
each exercise from the ``<notebook>.results.json`` written beside it.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import asdict
from typing import Any

import nbformat

from autograder.feedback import part_feedback, speedup_of
from autograder.leaderboard import gradescope_leaderboard
from autograder.grade_cells import GradedCell, grade_target, part_points
from autograder.nbgrader_bridge import RESULTS_SUFFIX, NotebookGrading, read_results_file
from autograder.scoring import speed_is_pending


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


def collect(cd, assignment: str) -> list[dict]:
    """One row per student who has a submission of ``assignment`` in the gradebook."""
    from nbgrader.api import Gradebook

    rows = []
    with Gradebook(cd.db_url, cd.course_id) as gb:
        ass = gb.find_assignment(assignment)
        cell_targets = {}
        for nb in ass.notebooks:
            for sc in nb.source_cells:
                target = grade_target(sc.source) if sc.cell_type == "code" else None
                if target is not None:
                    cell_targets[(nb.name, sc.name)] = target
        for sub in sorted(ass.submissions, key=lambda s: s.student.id):
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
            }
            for snb in sub.notebooks:
                folder = cd.format_path(cd.autograded_directory, student, assignment)
                texts = _cell_outputs(os.path.join(folder, snb.name + ".ipynb"))
                results = read_results_file(os.path.join(folder, snb.name + RESULTS_SUFFIX))
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
            rows.append(row)
    return rows


NOT_MEASURED = "not measured"


def _pending(cell: dict, row: dict) -> bool:
    """A speed cell whose kernel was correct but not timed (graded without a GPU): neither a fail nor a zero."""
    res = row["exercises"].get(cell.get("exercise") or "", {})
    return cell.get("part") == "speed" and speed_is_pending(res)


def pending_points(row: dict) -> float:
    """The speed points of ``row`` still to be measured on a GPU."""
    return sum(c["max_score"] for c in row["cells"] if _pending(c, row))


def _speedup(res: dict) -> str:
    """The speed-up in a results file's entry for one exercise, as text ("" when not measured)."""
    value = speedup_of(res.get("timing"))
    return f"{value:.3f}" if value else ""


def write_csv(rows: list[dict], path: str) -> None:
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
    header = ["student", "assignment", "timestamp", "score", "max_score", "late_penalty", "final_score"]
    header += grade_ids
    for name in exercises:
        header += [f"{name}_status", f"{name}_speedup"]
    header += ["measured_max_score", "pending_points", "backend", "device", "driver", "grading_seconds"]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            by_id = {c["grade_id"]: NOT_MEASURED if _pending(c, row) else _num(c["score"]) for c in row["cells"]}
            res = row["exercises"]
            backends = sorted({r.get("backend", "") for r in res.values() if r.get("backend")})
            devices = sorted({r.get("device", "") for r in res.values() if r.get("device")})
            line = [row["student"], row["assignment"], row["timestamp"], _num(row["score"]),
                    _num(row["max_score"]), _num(row["late_penalty"]),
                    _num(max(row["score"] - row["late_penalty"], 0.0))]
            line += [by_id.get(g, "") for g in grade_ids]
            for name in exercises:
                r = res.get(name, {})
                line += [r.get("status", ""), NOT_MEASURED if speed_is_pending(r) else _speedup(r)]
            pending = pending_points(row)
            drivers = sorted({str((r.get("timing") or {}).get("driver")) for r in res.values()
                              if (r.get("timing") or {}).get("driver")})
            line += [_num(row["max_score"] - pending), _num(pending), "; ".join(backends), "; ".join(devices), "; ".join(drivers), f"{row['grading_seconds']:.1f}"]
            w.writerow(line)


def _num(x: float) -> str:
    """Whole numbers without ".0"; anything else exactly (float(text) == x)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def gradescope_results(row: dict) -> dict:
    """Gradescope's results.json for one student's row."""
    tests = []
    for c in row["cells"]:
        name = f"{c['exercise']} ({c['part']})" if c["exercise"] else c["grade_id"]
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
    devices = sorted({r.get("device", "") for r in row["exercises"].values() if r.get("device")})
    backends = sorted({r.get("backend", "") for r in row["exercises"].values() if r.get("backend")})
    final = max(row["score"] - row["late_penalty"], 0.0)
    summary = [f"Graded on {', '.join(devices) or 'unknown device'} ({', '.join(backends) or '-'})."]
    for name, r in row["exercises"].items():
        sp = _speedup(r)
        summary.append(f"{name}: {r.get('status', '?')}" + (f", {float(sp):.2f}x the reference kernel" if sp else ""))
    pending = pending_points(row)
    measured_max = row["max_score"] - pending
    if pending:
        summary.append(f"Score {row['score']:g} / {measured_max:g} of the points measured so far; "
                       f"{pending:g} speed points pending (not measured without a GPU; a grading on a GPU fills "
                       f"them in, out of {row['max_score']:g} in all).")
    if row["late_penalty"]:
        summary.append(f"Late penalty: -{row['late_penalty']:g} points.")
    return {
        "score": final,
        "execution_time": round(row.get("grading_seconds", 0.0), 1),
        "output": "\n".join(summary),
        "tests": tests,
        "leaderboard": gradescope_leaderboard(row),
        "extra_data": {
            "measured_max_score": measured_max,
            "pending_points": pending,
            "devices": devices,
            "backends": backends,
            "exercises": {
                name: {k: r.get(k) for k in ("status", "device", "backend", "timing", "speed_measured", "speed_pending")}
                for name, r in row["exercises"].items()
            },
        },
    }


def write_gradescope(rows: list[dict], directory: str) -> list[str]:
    paths = []
    for row in rows:
        folder = os.path.join(directory, row["student"])
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "results.json")
        with open(path, "w") as f:
            json.dump(gradescope_results(row), f, indent=1)
            f.write("\n")
        paths.append(path)
    return paths


def gradescope_from_grading(grading: NotebookGrading, cells: list[GradedCell]) -> dict:
    """results.json straight from a NotebookGrading (no gradebook)."""
    row = {"score": 0.0, "max_score": 0.0, "late_penalty": 0.0, "cells": [], "exercises": {},
           "grading_seconds": grading.total_seconds}
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
