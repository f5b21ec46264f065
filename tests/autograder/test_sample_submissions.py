"""The committed sample submissions are what their generator writes today.

``tests/autograder/submissions/*.ipynb`` and ``manifest.json`` are written by
``make_submissions.py`` from the released notebook of 01_cuda_from_python.
The course tests grade the committed files, so a generator or a released
notebook changed without re-running it would leave them testing stale
notebooks: this test rebuilds every submission in memory and compares.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

SUBMISSIONS = Path(__file__).resolve().parent / "submissions"


def _generator():
    spec = importlib.util.spec_from_file_location("make_submissions", SUBMISSIONS / "make_submissions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def _cells(nb: nbformat.NotebookNode) -> list[tuple]:
    """What a submission is made of: each cell's kind, id, source and nbgrader metadata."""
    return [(c.cell_type, c.get("id"), c.source, c.metadata.get("nbgrader")) for c in nb.cells]


def test_the_manifest_lists_every_generated_submission():
    manifest = json.loads((SUBMISSIONS / "manifest.json").read_text())
    assert manifest["assignment"] == GENERATOR.ASSIGNMENT and manifest["notebook"] == GENERATOR.NOTEBOOK
    expected = {name: {"kind": kind, "twin": twin, "what": what}
                for name, (kind, twin, _, _, _, what) in GENERATOR.SUBMISSIONS.items()}
    assert manifest["submissions"] == expected, "re-run tests/autograder/submissions/make_submissions.py"
    committed = {p.stem for p in SUBMISSIONS.glob("*.ipynb")}
    assert committed == set(GENERATOR.SUBMISSIONS), "a committed notebook has no generator entry, or one is missing"


@pytest.mark.parametrize("name", sorted(GENERATOR.SUBMISSIONS))
def test_a_committed_submission_matches_its_generator(name):
    released = nbformat.read(GENERATOR.RELEASED, as_version=4)
    built = GENERATOR.build(name, released)
    nbformat.validate(built)
    committed = nbformat.read(SUBMISSIONS / f"{name}.ipynb", as_version=4)
    assert _cells(committed) == _cells(built), (
        f"{name}.ipynb differs from what make_submissions.py writes: re-run it")
