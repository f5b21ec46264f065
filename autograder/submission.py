"""What a student submits for one exercise: kernel source text and launch integers.

Submissions are read from a notebook *statically*: the ``%%cuda`` cells are
found with nbformat and their text is split into the magic line and the CUDA
C body.  No cell is executed, so nothing a student writes in Python can reach
the grader.  The magic line is::

    %%cuda <exercise_name> [key=int ...]

for example ``%%cuda saxpy block=256 grid=512``.  The ``key=int`` pairs are
the student's launch configuration; the exercise declares which keys exist
and validates their values (see :mod:`autograder.exercise`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = "%%cuda"
#: Cells of index notation (exercises with ``language="tc"``); read exactly like %%cuda cells.
TC_MAGIC = "%%tc"
MAGICS = (MAGIC, TC_MAGIC)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([+-]?[0-9][0-9_]*)$")
#: Larger launch integers are refused while parsing (no exercise needs them).
MAX_ABS_INT = 2**63 - 1


@dataclass(frozen=True)
class KernelSubmission:
    """One ``%%cuda`` cell."""

    exercise: str  # exercise name from the %%cuda line
    source: str  # the cell body (CUDA C), magic line removed
    launch: dict[str, int] = field(default_factory=dict)  # key=int pairs from the magic line
    cell_line: int = 1  # line of the cell on which ``source`` starts (1 = source is the whole cell)
    cell_index: int | None = None  # index of the cell in its notebook, for messages
    parse_error: str = ""  # why the magic line could not be read ("" when it could)

    def __hash__(self) -> int:  # dict fields are not hashable
        return hash((self.exercise, self.source, tuple(sorted(self.launch.items())), self.cell_line))

    def compile_source(self) -> str:
        """The source padded with blank lines so that compiler line numbers are the cell's own."""
        return "\n" * max(0, self.cell_line - 1) + self.source

    def where(self) -> str:
        return f"cell {self.cell_index}" if self.cell_index is not None else "the %%cuda cell"


@dataclass(frozen=True)
class MagicLine:
    exercise: str | None
    launch: dict[str, int]
    error: str = ""


def parse_magic_line(line: str) -> MagicLine:
    """Parse ``%%cuda saxpy block=256 grid=512`` (with or without the ``%%cuda``).

    Never raises: a malformed line gives ``error``; an empty name gives
    ``exercise=None`` (a scratch cell, compiled but not graded).
    """
    text = line.strip()
    for magic in MAGICS:
        if text.startswith(magic) and (len(text) == len(magic) or text[len(magic)].isspace()):
            text = text[len(magic):]
            break
    tokens = text.split()
    if not tokens:
        return MagicLine(None, {})
    name, rest = tokens[0], tokens[1:]
    if "=" in name:
        return MagicLine(None, {}, f"the %%cuda line must start with the exercise name, e.g. '%%cuda saxpy block=256', not '{name}'")
    if not _NAME.match(name):
        return MagicLine(None, {}, f"'{name}' is not an exercise name")
    launch: dict[str, int] = {}
    errors: list[str] = []
    for token in rest:
        m = _PAIR.match(token)
        if not m:
            errors.append(f"'{token}' is not of the form key=integer (e.g. block=256)")
            continue
        key, value = m.group(1), int(m.group(2).replace("_", ""))
        if key in launch:
            errors.append(f"'{key}' is given twice")
            continue
        if abs(value) > MAX_ABS_INT:
            errors.append(f"{key}={value} is far too large")
            continue
        launch[key] = value
    return MagicLine(name, launch, "; ".join(errors))


def split_cell(text: str) -> tuple[str, str, int] | None:
    """``(magic_line, body, body_start_line)`` for a ``%%cuda`` cell, else None."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines):
        return None
    first = lines[i].strip()
    for magic in MAGICS:
        if first.startswith(magic) and (len(first) == len(magic) or first[len(magic)].isspace()):
            return first, "\n".join(lines[i + 1:]), i + 2
    return None  # not one of ours (%%cudafoo is another magic)


def submission_from_cell(text: str, cell_index: int | None = None) -> KernelSubmission | None:
    parts = split_cell(text)
    if parts is None:
        return None
    magic, body, start = parts
    parsed = parse_magic_line(magic)
    if parsed.exercise is None and not parsed.error:
        return None  # scratch cell
    return KernelSubmission(
        exercise=parsed.exercise or "",
        source=body,
        launch=dict(parsed.launch),
        cell_line=start,
        cell_index=cell_index,
        parse_error=parsed.error,
    )


def submissions_from_notebook(path_or_nb) -> list[KernelSubmission]:
    """Every graded ``%%cuda`` cell of a notebook, read statically (never executed).

    ``path_or_nb`` is a path or an ``nbformat.NotebookNode``.  When several cells
    name the same exercise, the last one wins.  Order: first appearance.
    """
    import nbformat

    if isinstance(path_or_nb, (str, Path)):
        nb = nbformat.read(str(path_or_nb), as_version=4)
    else:
        nb = path_or_nb
    found: dict[str, KernelSubmission] = {}
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(source)
        sub = submission_from_cell(source, index)
        if sub is not None and sub.exercise:
            found[sub.exercise] = sub
    return list(found.values())
