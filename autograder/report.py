"""Show a result to a student: text for any terminal, a heat map of where the errors are.

The heat map uses ``ShapeResult.error_map`` (the fraction of wrong elements
per bin, computed by the checker): a strip for 1-D outputs, an image for 2-D
ones.  A missing bounds check shows as a mark at the right end of the strip,
a wrong grid-stride step as a band starting part-way, a race as scattered
specks.
"""

from __future__ import annotations

from .result import ExerciseResult, ShapeResult


def check_text(result: ExerciseResult) -> str:
    """What ``check()`` prints."""
    head = f"check('{result.exercise}'): " + {
        "passed": "all visible cases pass",
        "failed": "some cases are wrong",
        "compile_error": "the kernel does not compile",
        "launch_error": "the kernel failed while running",
        "timeout": "the kernel did not finish in time",
        "crashed": "the check crashed",
        "invalid_launch": "the launch configuration is not valid",
        "missing": "no kernel to check",
    }.get(result.status, result.status)
    lines = [head]
    where = "GPU " + result.device if result.backend == "gpu" else "CPU emulator"
    if result.backend:
        lines.append(f"  on the {where}" + (f", launch {' '.join(f'{k}={v}' for k, v in result.launch.items())}" if result.launch else ""))
    if result.message and result.status != "passed":
        lines += ["", result.message]
    if result.shapes:
        lines.append("")
        lines += ["  " + line for line in result.case_lines()]
    t = result.timing
    if t and t.get("student_ms") is not None:
        lines += [
            "",
            f"  time {t['student_ms'] * 1e3:.1f} us for {t.get('shape')}, reference {t['reference_ms'] * 1e3:.1f} us "
            f"-> {t['speedup']:.2f}x the reference; {t['percent_of_floor']:.0f}% of the speed the memory system allows",
        ]
    elif result.status == "passed" and result.backend == "cpu":
        lines += ["", "  speed: not measured on the CPU emulator (it runs the kernel but says nothing about speed)."]
    if result.status == "passed":
        lines += ["", "The hidden tests use more sizes (1, primes, not a multiple of your block, a large one) and other random inputs."]
    return "\n".join(lines)


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


def results_table(results: list[ExerciseResult]) -> str:
    """One line per exercise: status and points."""
    rows = [f"{'exercise':<20} {'status':<15} {'correct':>9} {'speed':>9}"]
    for r in results:
        speed = f"{r.speed_score:g}/{r.speed_max:g}" + ("*" if r.speed_pending else "")
        rows.append(f"{r.exercise:<20} {r.status:<15} {r.correctness_score:>4g}/{r.correctness_max:<4g} {speed:>9}")
    if any(r.speed_pending for r in results):
        rows.append("* speed not measured (no GPU): those points are awarded by a GPU grading run")
    return "\n".join(rows)
