"""Show a student where the errors are: a heat map per failing case (the text is :mod:`autograder.feedback`).

The heat map uses ``ShapeResult.error_map`` (the fraction of wrong elements
per bin, computed by the checker): a strip for 1-D outputs, an image for 2-D
ones.  A missing bounds check shows as a mark at the right end of the strip,
a wrong grid-stride step as a band starting part-way, a race as scattered
specks.
"""

from __future__ import annotations

from .result import ExerciseResult, ShapeResult


def failing_maps(result: ExerciseResult, limit: int = 3) -> list[ShapeResult]:
    """The first failing cases that carry an error map (one per shape)."""
    seen, out = set(), []
    for s in result.shapes:
        if not s.passed and s.error_map and s.label not in seen:
            seen.add(s.label)
            out.append(s)
        if len(out) >= limit:
            break
    return out


def plot_error_maps(result: ExerciseResult, limit: int = 3):
    """A matplotlib Figure with one heat map per failing shape, or None when there is nothing to draw."""
    cases = failing_maps(result, limit)
    if not cases:
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(len(cases), 1, figsize=(8, 1.4 + (2.6 if any(len(c.error_map["shape"]) > 1 for c in cases) else 0.6) * len(cases)), squeeze=False)
    for ax, case in zip(axes[:, 0], cases):
        grid = np.array(case.error_map["rows"], dtype=float)
        # A bin with any wrong element shows clearly even when most of it is right.
        grid = np.where(grid > 0, 0.4 + 0.6 * grid, 0.0)
        shape = case.error_map["shape"]
        if len(shape) == 1:
            ax.imshow(grid, aspect="auto", cmap="Reds", vmin=0, vmax=1, extent=(0, shape[0], 0, 1), interpolation="nearest")
            ax.set_yticks([])
            ax.set_xlabel(f"element index of {case.output} (0 .. {shape[0] - 1})")
        else:
            rows = int(np.prod(shape[:-1]))
            ax.imshow(grid, aspect="auto", cmap="Reds", vmin=0, vmax=1, extent=(0, shape[-1], rows, 0), interpolation="nearest")
            ax.set_xlabel("column")
            ax.set_ylabel("row")
        ax.set_title(f"{case.label}: {case.n_bad} of {case.n_total} wrong (red: bins with wrong elements, darker = more)", fontsize=10)
    fig.tight_layout()
    return fig
