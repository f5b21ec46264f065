"""nbgrader configuration of the course (this repository is the course directory).

Instructor notebooks live in ``solutions/<assignment>/``; ``autograder release``
(nbgrader's generate_assignment) writes the student versions to
``exercises/<assignment>/``. Submissions are collected to ``submitted/``, graded
into ``autograded/`` and fed back in ``feedback/``, nbgrader's defaults; those
and ``gradebook.db`` are run-time data, not part of the repository.

Grading never executes a submitted notebook: use ``autograder grade``. Should
plain ``nbgrader autograde`` be run with this file, the grading pass is the
same trusted one (Execute replaced by autograder.nbgrader_preprocessors.TrustedGrade).
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.course_id = "deep-learning-kernels"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"

# Solution regions sit inside %%cuda cells (CUDA C), so the stub that replaces
# them is a C comment: the stub kernel still compiles, does nothing, and the
# checks say what is wrong. Every cell names what goes there in a comment kept
# just above its "// BEGIN SOLUTION" line.
c.ClearSolutions.code_stub = {"python": "// YOUR CODE HERE"}
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"

# The grading pass: nbgrader's list with Execute replaced by the trusted,
# non-executing grader (autograder grade enforces this list whatever is set here).
c.Autograde.autograde_preprocessors = [
    "autograder.nbgrader_preprocessors.TrustedGrade",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
