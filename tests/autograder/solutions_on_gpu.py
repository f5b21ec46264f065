"""Grading an assignment's notebooks end to end on a GPU, for the ``test_solutions_on_gpu*`` files.

The instructor's solution notebook earns every correctness point with its
speed measured against the reference kernel, and the released student notebook
(stubs only) earns nothing.  The assignments are checked in several files so
that ``make test-gpu`` (one process per file) grades them side by side;
``SHARES`` says which file grades which solutions (the released notebooks are
all graded by ``test_solutions_on_gpu_stubs.py``), and a test checks that every
assignment has exactly one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and not p.name.startswith("."))

#: test file -> the assignments whose solution notebook it grades (about 100 s of grading each on an H100)
SHARES = {
    "test_solutions_on_gpu.py": ["00_puzzles", "01_cuda_from_python", "01_warp_shuffle", "02_perceptrons_mlp", "03_cnn",
                                 "04_conv_as_gemm"],
    "test_solutions_on_gpu_custom_layers.py": ["05_capsules", "06_large_margin_softmax", "07_index_notation"],
    "test_solutions_on_gpu_upper_rungs.py": ["04_gemm_ladder", "08_attention"],
}


def grade(notebook: Path, assignment: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{notebook.stem}-{notebook.parent.parent.name}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "grade-notebook", str(notebook), "--assignment", assignment,
         "--course-dir", str(ROOT), "--results-json", str(out), "--timeout", "300"],
        capture_output=True, text=True, timeout=1500, cwd=ROOT,
        env={**os.environ, "DLK_BACKEND": "gpu", "DLK_GRADER_SECRET": "solutions on the GPU"},
    )
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def check_solution_earns_every_point_it_can(assignment: str, tmp_path: Path) -> None:
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


def check_released_stubs_earn_nothing(assignment: str, tmp_path: Path) -> None:
    (notebook,) = sorted((ROOT / "exercises" / assignment).glob("*.ipynb"))
    results = grade(notebook, assignment, tmp_path)
    assert results["score"] == 0, results
