"""The points: speed in bands of the speed-up over the reference, none for a time below the physical floor.

Every rule that turns a check or a measurement into points is :mod:`autograder.scoring`'s; the timing
that produces the measurement is tested in test_engine_timing.py and test_timing_inputs.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.exercises import get_exercise
from autograder.scoring import speed_points

GRADER = Path(__file__).resolve().parents[2] / "autograder"


def test_speed_bands_give_points_only_above_each_threshold():
    ex = get_exercise("saxpy")
    base = {"below_floor": False, "student_ms": 1.0, "floor_ms": 0.1, "shape": {"n": 10}, "peak_bandwidth_gbs": 1000}
    assert speed_points(ex, {**base, "speedup": 1.3})[0] == ex.speed_points
    assert speed_points(ex, {**base, "speedup": 0.8})[0] == 0.75 * ex.speed_points
    assert speed_points(ex, {**base, "speedup": 0.1})[0] == 0.0


def test_a_time_below_the_physical_floor_is_rejected():
    ex = get_exercise("saxpy")
    points, note = speed_points(ex, {"below_floor": True, "student_ms": 0.001, "floor_ms": 0.1, "speedup": 100.0,
                                     "shape": {"n": 2**25}, "peak_bandwidth_gbs": 3350.0})
    assert points == 0 and "floor" in note


def test_points_are_given_in_the_scoring_module_only():
    """No other module of the grader sets a score or pending speed points (of a result, or in making one), so
    that a change of how points are given is a change of autograder/scoring.py and its test."""
    points = {"correctness_score", "speed_score", "speed_pending"}
    setting = set()
    for path in sorted(GRADER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            attributes = [t for target in targets for t in ast.walk(target) if isinstance(t, ast.Attribute)]
            made = isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "ExerciseResult"
            keywords = node.keywords if made else []
            if {a.attr for a in attributes} & points or {k.arg for k in keywords} & points:
                setting.add(path.relative_to(GRADER).as_posix())
    assert setting == {"scoring.py"}
