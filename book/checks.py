"""How far a kernel's output is from its reference, in the words and numbers the pages print."""

from __future__ import annotations

import numpy as np

from kernels.conv import conv2d


def largest_relative_error(got, expected) -> float:
    """The largest error of ``got`` relative to the largest value of ``expected`` (a float64 reference)."""
    return float(np.abs(got - expected).max() / (np.abs(expected).max() + 1e-30))


def conv_forward_error(version: str, X, W, b) -> float:
    """The largest absolute error of the direct convolution's ``version`` on ``X``, ``W``, ``b`` against float64."""
    return float(np.abs(conv2d.FORWARDS[version](X, W, b) - conv2d.forward_reference(X, W, b)).max())


def check_against_numpy(tc, example, shapes, rng) -> None:
    """Run the compiled comprehension ``tc`` on inputs of each shape drawn from ``rng`` and print its largest error
    relative to the largest output of the example's float64 NumPy reference."""
    worst = 0.0
    for shape in shapes:
        args = example.make_inputs(shape, rng)
        expected = example.reference(*args)[0]
        worst = max(worst, largest_relative_error(tc(*args), expected))
    print(f"{tc.name} ({tc.schedule.describe()}): largest error relative to the largest output "
          f"{worst:.1e} over {len(shapes)} shapes")
