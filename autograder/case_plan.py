"""Which cases a grading runs: the visible shapes with public seeds, then hidden and secret ones.

Hidden seeds (and the secret per-student sizes) are derived in the grader
from the student's key (:func:`autograder.course_secret.student_key`, an HMAC
of the course secret), the student and the exercise, so the key never leaves
the grader and a regrade draws the same cases.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np

from .exercise import Exercise


def derive_seed(student_key: bytes, student_id: str, exercise: str, case: int, repeat: int) -> int:
    """A 63-bit seed from the student's key; unguessable without the key."""
    message = f"{student_id}\0{exercise}\0{case}\0{repeat}".encode()
    return int.from_bytes(hmac.new(student_key, message, hashlib.sha256).digest()[:8], "little") >> 1


VISIBLE_SEED_BASE = 20240917  # visible cases use fixed, public seeds (check() shows them)


def plan_cases(ex: Exercise, launch: dict, mode: str, student_key: bytes, student_id: str) -> list[dict]:
    """The cases to run: one per (shape, seed); hidden ones get seeds from the student's key."""
    cases = []
    visible = list(ex.visible_shapes)
    extra = ex.past_one_pass(launch) if ex.past_one_pass is not None else None
    if extra is not None and extra not in visible:
        visible.append(extra)
    for index, shape in enumerate(visible):
        for rep in range(ex.visible_seeds):
            cases.append({"shape": dict(shape), "seed": VISIBLE_SEED_BASE + 1000 * index + rep, "visible": True, "seed_index": rep})
    if mode == "hidden":
        # Visible shapes again with fresh secret seeds, then the hidden shapes.
        shapes = visible + list(ex.hidden_shapes)
        if ex.secret_shapes is not None:
            rng = np.random.default_rng(derive_seed(student_key, student_id, ex.name, -1, 0))
            shapes += list(ex.secret_shapes(rng, launch))
        for index, shape in enumerate(shapes):
            for rep in range(ex.hidden_seeds):
                cases.append({"shape": dict(shape), "seed": derive_seed(student_key, student_id, ex.name, index, rep),
                              "visible": False, "seed_index": rep})
    return cases
