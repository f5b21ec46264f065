"""Where a grading's time goes: wall seconds added up per named phase.

A grading spends nearly all of its time around the kernel, not in it:
starting the sandboxed child, compiling, drawing inputs and computing
references, copying buffers, judging, writing the gradebook.  Each part of
the grader times its own phases with :meth:`PhaseTimes.phase`; the grading
child's phases travel back in its result (:attr:`autograder.result.ExerciseResult.phases`),
the grader adds its own, and a student's grading sums its exercises' and adds
the notebook's parsing and the gradebook's write
(:attr:`autograder.grading_record.StudentEntry.phases`).

A phase opened inside another counts only once: the outer one's time leaves
out what the inner ones took, so on one thread the phases never add up to
more than the wall time they were measured in.  The figures only describe a
grading; none of them decides anything about it (what the child reports is
read as numbers and nothing else).
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Mapping

#: The phases, in the order a grading meets them (a table lists them so; names not here come after, as met).
NOTEBOOK_PARSING = "notebook parsing"  # nbgrader's sanitizing pass, reading the %%cuda cells
GRADER_BUILDS = "grader builds"  # the grader's own runtime and kernels, built once per host
SANDBOX_START = "sandbox start"  # scratch space, cgroup, sandbox, until the child is ready (less its imports)
CHILD_IMPORTS = "child imports"  # the child's interpreter and the modules it imports
SOURCE_CHECK = "source check"  # what the source may include and contain, on its preprocessed text
COMPILE = "compile"  # the student's kernel, and its signature read
INPUTS = "input generation"  # a case's inputs, its float64 reference and error scales
TRANSFERS = "transfers"  # buffers to the device and back
LAUNCHES = "correctness launches"  # the kernel run on a case, reruns and probes of a failing case included
CHILD_CHECKS = "child's comparison"  # the child's own account of each case
OUTPUTS = "outputs handed back"  # each case's arrays written for the grader
TIMING = "timing"  # the kernel timed against the reference (a GPU only)
SANDBOX_END = "sandbox end"  # the child and its processes gone, cgroup and scratch space removed
VERDICT = "verdict"  # the grader's own inputs, references and comparison of every case
GRADEBOOK = "gradebook write"  # nbgrader's grading pass writing the gradebook and the graded folder, the record

ORDER = (NOTEBOOK_PARSING, GRADER_BUILDS, SANDBOX_START, CHILD_IMPORTS, SOURCE_CHECK, COMPILE, INPUTS, TRANSFERS,
         LAUNCHES, CHILD_CHECKS, OUTPUTS, TIMING, SANDBOX_END, VERDICT, GRADEBOOK)
#: At most this many phases are read from a child's report, and a name is at most this long.
MAX_PHASES = 64
MAX_NAME = 64


class PhaseTimes:
    """Wall seconds per phase name, added up over every time the phase was entered."""

    def __init__(self, seconds: Mapping[str, float] | None = None):
        self.seconds: dict[str, float] = {}
        self._open = threading.local()  # this thread's open phases: [seconds spent in inner phases, ...]
        if seconds:
            self.merge(seconds)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as ``name``, less what phases opened inside it took."""
        stack = self._stack()
        stack.append(0.0)
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            inner = stack.pop()
            self.add(name, spent - inner)
            if stack:
                stack[-1] += spent

    def _stack(self) -> list[float]:
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        return stack

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, float(seconds))

    def merge(self, other: Mapping[str, float]) -> None:
        for name, seconds in other.items():
            self.add(name, seconds)

    def total(self) -> float:
        return sum(self.seconds.values())

    def to_dict(self) -> dict[str, float]:
        """The phases in :data:`ORDER`, rounded to the millisecond."""
        return {name: round(self.seconds[name], 3) for name in ordered(self.seconds)}


def ordered(names) -> list[str]:
    """``names`` in :data:`ORDER`, any others after them in the order given."""
    names = list(names)
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def reported_phases(data) -> dict[str, float]:
    """The phases a grading child reported, kept only where they are what phases are: a name and a finite,
    non-negative number of seconds (anything else is dropped, never an error)."""
    if not isinstance(data, dict):
        return {}
    out: dict[str, float] = {}
    for name, seconds in list(data.items())[:MAX_PHASES]:
        if (isinstance(name, str) and 0 < len(name) <= MAX_NAME and isinstance(seconds, (int, float))
                and not isinstance(seconds, bool) and math.isfinite(seconds) and seconds >= 0):
            out[name] = float(seconds)
    return out


def summed(many) -> dict[str, float]:
    """The phases of several gradings (dicts of seconds) added up, in :data:`ORDER`."""
    total = PhaseTimes()
    for seconds in many:
        total.merge(seconds or {})
    return total.to_dict()


def phase_line(seconds: Mapping[str, float], wall_s: float | None = None) -> str:
    """``sandbox start 1.2 s, compile 3.4 s, ...`` (phases under 5 ms left out), and what no phase covers."""
    parts = [f"{name} {seconds[name]:.2f} s" for name in ordered(seconds) if seconds[name] >= 0.005]
    if wall_s is not None:
        parts.append(f"other {max(0.0, wall_s - sum(seconds.values())):.2f} s of {wall_s:.2f} s")
    return ", ".join(parts) or "no phases recorded"
