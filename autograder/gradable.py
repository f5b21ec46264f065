"""Whether a submitted notebook can be graded at all, and if not, why, in one sentence.

A notebook that is not JSON (cut off by an upload or a save that did not
finish), not a Jupyter notebook, or the notebook of another assignment cannot
be graded: that is the submission's doing, and it scores 0 with the reason
(:data:`autograder.outcome.NOT_GRADABLE`).  Anything else is graded, a
notebook without the assignment's cells included (its ``%%cuda`` cells are
found by their text, and nbgrader puts the test cells back).

Which assignment a notebook belongs to is read from the ids nbgrader gives
the instructor's cells (``grade_id``), against the instructor's notebooks
under the course's source folder (``solutions/``).
"""

from __future__ import annotations

import functools
import glob
import json
import os

import nbformat


def _cell_ids(nb: dict) -> set[str]:
    """The ``grade_id`` of every cell that carries nbgrader's metadata."""
    ids = set()
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        meta = cell.get("metadata", {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            ids.add(meta["grade_id"])
    return ids


@functools.lru_cache(maxsize=64)
def _instructor_cells(path: str, mtime: float) -> frozenset[str]:
    with open(path, encoding="utf-8") as f:
        return frozenset(_cell_ids(json.load(f)))


def instructor_notebooks(source_root: str) -> dict[tuple[str, str], frozenset[str]]:
    """(assignment, notebook) -> the ids of its instructor cells, for every notebook under ``source_root``."""
    out = {}
    for path in sorted(glob.glob(os.path.join(source_root, "*", "*.ipynb"))):
        assignment = os.path.basename(os.path.dirname(path))
        try:
            out[(assignment, os.path.splitext(os.path.basename(path))[0])] = _instructor_cells(
                path, os.path.getmtime(path))
        except (OSError, ValueError):
            continue  # an instructor notebook that does not read is not this submission's problem
    return out


def _not_json(name: str, text: str, exc: json.JSONDecodeError) -> str:
    if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
        return (f"{name} is cut off: the file stops in the middle of the notebook after {len(text.encode()):,} bytes "
                f"(a save or an upload that did not finish)")
    return f"{name} is not a notebook: it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"


def notebook_problem(path: str, assignment: str, source_root: str) -> str:
    """Why the notebook at ``path``, submitted for ``assignment``, cannot be graded ("" when it can)."""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        return f"{name} is empty ({len(raw)} bytes)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"{name} is not a notebook: it is not text (UTF-8 JSON)"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _not_json(name, text, exc)
    try:
        nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat's own reasons a JSON file is not a notebook
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{name} is not a Jupyter notebook ({why})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return f"{name} is not a Jupyter notebook (it has no list of cells)"
    return _other_assignment(name, _cell_ids(data), assignment, source_root)


def _other_assignment(name: str, ids: set[str], assignment: str, source_root: str) -> str:
    """Which other assignment's notebook this is, when its nbgrader cells are more of another assignment's
    notebook than of any of this one's (cells such as "setup" are in several) ("" otherwise)."""
    if not ids:
        return ""
    catalogue = instructor_notebooks(source_root)
    own = max((len(ids & cells) for (owner, _), cells in catalogue.items() if owner == assignment), default=0)
    shared, (other, other_nb) = max(((len(ids & cells), key) for key, cells in catalogue.items()
                                     if key[0] != assignment), default=(0, ("", "")))
    if shared <= own:
        return ""
    return f"{name} is the notebook of {other} ({other_nb}.ipynb), not of {assignment}"


def submission_problems(folder: str, assignment: str, notebooks: list[str], source_root: str) -> dict[str, str]:
    """notebook name -> why it cannot be graded, for the notebooks of ``assignment`` submitted in ``folder``.

    A submission holding none of the assignment's notebooks cannot be graded at
    all (each notebook gets that reason); one missing only some of them is graded,
    the missing ones scoring 0 as nbgrader scores them.
    """
    present = [n for n in notebooks if os.path.isfile(os.path.join(folder, f"{n}.ipynb"))]
    if not present and notebooks:
        held = sorted(f for f in os.listdir(folder) if f != "timestamp.txt") if os.path.isdir(folder) else []
        expected = ", ".join(f"{n}.ipynb" for n in notebooks)
        reason = (f"the submission has no {expected} (it holds {', '.join(held[:5])}{', ...' if len(held) > 5 else ''})"
                  if held else f"the submission has no {expected} (its folder is empty)")
        return {n: reason for n in notebooks}
    problems = {}
    for name in present:
        problem = notebook_problem(os.path.join(folder, f"{name}.ipynb"), assignment, source_root)
        if problem:
            problems[name] = problem
    return problems
