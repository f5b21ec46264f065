"""The class leaderboard: per exercise, the fastest correct kernels, from the gradebook's gradings.

Only a correct kernel (every hidden case passed) whose speed was measured on
a GPU is ranked, by its speed-up against the reference kernel timed on the
same GPU in the same process, and shown with that GPU's model. Students are
shown under a per-course alias (a keyed hash of their name under the course
secret: stable from one assignment to the next, meaningless without the
secret) unless the instructor asks for names.

The same numbers go to Gradescope as the ``leaderboard`` field of each
student's ``results.json`` (:func:`gradescope_leaderboard`); Gradescope ranks
them under the names its students chose.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import os
from dataclasses import dataclass
from typing import Callable

from .feedback import speedup_of
from .outcome import FAILED, NOT_GRADABLE
from .safe_writes import write_text


@dataclass(frozen=True)
class Entry:
    who: str
    speedup: float
    device: str
    student_ms: float | None


def course_alias(course_secret: str, student: str) -> str:
    """The name ``student`` has on this course's leaderboards ("anonymous-" and 8 hex digits)."""
    digest = hmac.new(course_secret.encode(), b"leaderboard alias\0" + student.encode(), hashlib.sha256).hexdigest()
    return f"anonymous-{digest[:8]}"


def ranked_speedup(res: dict) -> float | None:
    """The speed-up a results-file entry ranks with: a correct kernel's measured speed-up, else None."""
    if res.get("status") != "passed" or not res.get("speed_measured"):
        return None
    value = speedup_of(res.get("timing"))
    return float(value) if value else None


def leaderboard(rows: list[dict], name_of: Callable[[str], str], top: int = 10) -> dict[str, dict]:
    """exercise -> {"entries": the ``top`` fastest correct kernels, "correct": how many were correct,
    "unmeasured": correct kernels whose speed was not measured}; ``rows`` as :func:`autograder.export.collect`."""
    boards: dict[str, dict] = {}
    for row in rows:
        for exercise, res in row["exercises"].items():
            board = boards.setdefault(exercise, {"entries": [], "correct": 0, "unmeasured": 0})
            if res.get("status") != "passed":
                continue
            board["correct"] += 1
            speedup = ranked_speedup(res)
            if speedup is None:
                board["unmeasured"] += 1
                continue
            timing = res.get("timing") or {}
            board["entries"].append(Entry(name_of(row["student"]), speedup, res.get("device", ""),
                                          timing.get("student_ms")))
    for board in boards.values():
        board["entries"] = sorted(board["entries"], key=lambda e: (-e.speedup, e.who))[:top]
    return boards


def gradescope_leaderboard(row: dict) -> list[dict]:
    """Gradescope's ``leaderboard`` field for one student: each exercise's speed-up (0 when the kernel is not
    correct or its speed was not measured) and the GPU it was measured on; nothing when the grading failed."""
    if getattr(row.get("outcome"), "kind", "") == FAILED:
        return []
    out = []
    devices = []
    for exercise, res in row["exercises"].items():
        speedup = ranked_speedup(res)
        out.append({"name": f"{exercise} speed-up", "value": round(speedup, 3) if speedup else 0.0, "order": "desc"})
        if speedup and res.get("device") and res["device"] not in devices:
            devices.append(res["device"])
    out.append({"name": "GPU", "value": ", ".join(devices) or "not measured"})
    return out


def unranked_note(rows: list[dict]) -> str:
    """What the page says of the submissions that have no grade to rank: not gradable, or failed to grade."""
    kinds = [getattr(row.get("outcome"), "kind", "") for row in rows]
    not_gradable, failed = kinds.count(NOT_GRADABLE), kinds.count(FAILED)
    parts = []
    if not_gradable:
        parts.append(f"{not_gradable} submission(s) not gradable (the notebook could not be read; scored 0)")
    if failed:
        parts.append(f"{failed} submission(s) failed to grade (not a score: they are graded again)")
    return "Not ranked: " + "; ".join(parts) + "." if parts else ""


def leaderboard_html(assignment: str, boards: dict[str, dict], named: bool, note: str = "") -> str:
    """A page of one table per exercise (``note``: a paragraph after the introduction)."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Leaderboard: {e(assignment)}</title>",
        "<style>body{font-family:sans-serif;max-width:52em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin-bottom:1.5em}td,th{padding:.25em .8em;border-bottom:1px solid #ddd;"
        "text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}</style>",
        "</head><body>",
        f"<h1>Leaderboard: {e(assignment)}</h1>",
        "<p>The fastest correct kernels of each exercise, by speed-up against the reference kernel timed on the "
        "same GPU in the same run. "
        + ("Students are shown by name." if named else
           "Students are shown under their course alias, the same on every leaderboard of the course.")
        + "</p>",
    ]
    if note:
        parts.append(f"<p>{e(note)}</p>")
    models = sorted({entry.device for b in boards.values() for entry in b["entries"] if entry.device})
    if len(models) > 1:
        parts.append(f"<p><strong>Measured on more than one GPU model</strong> ({e(', '.join(models))}): "
                     f"speed-ups measured on different cards are not strictly comparable.</p>")
    for exercise, board in boards.items():
        parts.append(f"<h2>{e(exercise)}</h2>")
        if not board["entries"]:
            why = (f"{board['correct']} correct kernel(s), none timed on a GPU yet (graded on the CPU emulator)"
                   if board["correct"] else "no correct kernel yet")
            parts.append(f"<p>No ranking: {e(why)}.</p>")
            continue
        parts.append("<table><thead><tr><th>rank</th><th>student</th><th>speed-up</th><th>kernel time</th>"
                     "<th>GPU</th></tr></thead><tbody>")
        for rank, entry in enumerate(board["entries"], 1):
            ms = f"{entry.student_ms * 1e3:.1f} µs" if entry.student_ms else ""
            parts.append(f'<tr><td class="num">{rank}</td><td>{e(entry.who)}</td>'
                         f'<td class="num">{entry.speedup:.2f}×</td><td class="num">{e(ms)}</td>'
                         f"<td>{e(entry.device)}</td></tr>")
        parts.append("</tbody></table>")
        extra = []
        if board["unmeasured"]:
            extra.append(f"{board['unmeasured']} more correct kernel(s) not timed (graded without a GPU)")
        if extra:
            parts.append(f"<p>{e('; '.join(extra))}.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def leaderboard_path(cd, assignment: str) -> str:
    """Beside the students' feedback folders: ``feedback/leaderboard_<assignment>.html``."""
    return os.path.join(cd.root, cd.feedback_directory, f"leaderboard_{assignment}.html")


def write_leaderboard(cd, assignment: str, rows: list[dict], course_secret: str | None, named: bool = False,
                      top: int = 10, path: str | None = None) -> str:
    """Write the page of ``rows`` (:func:`autograder.export.collect`); anonymised unless ``named``
    (then ``course_secret`` may be None)."""
    if not named and not course_secret:
        raise ValueError("an anonymised leaderboard needs the course secret (its aliases derive from it)")
    boards = leaderboard(rows, (lambda s: s) if named else (lambda s: course_alias(course_secret, s)), top=top)
    path = path or leaderboard_path(cd, assignment)
    write_text(path, leaderboard_html(assignment, boards, named, unranked_note(rows)))
    return path
