"""Per-student secret sizes that no launch parameter can collapse.

A size is drawn from a range fixed by the exercise (never scaled by the
student's block, so ``block=1`` draws from the same wide range as
``block=256``), then moved up to the next number that is a multiple of none
of the moduli to avoid (the block, 32): a modulus of 1 avoids nothing and is
ignored, so no choice of launch leaves every draw refused and a constant
fallback in its place.
"""

from __future__ import annotations

import numpy as np


def size_avoiding(rng: np.random.Generator, low: int, high: int, *moduli: int) -> int:
    """A size in [low, high) drawn from ``rng`` that is a multiple of none of ``moduli`` (those > 1)."""
    avoid = [int(m) for m in moduli if int(m) > 1]
    if high - low < 4 * (len(avoid) + 1):
        raise ValueError(f"size range [{low}, {high}) is too narrow to avoid multiples of {avoid}")
    n = int(rng.integers(low, high))
    # Each modulus > 1 rules out at most every other number, so a few steps suffice;
    # wrap inside the range rather than leave it.
    for _ in range(high - low):
        if all(n % m for m in avoid):
            return n
        n = n + 1 if n + 1 < high else low
    raise ValueError(f"no size in [{low}, {high}) avoids multiples of {avoid}")
