"""Recording the expected thread maps: the instructor's solutions' maps, which ``check()`` and the book draw.

``python -m autograder.thread_map_recording [NOTEBOOK ...]`` (default: every notebook of ``solutions/``) runs
the solution of every exercise with a ``thread_map`` shape on that shape on the CPU emulator, every block
recorded, and writes the maps to ``autograder/exercises/thread_maps.json`` (:data:`autograder.thread_maps.EXPECTED`),
which ships with the exercises where the solutions do not.  Run it after changing a solution or a map shape;
``tests/test_puzzles.py`` fails until the file is the solutions' maps as they are.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernels.runtime.module import compile_source
from kernels.tools.profiler import on_emulator

from .exercises import all_exercises, get_exercise
from .submission import KernelSubmission, submissions_from_notebook
from .thread_maps import EXPECTED, thread_map_of

ROOT = Path(__file__).resolve().parent.parent


def solution_cells(notebooks) -> list:
    """The solution cells (``autograder.submission.KernelSubmission``) of the exercises with a map shape in
    ``notebooks``, their solution markers removed."""
    exercises = all_exercises()
    found = []
    for notebook in notebooks:
        for sub in submissions_from_notebook(notebook):
            ex = exercises.get(sub.exercise)
            if ex is None or ex.thread_map is None:
                continue
            source = "\n".join(line for line in sub.source.splitlines() if "SOLUTION" not in line)
            found.append(KernelSubmission(exercise=sub.exercise, source=source, launch=sub.launch,
                                          cell_line=sub.cell_line))
    return found


def record_expected(notebooks) -> dict:
    """exercise -> the solution's map (plain data), from the solution cells of ``notebooks``, compiled as one
    module on the CPU emulator (the cells define kernels of different names and nothing else in common)."""
    cells = solution_cells(notebooks)
    if not cells:
        return {}
    with on_emulator():
        module = compile_source("\n".join(c.source for c in cells), name="thread_map_solutions.cu")
        maps = {}
        for cell in cells:
            tmap = thread_map_of(get_exercise(cell.exercise), module.function(cell.exercise), cell.launch)
            if tmap is not None:
                maps[cell.exercise] = tmap.as_dict()
    return maps


def expected_file_text(maps: dict) -> str:
    """The expected maps as the file holds them: one exercise a line, in order of name."""
    lines = [f" {json.dumps(name)}: {json.dumps(maps[name], separators=(',', ':'))}" for name in sorted(maps)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.thread_map_recording",
                                     description="Record the solutions' thread maps, which check() and the book draw "
                                                 f"as the expected ones, into {EXPECTED.relative_to(ROOT)}.")
    parser.add_argument("notebooks", nargs="*", help="solution notebooks (default: solutions/*/*.ipynb)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted(str(p) for p in (ROOT / "solutions").glob("*/*.ipynb"))
    maps = record_expected(notebooks)
    EXPECTED.write_text(expected_file_text(maps))
    print(f"{EXPECTED.relative_to(ROOT)}: the maps of {', '.join(sorted(maps)) or 'no exercise'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
