"""Where a grading's time goes (autograder.phase_times): phases recorded, counted once, never more than the wall.

No assertion here is about how fast anything is: only that each phase is recorded, that a phase opened
inside another is not counted twice, and that the phases of one thread never add up to more than the wall
time around them.  What a grading child reports is read as numbers and nothing else.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from autograder.isolation import _add_child_phases
from autograder.phase_times import (CHILD_IMPORTS, COMPILE, GRADEBOOK, INPUTS, LAUNCHES, ORDER, SANDBOX_START,
                                    PhaseTimes, ordered, phase_line, reported_phases, summed)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_each_phase_is_recorded_and_the_phases_never_exceed_the_wall_time():
    phases = PhaseTimes()
    started = time.perf_counter()
    with phases.phase(COMPILE):
        _busy(0.01)
    for _ in range(3):
        with phases.phase(LAUNCHES):
            _busy(0.002)
    wall = time.perf_counter() - started
    assert set(phases.seconds) == {COMPILE, LAUNCHES}
    assert all(s > 0 for s in phases.seconds.values())
    assert phases.total() <= wall


def test_a_phase_inside_another_is_counted_once():
    phases = PhaseTimes()
    started = time.perf_counter()
    with phases.phase(LAUNCHES):
        _busy(0.005)
        with phases.phase(INPUTS):
            _busy(0.01)
        with phases.phase(LAUNCHES):  # the same name inside itself: still once
            _busy(0.002)
    wall = time.perf_counter() - started
    assert phases.seconds[INPUTS] > 0 and phases.seconds[LAUNCHES] > 0
    assert phases.total() <= wall
    # the outer phase left out what the inner one took: both together are the outer block's time, not more
    assert phases.seconds[LAUNCHES] < wall - phases.seconds[INPUTS] + 1e-6


def test_a_phase_that_raises_is_still_recorded():
    phases = PhaseTimes()
    with pytest.raises(ValueError):
        with phases.phase(COMPILE):
            raise ValueError("a compile error")
    assert COMPILE in phases.seconds
    with phases.phase(GRADEBOOK):  # and the stack is left as it was: the next phase stands alone
        pass
    assert phases.seconds[GRADEBOOK] >= 0


def test_phases_are_listed_in_the_order_a_grading_meets_them():
    phases = PhaseTimes({GRADEBOOK: 1.0, "something else": 0.5, SANDBOX_START: 0.25, COMPILE: 2.0})
    assert list(phases.to_dict()) == [SANDBOX_START, COMPILE, GRADEBOOK, "something else"]
    assert ordered(reversed(ORDER)) == list(ORDER)
    assert summed([{COMPILE: 1.0}, None, {COMPILE: 0.5, GRADEBOOK: 0.25}]) == {COMPILE: 1.5, GRADEBOOK: 0.25}


def test_a_line_of_phases_names_what_no_phase_covers():
    line = phase_line({COMPILE: 1.5, LAUNCHES: 0.001, GRADEBOOK: 0.5}, wall_s=3.0)
    assert line == "compile 1.50 s, gradebook write 0.50 s, other 1.00 s of 3.00 s"  # under 5 ms: left out
    assert phase_line({}) == "no phases recorded"


def test_what_a_child_reports_is_kept_only_where_it_is_a_phase():
    """The child runs beside the student's code: its report of phases is read as numbers, junk dropped."""
    forged = {COMPILE: 1.0, "negative": -1.0, "nan": math.nan, "inf": math.inf, "flag": True, "text": "1.0",
              7: 1.0, "": 1.0, "x" * 65: 1.0, LAUNCHES: 2}
    assert reported_phases(forged) == {COMPILE: 1.0, LAUNCHES: 2.0}
    assert reported_phases(["compile", 1.0]) == {} and reported_phases(None) == {}
    many = {f"phase {i}": 1.0 for i in range(1000)}
    assert len(reported_phases(many)) == 64


@pytest.mark.parametrize("report, kept", [
    ({CHILD_IMPORTS: 0.25, COMPILE: 0.5, LAUNCHES: 1.0}, True),  # the honest twin: it fits the times seen
    ({CHILD_IMPORTS: 0.25, COMPILE: 500.0}, False),  # more than the child lived
    ({CHILD_IMPORTS: 30.0, COMPILE: 0.5}, False),  # imports longer than the sandbox took to start
])
def test_a_child_s_report_that_does_not_fit_the_times_the_grader_saw_is_dropped(report, kept):
    """The grader saw the child ready 1 s after it started it, and gone 3 s after: a report that claims more
    is not the child's own account, and the grading's phases stay within its wall time."""
    watch = SimpleNamespace(final={"phases": report})
    phases = PhaseTimes()
    _add_child_phases(phases, watch, until_ready=1.0, lifetime=3.0)
    if kept:
        assert phases.seconds[COMPILE] == 0.5 and phases.seconds[SANDBOX_START] == pytest.approx(0.75)
    else:
        assert COMPILE not in phases.seconds and phases.seconds[SANDBOX_START] == 1.0
    assert phases.total() <= 3.0
