"""Every text a student or instructor reads about a graded kernel, formatted in one place.

* :func:`feedback_text`: the full report of one exercise (status, points, every
  case, hints, timing): the correctness cell of nbgrader's feedback;
* :func:`check_text`: what ``check()`` prints in the student's notebook;
* :func:`part_feedback` and :func:`speed_feedback`: the text of an nbgrader
  test cell (correctness or speed), also the ``output`` of a Gradescope test;
* :func:`speedup_of`: the speed-up the exports list;
* :func:`device_label` and :func:`exercise_points`: where a kernel ran, and its
  points, as every command and page names them (speed not measured is
  pending, never a zero).

The functions take an :class:`autograder.result.ExerciseResult` (this module
imports nothing of the grader, so the result can format itself with it).
"""

from __future__ import annotations

import math
import re

STATUS_HEADLINES = {
    "passed": "all visible cases pass",
    "failed": "some cases are wrong",
    "compile_error": "the kernel does not compile",
    "wrong_kernel": "the cell compiles, but its kernel is not the one asked for (its name, parameters or indices)",
    "not_written": "no code was written: the kernel is still empty",
    "launch_error": "the kernel failed while running",
    "timeout": "the kernel did not finish in time",
    "crashed": "the check crashed",
    "invalid_launch": "the launch configuration is not valid",
    "missing": "no kernel to check",
    "not_gradable": "the submitted notebook could not be graded",
}


#: What a correctness graded without a GPU is, in the one place its flag is shown (the correctness text).
PROVISIONAL = ("provisional: correctness graded on the CPU emulator, not on a GPU; it stands once a grading on a GPU "
               "confirms it")


def number(x) -> str:
    """A measured number in 4 significant digits; "-" for none."""
    if x is None:
        return "-"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return f"{x:.4g}"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


#: Where a kernel ran when it ran without a GPU, as every page says it.
CPU_EMULATOR = "CPU emulator (no GPU)"


def device_label(backend: str, device: str = "") -> str:
    """Where a kernel ran, as a person says it: "NVIDIA H100 80GB HBM3", "CPU emulator (no GPU)", or "not run"."""
    if backend == "cpu":
        return CPU_EMULATOR
    if backend == "gpu":
        return device or "a GPU"
    return device or "not run"


def _ran_on(result) -> str:
    return device_label(result.backend, result.device)


def exercise_points(result) -> str:
    """"correctness 6/6, speed 1/2", with "speed pending" where speed was not measured (no GPU)."""
    text = f"correctness {float(result.correctness_score):g}/{float(result.correctness_max):g}"
    if float(result.speed_max):
        text += (", speed pending" if result.speed_is_pending
                 else f", speed {float(result.speed_score):g}/{float(result.speed_max):g}")
    return text


def _measured_on(timing: dict) -> str:
    return f"measured on {timing.get('device')}, driver {timing.get('driver', '?')}, clocks {timing.get('clocks', '?')}"


def speedup_of(timing: dict | None) -> float | None:
    """The reference's time over the student's, from a result's ``timing`` (None when not measured)."""
    value = (timing or {}).get("speedup")
    return None if value is None else float(value)


def feedback_text(result) -> str:
    """Plain text for the student's feedback: status, points, each case, hints, timing."""
    if not result.speed_max:
        speed = ""
    elif result.speed_is_pending:
        speed = f", speed pending ({result.speed_max:g} points, measured when graded on a GPU)"
    else:
        speed = f", speed {result.speed_score:g} / {result.speed_max:g}"
    lines = [
        f"Exercise {result.exercise}: {result.status.replace('_', ' ')}",
        f"  correctness {result.correctness_score:g} / {result.correctness_max:g}{speed}",
    ]
    if result.backend:
        lines.append(f"  ran on: {_ran_on(result)}")
    if result.provisional:
        lines.append("  " + PROVISIONAL)
    if result.launch:
        lines.append("  launch: " + " ".join(f"{k}={v}" for k, v in result.launch.items()))
    if result.message:
        lines += ["", _indent(result.message, "  ")]
    if result.shapes:
        lines.append("")
        lines.append("  cases:")
        lines += ["    " + line for line in case_lines(result)]
    if result.timing:
        t = result.timing
        lines.append("")
        if t.get("student_ms") is not None:
            lines.append(
                f"  time: {number(t.get('student_ms'))} ms (reference {number(t.get('reference_ms'))} ms, "
                f"speed-up {number(t.get('speedup'))}x); physical floor {number(t.get('floor_ms'))} ms "
                f"({number(t.get('percent_of_floor'))}% of the floor's speed)"
            )
        if t.get("device"):
            lines.append("  " + _measured_on(t))
    if result.speed_note:
        lines.append("  speed: " + result.speed_note)
    return "\n".join(lines)

def _cause(hint: str) -> str:
    """A hint with its numbers taken out: hints of one cause on other shapes and seeds compare equal."""
    return re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", hint).strip()


