"""Every assignment graded end to end on a GPU: the instructor's solution notebook
earns every correctness point with its speed measured against the reference
kernel, and the released student notebook (stubs only) earns nothing.

The planted-bug corpora of the chapters are graded on the CPU emulator in
``make test``, where a race or an out-of-bounds access is found every time;
on a GPU they may or may not show, so this file grades what a GPU must add:
the timing, the device record and the speed points.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and not p.name.startswith("."))

pytestmark = pytest.mark.gpu


def grade(notebook: Path, assignment: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{notebook.stem}-{notebook.parent.parent.name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "grade-notebook", str(notebook), "--assignment", assignment,
         "--course-dir", str(ROOT), "--results-json", str(out), "--timeout", "300"],
        capture_output=True, text=True, timeout=1500, cwd=ROOT,
        env={**__import__("os").environ, "DLK_BACKEND": "gpu", "DLK_GRADER_SECRET": "solutions on the GPU"},
    )
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_earns_every_point_it_can_on_a_gpu(assignment, tmp_path):
    (notebook,) = sorted((ROOT / "solutions" / assignment).glob("*.ipynb"))
    results = grade(notebook, assignment, tmp_path)
    tests = results["tests"]
    assert tests, results
    speed = [t for t in tests if "(speed)" in t["name"]]
    for test in tests:
        if "(correctness)" in test["name"]:
            assert test["score"] == test["max_score"], test
    for test in speed:  # measured on this GPU, against the reference kernel in the same process
        assert "speed-up" in test["output"] and "NVIDIA" in test["output"], test
    # Some solutions are the simple version of a kernel whose reference is the
    # chapter's fastest: their speed points are partial by design; but every
    # assignment's solution earns speed points somewhere.
    assert not speed or any(t["score"] > 0 for t in speed), speed


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_stubs_earn_nothing_on_a_gpu(assignment, tmp_path):
    (notebook,) = sorted((ROOT / "exercises" / assignment).glob("*.ipynb"))
    results = grade(notebook, assignment, tmp_path)
    assert results["score"] == 0, results
