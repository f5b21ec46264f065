"""Failures that are the grader's, not the student's: the grading ends without a score and is tried again.

A grading has three ends (:mod:`autograder.outcome`): graded (a score), not
gradable (the submission's fault, with the reason) and failed (ours).  This
module names the grader's own failures within the third one, a
:class:`~autograder.outcome.GradingFailed` that is tried again in the same run
before it is recorded: :class:`InfrastructureError` is raised, never turned
into a result, wherever the grader cannot do its own part -- its disk is full,
its scratch space cannot be written although the submission did not fill it,
its sandbox or cgroup cannot be made, the grading child reports a failure of
the grader's own code.  It travels up through
:func:`autograder.nbgrader_bridge.grade_notebook` (which lets it pass, and
makes one of any other exception of the grader's) to
whatever grades the class, which records the student's grading as failed with
:attr:`InfrastructureError.reason` and grades it again on the next run
(:mod:`autograder.class_run`, :mod:`autograder.cluster`): no score is written
for that grading, and no other student's grading is affected.
"""

from __future__ import annotations

import errno

from .outcome import GradingFailed

#: errno values of a write that failed for want of room or of a working disk: the machine's, never the student's.
FULL_OR_BROKEN_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ENOMEM})


class InfrastructureError(GradingFailed):
    """The grader could not grade: its own failure, with the reason (for the instructor); no score."""

    #: Tells a reader of a grading's outcome, without importing this class, that the failure is ours.
    grader_side = True

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def is_disk_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed because a disk (or memory behind a tmpfs) is full or broken."""
    return isinstance(exc, OSError) and exc.errno in FULL_OR_BROKEN_DISK


def disk_failure(exc: OSError, what: str) -> InfrastructureError:
    """The infrastructure error of a failed write: what was being written and the system's reason."""
    return InfrastructureError(f"the grader could not write {what}: {exc.strerror or exc} "
                               f"({errno.errorcode.get(exc.errno, exc.errno)}); the grading was not scored and is "
                               f"graded again on the next run")
