"""How one student's grading ended: graded, not gradable, or failed to grade.

* *graded*: every notebook was graded; the gradebook holds the score.
* *not gradable*: the submission itself cannot be graded (a notebook that is
  not JSON, cut off, or another assignment's): the student's doing.  It scores
  0, and the reason, one sentence, goes everywhere the 0 is shown.
* *failed to grade*: the grader could not grade it (its own error, the
  machine, a worker lost, a grading past its time limit): ours.  No score is
  written, every export says "failed to grade: <reason>", and the next
  ``autograder grade`` tries again.

Every command and export names an outcome through :func:`outcome_text`, so
that the console, the CSV, Gradescope, the leaderboard and the feedback say
the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

GRADED = "graded"
NOT_GRADABLE = "not gradable"
FAILED = "failed"  # the grading record's word; read as "failed to grade"

_WORDS = {GRADED: "graded", NOT_GRADABLE: "not gradable", FAILED: "failed to grade"}


@dataclass(frozen=True)
class Outcome:
    kind: str  # GRADED, NOT_GRADABLE or FAILED
    reason: str = ""  # one sentence ("" when graded)

    @property
    def scored(self) -> bool:
        """Whether the gradebook holds a score of this grading (graded, or 0 when not gradable)."""
        return self.kind != FAILED


def outcome_text(outcome: Outcome) -> str:
    """"graded", "not gradable: <reason>" or "failed to grade: <reason>"."""
    word = _WORDS.get(outcome.kind, outcome.kind)
    return f"{word}: {outcome.reason}" if outcome.reason and outcome.kind != GRADED else word


class GradingFailed(Exception):
    """The grader could not grade a submission (its own error, not the submission's): nothing is recorded
    as a score, and the next ``autograder grade`` grades it again.  The message is the reason, one sentence."""


class NotGradable(Exception):
    """A submission that cannot be graded because of what was submitted: it scores 0 with this reason."""


def exception_reason(exc: BaseException) -> str:
    """An exception as the one-line reason of a failed grading ("KeyError: 'x'", or the message alone for ours)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, (GradingFailed, NotGradable)):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def total_text(score: float, max_score: float, pending: float = 0.0) -> str:
    """A total as every command says it: "20 / 20 points", or "14 of 14 measured points, 6 pending"."""
    if pending:
        return f"{score:g} of {max_score - pending:g} measured points, {pending:g} pending"
    return f"{score:g} / {max_score:g} points"


def outcome_summary(outcome: Outcome, score: float | None, max_score: float | None, pending: float = 0.0) -> str:
    """One student's outcome and points: "14 of 14 measured points, 6 pending", "not gradable: <reason>;
    0 / 20 points", "failed to grade: <reason>; no score written, the next grading tries again"."""
    if outcome.kind == FAILED:
        return f"{outcome_text(outcome)}; no score written, the next `autograder grade` grades it again"
    total = total_text(score or 0.0, max_score or 0.0, pending)
    return f"{outcome_text(outcome)}; {total}" if outcome.kind == NOT_GRADABLE else total