def case_lines(result) -> list[str]:
    """One line per shape whose seeds all passed; the details of every failing case.

    Each hint is given once: a hint of the same cause (the same words, other
    numbers) on a later shape, or already in the result's message, is left out.
    """
    from dataclasses import replace

    lines: list[str] = []
    told = _cause(result.message or "")
    seen: set[str] = set()
    order: list[tuple[bool, str]] = []
    groups: dict[tuple[bool, str], list[ShapeResult]] = {}
    for s in result.shapes:
        key = (s.visible, s.label)
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(s)
    for key in order:
        cases = groups[key]
        prefix = "" if key[0] else "(hidden) "
        if all(c.passed for c in cases):
            worst_abs = max((c.max_abs_err for c in cases if c.max_abs_err is not None), default=None)
            worst_rel = max((c.max_rel_err for c in cases if c.max_rel_err is not None), default=None)
            seeds = f"{len(cases)} seeds" if len(cases) > 1 else f"seed #{cases[0].seed_index}"
            lines.append(f"{prefix}PASS  {key[1]:<22} {seeds:<8}  max abs err {number(worst_abs)}  max rel err {number(worst_rel)}")
        else:
            failing = [c for c in cases if not c.passed]
            first = failing[0]
            if first.hint:
                cause = _cause(first.hint)
                if cause in seen or cause in told:
                    first = replace(first, hint="")  # said once already: one hint per cause
                seen.add(cause)
            lines += (prefix + first.summary()).splitlines()
            others = [f"seed #{c.seed_index} ({_wrong_count(c)} wrong)" if c.n_total else f"seed #{c.seed_index}"
                      for c in failing[1:]]
            if others:
                lines.append(f"{prefix}      also wrong: {', '.join(others)}")
            passed = sum(c.passed for c in cases)
            if passed:
                lines.append(f"{prefix}      ({passed} other seed{'s' if passed > 1 else ''} of {key[1]} passed)")
    return lines


def wrong_share(n_bad: int, n_total: int) -> str:
    """How much of an output is wrong, as a share (a hidden case's element count would tell its size)."""
    share = n_bad / max(1, n_total)
    return "all" if n_bad == n_total else f"{share:.0%}" if share >= 0.01 else "under 1%"


def _wrong_count(case) -> str:
    return f"{case.n_bad} of {case.n_total}" if case.visible else wrong_share(case.n_bad, case.n_total)


def check_text(result) -> str:
    """What ``check()`` prints."""
    head = f"check('{result.exercise}'): " + STATUS_HEADLINES.get(result.status, result.status)
    lines = [head]
    if result.backend:
        lines.append(f"  on {_ran_on(result)}" + (f", launch {' '.join(f'{k}={v}' for k, v in result.launch.items())}" if result.launch else ""))
    if result.message and result.status != "passed":
        lines += ["", result.message]
    if result.shapes:
        lines.append("")
        lines += ["  " + line for line in case_lines(result)]
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


def part_feedback(result, part: str, points: float, awarded: float) -> str:
    """The text a test cell shows: the whole report under correctness, the timing under speed."""
    if part == "speed" and result.speed_is_pending:
        title = f"{result.exercise} ({part}): pending, {points:g} points measured when graded on a GPU"
    else:
        title = f"{result.exercise} ({part}): {awarded:g} / {points:g} points"
    lines = [title, "-" * len(title)]
    if part == "correctness":
        lines.append(feedback_text(result).rstrip())
    else:
        lines += speed_feedback(result)
    maximum = float(result.part_max(part))
    if maximum and maximum != float(points):
        lines.append(f"  ({part} is scored out of {maximum:g} by the grader and scaled to this cell's {points:g} points)")
    return "\n".join(lines) + "\n"


def speed_feedback(result) -> list[str]:
    status = str(result.status).replace("_", " ")
    lines = [f"Exercise {result.exercise}: {status} (correctness "
             f"{float(result.correctness_score):g} / {float(result.correctness_max):g})"]
    if result.status == "not_gradable":
        return lines + ["  " + result.message]
    if result.backend:
        lines.append(f"  ran on: {_ran_on(result)}")
    timing = result.timing or {}
    if timing.get("student_ms") is not None:
        lines.append(
            f"  time: {_g(timing.get('student_ms'))} ms; reference kernel {_g(timing.get('reference_ms'))} ms; "
            f"speed-up {_g(timing.get('speedup'))}x"
        )
        if timing.get("floor_ms") is not None:
            lines.append(f"  physical floor {_g(timing.get('floor_ms'))} ms "
                         f"({_g(timing.get('percent_of_floor'))}% of the floor's speed)")
    if timing.get("device"):
        lines.append("  " + _measured_on(timing))
    note = result.speed_note
    if note:
        lines.append(f"  speed: {note}")
    elif not result.speed_measured:
        lines.append("  speed: not measured (speed points need a correct kernel, timed on a GPU).")
    if result.status != "passed" and result.message:
        lines.append("  (why the kernel is not correct: see the correctness cell above)")
    return lines


def _g(x) -> str:
    try:
        return f"{float(x):.4g}"
    except (TypeError, ValueError):
        return "?"
