"""Which cases a grading runs: the visible shapes with public seeds, then hidden and secret ones, and their names.

Hidden seeds (and the secret per-student sizes) are derived in the grader
from the student's key (:func:`autograder.course_secret.student_key`, an HMAC
of the course secret), the student, the exercise and the submission itself
(a hash of the kernel's text and launch): the key never leaves the grader, a
regrade of the same submission draws the same cases, and a resubmission draws
new ones, so that a kernel tuned to the sizes of an earlier grading gains
nothing.

A hidden case is named in everything a student reads by its number and its
nature -- "hidden case 4 (n is not a multiple of your block, more than one
pass of your grid)" -- never by its sizes (:func:`case_label`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import numpy as np

from .exercise import Exercise


def derive_seed(student_key: bytes, student_id: str, exercise: str, case: int, repeat: int,
                submission: str = "") -> int:
    """A 63-bit seed from the student's key; unguessable without the key, new for every other ``submission``."""
    message = f"{student_id}\0{exercise}\0{case}\0{repeat}\0{submission}".encode()
    return int.from_bytes(hmac.new(student_key, message, hashlib.sha256).digest()[:8], "little") >> 1


def submission_digest(source: str, launch: dict) -> str:
    """What the hidden cases of a submission are drawn for: a hash of its kernel text and launch integers."""
    text = json.dumps({"source": source, "launch": launch}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


VISIBLE_SEED_BASE = 20240917  # visible cases use fixed, public seeds (check() shows them)


def plan_cases(ex: Exercise, launch: dict, mode: str, student_key: bytes, student_id: str,
               submission: str = "") -> list[dict]:
    """The cases to run: one per (shape, seed); hidden ones get seeds (and secret shapes) from the student's key and
    the ``submission`` (:func:`submission_digest`), and each its ``name`` (:func:`case_label`)."""
    cases = []
    visible = list(ex.visible_shapes)
    extra = ex.past_one_pass(launch) if ex.past_one_pass is not None else None
    if extra is not None and extra not in visible:
        visible.append(extra)
    for index, shape in enumerate(visible):
        for rep in range(ex.visible_seeds):
            cases.append({"shape": dict(shape), "seed": VISIBLE_SEED_BASE + 1000 * index + rep, "visible": True,
                          "seed_index": rep, "name": ex.shape_label(shape)})
    if mode == "hidden":
        # Visible shapes again with fresh secret seeds, then the hidden shapes.
        shapes = [(shape, f"the visible shape {ex.shape_label(shape)}, other inputs") for shape in visible]
        shapes += [(shape, hidden_nature(ex, shape, launch)) for shape in ex.hidden_shapes]
        if ex.secret_shapes is not None:
            rng = np.random.default_rng(derive_seed(student_key, student_id, ex.name, -1, 0, submission))
            shapes += [(shape, hidden_nature(ex, shape, launch)) for shape in ex.secret_shapes(rng, launch)]
        for index, (shape, nature) in enumerate(shapes):
            for rep in range(ex.hidden_seeds):
                cases.append({"shape": dict(shape), "visible": False, "seed_index": rep,
                              "seed": derive_seed(student_key, student_id, ex.name, index, rep, submission),
                              "name": f"hidden case {index + 1} ({nature})"})
    return cases


def case_label(ex: Exercise, case: dict) -> str:
    """What a case is called in everything a student reads: a visible one by its sizes, a hidden one by its
    number and nature (the planned ``name``), never by its sizes."""
    return str(case.get("name") or (ex.shape_label(case["shape"]) if case.get("visible", True) else "a hidden case"))


#: Launch keys that give a block's extent along the one axis of a one-dimensional exercise.
_BLOCK_KEYS = ("block", "block_x")


def _is_prime(n: int) -> bool:
    return n > 2 and n % 2 == 1 and all(n % d for d in range(3, int(n ** 0.5) + 1, 2))


#: The shape keys that are a vector's increment (BLAS's incx, incy): the distance between its elements, no size.
INCREMENTS = ("incx", "incy")


def hidden_nature(ex: Exercise, shape: dict, launch: dict) -> str:
    """What a hidden shape is like, in words that name no size: one, prime, odd, no multiple of the student's
    block, past one pass of their grid, large; strided where a vector's increment is more than 1."""
    sizes = {key: value for key, value in shape.items()
             if isinstance(value, int) and not isinstance(value, bool) and key not in INCREMENTS}
    traits = ["strided"] if any(shape.get(key, 1) != 1 for key in INCREMENTS) else []
    if len(sizes) == 1:
        (key, n), = sizes.items()
        block = next((int(launch[k]) for k in _BLOCK_KEYS if k in launch), 0)
        if n == 1:
            traits.append(f"{key} is 1")
        elif block > 1 and n % block:
            traits.append(f"{key} is not a multiple of your block")
        if "grid" in launch and block and n > int(launch["grid"]) * block:
            traits.append("more than one pass of your grid")
        if _is_prime(n):
            traits.append(f"{key} is prime")
        if n >= 2**20:
            traits.append("large")
        return ", ".join(traits) or "another size"
    for key, value in sizes.items():
        if value == 1:
            traits.append(f"{key} is 1")
        elif _is_prime(value) and value > 3:
            traits.append(f"{key} is prime")
        elif value % 2:
            traits.append(f"{key} is odd")
    if sizes and max(sizes.values()) >= 512:
        traits.append("a large extent")
    return ", ".join(traits[:4]) or "other sizes"


_WHOLE_NUMBER = re.compile(r"(?<![\w.+\-])\d+(?![\w.]|\.\d)")
#: Whole numbers a hint may give that are facts of a number format, never a case's size: float16's largest value.
FORMAT_FACTS = frozenset({65504})


def concealed(text: str, launch: dict) -> str:
    """``text`` about a hidden case with every whole number that may tell its sizes written N: counts, indices,
    extents.  The student's own launch numbers (and its threads, grid x block) stay, as do 0, 1, decimals and the
    :data:`FORMAT_FACTS`."""
    known = {0, 1, *FORMAT_FACTS, *(int(v) for v in launch.values() if isinstance(v, int))}
    blocks = [int(v) for k, v in launch.items() if k.startswith("block") and isinstance(v, int)]
    grids = [int(v) for k, v in launch.items() if k.startswith("grid") and isinstance(v, int)]
    if blocks and grids:
        known.add(int(np.prod(blocks)) * int(np.prod(grids)))
    return _WHOLE_NUMBER.sub(lambda m: m.group(0) if int(m.group(0)) in known else "N", text)
