"""What the hidden part of an autograded test cell calls.

The instructor's test cells end with, for example::

    ### BEGIN HIDDEN TESTS
    grade("saxpy", part="correctness")
    ### END HIDDEN TESTS

At grading time this line is never executed: ``autograder grade`` reads it from
the instructor's copy of the cell (nbgrader restores it into every submission)
to learn which exercise and which part the cell scores, and grades the kernel
in a separate process. Run in a notebook (by the instructor, who sees the hidden
tests), it only says so.
"""

from __future__ import annotations

PARTS = ("correctness", "speed")


def grade(exercise: str, part: str = "correctness") -> None:
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, not {part!r}")
    print(
        f"[{exercise}: {part}] scored by `autograder grade` on hidden shapes and seeds, "
        "in a separate process; nothing is graded in this notebook."
    )
