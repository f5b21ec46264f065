"""The book's autograder: CUDA kernels from ``%%cuda`` notebook cells, checked and timed in isolation.

* :mod:`autograder.submission` -- read ``%%cuda`` cells from a notebook without running it;
* :mod:`autograder.exercise`, :mod:`autograder.exercises` -- how exercises are declared, and every one declared;
* :mod:`autograder.isolation` -- :func:`grade_submission`, in a fresh child process;
* :mod:`autograder.grading_child`, :mod:`autograder.checker`, :mod:`autograder.timing_policy` -- what that child
  does;
* :mod:`autograder.verdict`, :mod:`autograder.scoring` -- the grader's own verdict on what came back, and its points;
* :mod:`autograder.result` -- :class:`ExerciseResult`, the JSON that comes back;
* :mod:`autograder.student` -- the ``%%cuda`` magic and ``check()`` for notebooks;
* :mod:`autograder.nbgrader_autograde` -- nbgrader's Autograde, never executing a notebook: its preprocessors
  (:mod:`autograder.nbgrader_preprocessors`), the test cells (:mod:`autograder.grade_cells`) and one notebook's
  grading (:mod:`autograder.nbgrader_bridge`);
* :mod:`autograder.outcome` -- how a student's grading ended: graded, not gradable (0, with the reason) or
  failed to grade (no score, graded again); :mod:`autograder.gradable` says which notebooks cannot be graded;
* :mod:`autograder.cli` -- the ``autograder`` command, over :mod:`autograder.course` (the course's folders),
  :mod:`autograder.course_secret`, :mod:`autograder.class_run` and :mod:`autograder.cluster` (a class graded
  in this process or as Dask tasks).

Points, in short (:mod:`autograder.scoring`):

* correctness: per shape, all of whose seeds must pass; proportional to the
  shapes that pass.  A kernel that does not compile, crashes, hangs, or whose
  launch integers are refused scores no correctness points at all;
* speed (GPU only): in bands of the speed-up over the exercise's reference
  kernel, only for a kernel that passed every case; a time below the physical
  floor fails the exercise.  Graded without a GPU (on the CPU emulator), speed
  is not measured and its points are not awarded: ``speed_measured`` is
  False, ``speed_pending`` True and ``speed_note`` says so; a grading run on
  a GPU awards them.
"""

from .exercise import Exercise
from .exercises import all_exercises, get_exercise
from .isolation import grade_submission
from .result import ExerciseResult, ShapeResult
from .submission import KernelSubmission, submissions_from_notebook

__all__ = [
    "Exercise", "ExerciseResult", "KernelSubmission", "ShapeResult",
    "all_exercises", "get_exercise", "grade_submission", "submissions_from_notebook",
]
