"""``autograder``: the instructor's workflow around nbgrader.

    autograder release  ASSIGNMENT...|all [--exchange DIR]  solutions/ -> exercises/ (+ exchange)
    autograder collect  ASSIGNMENT [--exchange DIR]   exchange -> submitted/
    autograder grade    ASSIGNMENT [--student ID ...] submitted/ -> autograded/ + gradebook
                        [--cluster [SCHEDULER_ADDRESS]]   as Dask tasks, timed one at a time per GPU (autograder.cluster)
                        [--phases]                        where each grading's time went (autograder.phase_times)
    autograder feedback ASSIGNMENT [--student ID ...] autograded/ -> feedback/ (HTML)
    autograder export   ASSIGNMENT [--csv F] [--gradescope DIR]
    autograder leaderboard ASSIGNMENT [--names]       gradebook -> feedback/leaderboard_<assignment>.html
    autograder similarity ASSIGNMENT [--names]        submitted/ -> feedback/similarity_<assignment>.html
    autograder status   ASSIGNMENT                    one line per student: graded, not gradable, failed to grade
    autograder grade-notebook NOTEBOOK --assignment A [--results-json F]
                                                      one notebook, no gradebook
                                                      (e.g. a Gradescope runner)

Every command takes ``--course-dir`` (default: the current directory, which
holds nbgrader_config.py) and ``--db`` (any database URL nbgrader accepts;
default ``sqlite:///<course-dir>/gradebook.db``).

A wrong input (an unknown assignment or student, a missing course directory,
exchange or gradebook, a notebook that cannot be read) stops a command with
one line on stderr that says what to do (``-v`` adds nbgrader's log and the
traceback); Ctrl-C stops it with one line and exit status 130, leaving nothing
half-written, so that running it again continues.

Grading never executes a submitted notebook: see autograder.nbgrader_autograde.
What a subcommand does beyond its options and its printing is in the modules
it calls: the course's folders (autograder.course), the course secret
(autograder.course_secret), grading a class in this process or on a cluster
(autograder.class_run, autograder.cluster).
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import time
import traceback
from collections import Counter

import nbformat

from . import export, feedback_pages
from .class_run import ClassRun, grade_sequentially
from .cluster import DEFAULT_RETRIES, grade_on_cluster
from .course import (
    course_assignments,
    coursedir,
    load_config,
    require_assignment,
    require_course_dir,
    require_exchange,
    require_submission,
    source_root,
    submission_folder,
    submitted_students,
)
from .course_secret import existing_course_secret, get_course_secret, student_key
from .exchange_guard import guarded_collect_class
from .feedback_html import finish_feedback_pages
from .gradable import notebook_problem
from .grade_cells import instructor_test_cells
from .feedback import CPU_EMULATOR
from .grading_record import GradingRecord, submission_hash
from .leaderboard import write_leaderboard
from .nbgrader_bridge import grade_notebook, not_gradable_grading
from .outcome import FAILED, GRADED, NOT_GRADABLE, exception_reason, outcome_text, total_text
from .safe_writes import uninterrupted, write_text
from .sandbox import SandboxUnavailable, require
from .similarity import SimilarityError, similarity_report

#: The loggers nbgrader and its converters write to.
NBGRADER_LOGGERS = ("traitlets", "nbgrader", "NbGrader", "TrustedAutograde", "Autograde", "GenerateAssignment",
                    "GenerateFeedback")


def _say(msg: str) -> None:
    print(msg, flush=True)


class Interrupted(Exception):
    """Ctrl-C, with the one line that says how far the command got."""


# --------------------------------------------------------------------------
# nbgrader's log and errors
# --------------------------------------------------------------------------


def _quiet_nbgrader(verbose: bool) -> None:
    if not verbose:
        import warnings

        # nbgrader 0.9.6's gradebook code trips SQLAlchemy's autoflush warnings, and the test cells it puts
        # back into a notebook carry no cell id.
        warnings.filterwarnings("ignore", message=".*not in session.*")
        warnings.filterwarnings("ignore", message="Cell is missing an id field")
    level = logging.INFO if verbose else logging.WARNING
    for name in NBGRADER_LOGGERS:
        logging.getLogger(name).setLevel(level)
    if verbose and not any(getattr(h, "dlk_verbose", False) for h in logging.getLogger("traitlets").handlers):
        handler = logging.StreamHandler(sys.stderr)  # -v: nbgrader's own log, tracebacks included
        handler.dlk_verbose = True
        logging.getLogger("traitlets").addHandler(handler)


class _Errors(logging.Handler):
    """The errors nbgrader logs while a converter runs (it raises only "see the above traceback")."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _first_error(messages: list[str]) -> str:
    """The line that says what went wrong: a traceback's last line, else the first message."""
    for text in messages:
        if text.startswith("Traceback"):
            return text.strip().splitlines()[-1]
    return messages[0].strip().splitlines()[0] if messages else ""


def _run_converter(converter, doing: str) -> None:
    from nbgrader.converters.base import NbGraderException

    errors = _Errors()
    converter.log.addHandler(errors)
    try:
        converter.start()
    except NbGraderException as exc:
        why = _first_error(errors.messages) or str(exc)
        raise SystemExit(f"autograder: nbgrader could not {doing}: {why}") from None
    finally:
        converter.log.removeHandler(errors)


def _exchange_error(exc: Exception, root: str) -> SystemExit:
    text = str(exc)
    if text.startswith("Course not found"):
        return SystemExit(f"autograder: the exchange {root} has no folder of this course ({text.split(': ', 1)[-1]}): "
                          f"release an assignment there first (`autograder release ASSIGNMENT --exchange {root}`)")
    return SystemExit(f"autograder: nbgrader's exchange at {root} refused: {text}")


def _exchange_root(config) -> str:
    from nbgrader.exchange.default.exchange import Exchange

    return config.Exchange.root if "root" in config.Exchange else Exchange.root.default_value


# --------------------------------------------------------------------------
# release
# --------------------------------------------------------------------------


def cmd_release(args: argparse.Namespace) -> int:
    from nbgrader.converters import GenerateAssignment
    from nbgrader.exchange import ExchangeError

    config = load_config(args.course_dir, args.db, args.exchange)
    assignments = args.assignment
    if assignments == ["all"]:
        base = source_root(coursedir(config, "*"))
        assignments = [d for d in course_assignments(coursedir(config, "*"))
                       if glob.glob(os.path.join(base, d, "*.ipynb"))]
        if not assignments:
            raise SystemExit(f"autograder: there is no assignment to release: {base} holds no folder of notebooks")
    for assignment in assignments:
        require_assignment(coursedir(config, assignment), assignment, released=False)
    if args.exchange:
        require_exchange(config.Exchange.root, releasing=True)
    for assignment in assignments:
        cd = coursedir(config, assignment)
        gen = GenerateAssignment(coursedir=cd, config=config)
        gen.force = True
        gen.create_assignment = True
        _run_converter(gen, f"generate the student notebooks of {assignment}")
        out = cd.format_path(cd.release_directory, ".", assignment)
        _say(f"generated student notebooks: {os.path.relpath(out, cd.root)}")
        for path in sorted(glob.glob(os.path.join(out, "*.ipynb"))):
            _say(f"  {os.path.relpath(path, cd.root)}")
        if args.exchange:
            from nbgrader.auth import Authenticator
            from nbgrader.exchange.default import ExchangeReleaseAssignment

            rel = ExchangeReleaseAssignment(coursedir=cd, authenticator=Authenticator(config=config), config=config)
            rel.force = True
            try:
                rel.start()
            except ExchangeError as exc:
                raise _exchange_error(exc, config.Exchange.root) from None
            _say(f"released {assignment} to the exchange {args.exchange}")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from nbgrader.auth import Authenticator
    from nbgrader.exchange import ExchangeError

    config = load_config(args.course_dir, args.db, args.exchange)
    cd = coursedir(config, args.assignment)
    require_assignment(cd, args.assignment, released=False)
    root = _exchange_root(config)
    require_exchange(root, releasing=False)
    collect = guarded_collect_class()(coursedir=cd, authenticator=Authenticator(config=config), config=config)
    collect.update = True
    try:
        collect.start()
    except ExchangeError as exc:
        raise _exchange_error(exc, root) from None
    for name, reason in getattr(collect, "refused", []):
        _say(f"refused the submission {name}: {reason}; it was not collected")
    students = submitted_students(cd, args.assignment)
    _say(f"collected {args.assignment}: {len(students)} submission(s) under {cd.submitted_directory}/")
    return 0


# --------------------------------------------------------------------------
# grade
# --------------------------------------------------------------------------


def _course_secret_of(args: argparse.Namespace) -> str:
    """The course secret (--secret-file, else $DLK_GRADER_SECRET, else the course's own, made once), so regrades agree."""
    try:
        course_secret, where = get_course_secret(args.course_dir, args.secret_file)
    except OSError as exc:
        raise SystemExit(f"autograder: the course secret could not be read ({exception_reason(exc)}): pass "
                         f"--secret-file with the file that holds it") from None
    if not args.secret_file:
        _say(f"hidden cases drawn from the course secret in {where}")
    return course_secret


def _require_sandbox() -> None:
    try:
        require()
    except SandboxUnavailable as exc:
        raise SystemExit(f"autograder: {exc}") from None


def cmd_grade(args: argparse.Namespace) -> int:
    _require_sandbox()
    if args.timeout is not None and args.timeout <= 0:
        raise SystemExit(f"autograder: --timeout {args.timeout:g}: the time limit must be more than 0 seconds")
    _check_cluster_options(args)
    config = load_config(args.course_dir, args.db)
    require_assignment(coursedir(config, args.assignment), args.assignment)
    for student in args.student or []:
        require_submission(coursedir(config, args.assignment), args.assignment, student)
    course_secret = _course_secret_of(args)
    _quiet_nbgrader(args.verbose)
    run = ClassRun(config, args.assignment, course_secret, args.timeout)
    run.show_phases = args.phases
    students = args.student or submitted_students(run.coursedir(), args.assignment)
    if not students:
        cd = run.coursedir()
        raise SystemExit(f"autograder: no submissions of {args.assignment} under "
                         f"{os.path.join(cd.root, cd.submitted_directory)}: collect them first "
                         f"(`autograder collect {args.assignment}`)")
    try:
        if args.cluster is not None:
            return _grade_on_cluster(args, run, students)
        return _grade_sequentially(run, students)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: {run.graded_count()} of {len(students)} graded, rerun to continue") from None


def _check_cluster_options(args: argparse.Namespace) -> None:
    """Options of the cluster path: valid values, and only with --cluster."""
    if args.cluster is None:
        for flag, value in (("--workers", args.workers), ("--per-gpu", args.per_gpu),
                            ("--task-timeout", args.task_timeout)):
            if value is not None:
                raise SystemExit(f"autograder: {flag} is an option of --cluster (grading as Dask tasks)")
        return
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"autograder: --workers {args.workers}: a local cluster needs at least 1 worker")
    if args.workers is not None and args.cluster:
        raise SystemExit("autograder: --workers sizes the local cluster; a cluster at an address has the "
                         "workers started there (dask worker ADDRESS --resources GPU=1)")
    if args.per_gpu is not None and args.per_gpu < 1:
        raise SystemExit(f"autograder: --per-gpu {args.per_gpu}: each GPU needs at least 1 grading at a time")
    if args.per_gpu is not None and args.cluster:
        raise SystemExit("autograder: --per-gpu sizes the local cluster; on a cluster at an address, start that "
                         "many workers per card (dask worker ADDRESS --nworkers N --resources GPU=1)")
    if args.retries < 0:
        raise SystemExit(f"autograder: --retries {args.retries}: the number of retries cannot be negative")
    if args.task_timeout is not None and args.task_timeout <= 0:
        raise SystemExit(f"autograder: --task-timeout {args.task_timeout:g}: the time limit must be more than 0 seconds")


def _outcome_counts(run: ClassRun, students: list[str]) -> str:
    """", 1 not gradable, 1 failed to grade (...)" for the students of this run whose grading was not a plain grade."""
    kinds = Counter(run.record.students[s].status for s in students if s in run.record.students)
    parts = []
    if kinds[NOT_GRADABLE]:
        parts.append(f"{kinds[NOT_GRADABLE]} not gradable (scored 0, with the reason)")
    if kinds[FAILED]:
        parts.append(f"{kinds[FAILED]} failed to grade (no score written; the next `autograder grade "
                     f"{run.assignment}` grades them again; `autograder status {run.assignment}` lists them)")
    return "; " + "; ".join(parts) if parts else ""


def _grade_sequentially(run: ClassRun, students: list[str]) -> int:
    """Every student in this process, one after another (the grading record is kept as on a cluster)."""
    _say(f"grading {run.assignment}: {len(students)} submission(s), backend "
         f"{os.environ.get('DLK_BACKEND', 'auto')}")
    started = time.perf_counter()
    failures = grade_sequentially(run, students, _say)
    graded = sum(1 for s in students if run.record.students[s].status == GRADED)
    _say(f"graded {graded} of {len(students)} in {time.perf_counter() - started:.1f} s"
         f"{_outcome_counts(run, students)}")
    _warn_mixed_gpus(run)
    return 1 if failures else 0


def _grade_on_cluster(args: argparse.Namespace, run: ClassRun, students: list[str]) -> int:
    """Every student missing or changed, as Dask tasks; results written here as they arrive."""
    done = grade_on_cluster(run, students, address=args.cluster, workers=args.workers, retries=args.retries,
                            task_timeout=args.task_timeout, regrade=args.regrade, progress=not args.no_progress,
                            say=_say, per_gpu=args.per_gpu)
    record = run.record
    _final_table(record, students, done.graded_now)
    graded = sum(1 for s in done.graded_now if s in record.students and record.students[s].status == GRADED)
    n_failed = sum(1 for s in students if record.students.get(s) is None or record.students[s].status == FAILED)
    rate = f", {60 * done.prepared / done.seconds:.1f} gradings per minute" if done.prepared and done.seconds > 0 else ""
    _say(f"graded {graded} of {len(done.graded_now)} in {done.seconds:.1f} s{rate}; {len(done.up_to_date)} up to date"
         + (" (--regrade grades them again)" if done.up_to_date else "") + _outcome_counts(run, done.graded_now))
    _warn_mixed_gpus(run)
    return 1 if n_failed else 0


def _final_table(record, students: list[str], graded_now: list[str]) -> None:
    """One line per student: graded now, up to date, not gradable or failed, with the reason."""
    rows = []
    for student in students:
        entry = record.students.get(student)
        if entry is None:
            rows.append((student, "not graded", "", "", "", "the run stopped before it"))
            continue
        status = outcome_text(entry.outcome).split(":")[0]
        if student not in graded_now and entry.status == GRADED:
            status = "up to date"
        score = total_text(entry.score, entry.max_score, entry.pending_points) if entry.outcome.scored else "-"
        gpus = sorted({d for b, d in zip(entry.backends, entry.devices) if b == "gpu" and d})
        device = ", ".join(gpus) or (CPU_EMULATOR if entry.backends else "-")
        rows.append((student, status, score, device, f"{entry.seconds:.1f}" if entry.seconds else "", entry.reason))
    header = ("student", "outcome", "points", "graded on", "s", "reason")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(5)]
    _say("")
    _say("  ".join(h.ljust(w) for h, w in zip(header[:5], widths)) + "  " + header[5])
    for r in rows:
        _say("  ".join(str(c).ljust(w) for c, w in zip(r[:5], widths)) + ("  " + r[5] if r[5] else ""))
    _say("")


def _warn_mixed_gpus(run: ClassRun) -> None:
    warning = run.mixed_gpu_warning()
    if warning:
        _say(warning)


# --------------------------------------------------------------------------
# status
# --------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    """One line per student: the outcome of their last grading, or that they are not graded yet."""
    config = load_config(args.course_dir, args.db)
    cd = coursedir(config, args.assignment)
    require_assignment(cd, args.assignment)
    rows = {row["student"]: row for row in export.collect(cd, args.assignment)}
    record = GradingRecord(cd.root, args.assignment)
    submitted = submitted_students(cd, args.assignment)
    students = sorted(set(rows) | set(submitted))
    if not students:
        _say(f"{args.assignment}: no submissions yet (collect them with `autograder collect {args.assignment}`)")
        return 0
    width = max(len(s) for s in students)
    kinds = Counter()
    for student in students:
        row = rows.get(student)
        if row is None:
            kinds["not graded yet"] += 1
            _say(f"{student.ljust(width)}  not graded yet")
            continue
        kinds[outcome_text(row["outcome"]).split(":")[0]] += 1
        line = f"{student.ljust(width)}  {export.row_total(row)}"
        entry = record.students.get(student)
        if (student in submitted and entry is not None
                and entry.submission != submission_hash(submission_folder(cd, args.assignment, student))):
            line += " (submitted again since: the next `autograder grade` grades the new submission)"
        _say(line)
    _say(f"{args.assignment}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items()))
    return 0




# --------------------------------------------------------------------------
# feedback
# --------------------------------------------------------------------------


def cmd_feedback(args: argparse.Namespace) -> int:
    from nbgrader.converters import GenerateFeedback

    config = load_config(args.course_dir, args.db)
    cd = coursedir(config, args.assignment)
    require_assignment(cd, args.assignment)
    feedback_pages.configure(config)
    _quiet_nbgrader(args.verbose)
    graded = _graded_students(cd, args.assignment)
    for student in args.student or []:
        if student not in graded:
            raise SystemExit(f"autograder: {student} has no graded {args.assignment} (no folder "
                             f"{cd.format_path(cd.autograded_directory, student, args.assignment)}): grade it first "
                             f"(`autograder grade {args.assignment} --student {student}`)")
    students = args.student or graded
    if not students:
        raise SystemExit(f"autograder: no student of {args.assignment} is graded yet: run "
                         f"`autograder grade {args.assignment}` first")

    def convert(student_cd) -> None:
        conv = GenerateFeedback(coursedir=student_cd, config=config)
        conv.force = True
        _run_converter(conv, f"write the feedback of {student_cd.student_id}")

    try:
        pages = feedback_pages.write_feedback(config, args.assignment, students, convert)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: feedback written for some of {len(students)} students (each one's pages "
                          f"whole), rerun to continue") from None
    with uninterrupted():
        finish_feedback_pages(cd.format_path(cd.feedback_directory, "*", args.assignment))
    for path in pages:
        _say(f"  {os.path.relpath(path, cd.root)}")
    _write_leaderboard(args, cd)
    return 0


def _graded_students(cd, assignment: str) -> list[str]:
    """Students with a graded folder of ``assignment``, or whose last grading of it failed."""
    graded = {os.path.basename(os.path.dirname(path))
              for path in glob.glob(cd.format_path(cd.autograded_directory, "*", assignment))}
    record = GradingRecord(cd.root, assignment)
    return sorted(graded | {s for s, e in record.students.items() if e.status == FAILED})


def _write_leaderboard(args: argparse.Namespace, cd, path: str | None = None, top: int = 10) -> str | None:
    named = bool(getattr(args, "leaderboard_names", False))
    course_secret = None if named else existing_course_secret(args.course_dir, getattr(args, "secret_file", None))
    if not named and course_secret is None:
        _say("no leaderboard: its aliases derive from the course secret, and this course has none yet "
             "(grade first, or pass --leaderboard-names)")
        return None
    out = write_leaderboard(cd, args.assignment, export.collect(cd, args.assignment), course_secret, named=named,
                            top=top, path=path)
    _say(f"leaderboard ({'names' if named else 'course aliases'}): {os.path.relpath(out, cd.root)}")
    return out


def cmd_leaderboard(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise SystemExit(f"autograder: --top {args.top}: show at least 1 kernel per exercise")
    config = load_config(args.course_dir, args.db)
    cd = coursedir(config, args.assignment)
    require_assignment(cd, args.assignment)
    return 0 if _write_leaderboard(args, cd, path=args.out, top=args.top) else 1


def cmd_similarity(args: argparse.Namespace) -> int:
    course_secret = None if args.names else existing_course_secret(args.course_dir, getattr(args, "secret_file", None))
    try:
        out, matches = similarity_report(args.course_dir, args.assignment, course_secret, named=args.names,
                                         path=args.out)
    except SimilarityError as exc:
        raise SystemExit(f"autograder: {exc}") from None
    _say(f"similarity of {args.assignment}: {len(matches)} pairs with kernels in common; report {out}")
    return 0


# --------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    config = load_config(args.course_dir, args.db)
    cd = coursedir(config, args.assignment)
    require_assignment(cd, args.assignment)
    rows = export.collect(cd, args.assignment)
    if not (args.csv or args.gradescope):
        args.csv = f"{args.assignment}_grades.csv"
    failed = [row["student"] for row in rows if row["outcome"].kind == FAILED]
    if args.csv:
        export.write_csv(rows, args.csv)
        _say(f"wrote {args.csv} ({len(rows)} students)")
    if args.gradescope:
        paths = export.write_gradescope(rows, args.gradescope)
        _say(f"wrote {len(paths)} Gradescope results.json under {args.gradescope}")
    if failed:
        _say(f"{len(failed)} student(s) failed to grade ({', '.join(failed)}): exported with no score and the reason; "
             f"`autograder grade {args.assignment}` grades them again")
    return 0


# --------------------------------------------------------------------------
# grade-notebook (no gradebook)
# --------------------------------------------------------------------------


def _instructor_notebook(cd, args: argparse.Namespace) -> str:
    """The instructor notebook of the upload: --source, else the assignment's notebook of the same name (or its
    only one)."""
    if args.source:
        if not os.path.isfile(args.source):
            raise SystemExit(f"autograder: there is no instructor notebook at {args.source}: pass --source with "
                             f"the assignment's notebook under solutions/")
        return args.source
    require_assignment(cd, args.assignment, released=False)
    folder = cd.format_path(cd.source_directory, ".", args.assignment)
    source_nb = os.path.join(folder, os.path.basename(args.notebook))
    candidates = sorted(glob.glob(os.path.join(folder, "*.ipynb")))
    if not os.path.exists(source_nb) and len(candidates) == 1:
        source_nb = candidates[0]  # the assignment's only notebook, whatever the upload is called
    if not os.path.exists(source_nb):
        raise SystemExit(f"autograder: {args.assignment} has no notebook called {os.path.basename(args.notebook)} "
                         f"(its notebooks: {', '.join(os.path.basename(c) for c in candidates)}): name the upload "
                         f"after one, or pass --source")
    return source_nb


def cmd_grade_notebook(args: argparse.Namespace) -> int:
    config = load_config(args.course_dir)
    cd = coursedir(config, args.assignment)
    if not os.path.isfile(args.notebook):
        raise SystemExit(f"autograder: there is no notebook at {args.notebook}")
    cells = instructor_test_cells(nbformat.read(_instructor_notebook(cd, args), as_version=4))
    exercises = list(dict.fromkeys(c.exercise for c in cells))
    notebook = os.path.splitext(os.path.basename(args.notebook))[0]
    problem = notebook_problem(args.notebook, args.assignment, source_root(cd))
    if problem:
        grading = not_gradable_grading(args.student, notebook, exercises, problem)
    else:
        _require_sandbox()
        course_secret = _course_secret_of(args)
        grading = grade_notebook(nbformat.read(args.notebook, as_version=4), exercises, student=args.student,
                                 notebook=notebook, student_key=student_key(course_secret, args.assignment, args.student),
                                 timeout_s=args.timeout, log=_say)
    data = export.gradescope_from_grading(grading, cells)
    if args.results_json:
        write_text(args.results_json, json.dumps(data, indent=1) + "\n")
    if problem:
        raise SystemExit(f"autograder: not gradable: {problem} (scored 0"
                         + (f"; {args.results_json} says so)" if args.results_json else ")"))
    total = total_text(data["score"], sum(c.points for c in cells), data["extra_data"]["pending_points"])
    _say(f"{args.student}: {total}; grading took {grading.total_seconds:.1f} s")
    if args.results_json:
        _say(f"wrote {args.results_json}")
    return 0


# --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autograder", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    commands = []

    def command(name: str, func, help: str) -> argparse.ArgumentParser:
        """A subcommand running ``func``; the options every command takes are added after its own."""
        sp = sub.add_parser(name, help=help)
        sp.set_defaults(func=func)
        commands.append(sp)
        return sp

    sp = command("release", cmd_release, help="generate the student notebooks (nbgrader generate_assignment)")
    sp.add_argument("assignment", nargs="+", help="assignment folder(s) under solutions/, or 'all'")
    sp.add_argument("--exchange", help="also release to this nbgrader exchange directory")

    sp = command("collect", cmd_collect, help="collect submissions from an nbgrader exchange into submitted/")
    sp.add_argument("assignment")
    sp.add_argument("--exchange", help="the nbgrader exchange directory (default: nbgrader's)")

    sp = command("grade", cmd_grade, help="autograde submissions into the gradebook, never executing them")
    sp.add_argument("assignment")
    sp.add_argument("--student", action="append", help="grade only this student (repeatable)")
    sp.add_argument("--secret-file", help="file holding the course secret the hidden seeds derive from "
                    "(default: $DLK_GRADER_SECRET, else the course's secret in <course>/course_secret, "
                    "created on first use and reused by every grading)")
    sp.add_argument("--timeout", type=float, default=None, help="time limit per exercise, seconds")
    sp.add_argument("--cluster", nargs="?", const="", default=None, metavar="SCHEDULER_ADDRESS",
                    help="grade as Dask tasks: on the cluster whose scheduler is at this address "
                    "(e.g. tcp://head:8786), or without one on a local cluster of one worker per visible GPU "
                    "(emulator workers when there is none); grades only what is missing or changed")
    sp.add_argument("--workers", type=int, default=None,
                    help="with --cluster and no address: the local cluster's GPUs (emulator workers without one)")
    sp.add_argument("--per-gpu", type=int, default=None, metavar="N",
                    help="with --cluster and no address: gradings sharing each GPU at once, one worker each "
                    "(default: two cores per grading, at most 8); kernels are still checked and timed one "
                    "grading at a time per card")
    sp.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                    help="with --cluster: attempts after the first for a grading whose worker died or timed out "
                    "(default %(default)s); then it is recorded as failed, with the reason")
    sp.add_argument("--task-timeout", type=float, default=None,
                    help="with --cluster: seconds one student's grading may run on a worker "
                    "(default: twice the exercises' limits, plus a minute)")
    sp.add_argument("--regrade", action="store_true", help="with --cluster: grade every submission again, "
                    "even those graded before (with or without --cluster) and unchanged since")
    sp.add_argument("--no-progress", action="store_true", help="with --cluster: no progress bar")
    sp.add_argument("--phases", action="store_true",
                    help="say where each student's grading time went: sandbox start, compile, input generation, "
                    "launches, verdict, gradebook write ... (also kept in grading_record/<assignment>.json)")

    sp = command("feedback", cmd_feedback, help="generate HTML feedback (nbgrader generate_feedback) and the leaderboard")
    sp.add_argument("assignment")
    sp.add_argument("--student", action="append")
    sp.add_argument("--leaderboard-names", action="store_true",
                    help="show students' names on the leaderboard (default: their course alias)")
    sp.add_argument("--secret-file", help="the course secret the leaderboard aliases derive from "
                    "(default: $DLK_GRADER_SECRET, else <course>/course_secret)")

    sp = command("leaderboard", cmd_leaderboard, help="the class leaderboard: per exercise, the fastest correct kernels (HTML)")
    sp.add_argument("assignment")
    sp.add_argument("--leaderboard-names", "--names", action="store_true", dest="leaderboard_names",
                    help="show students' names (default: their course alias)")
    sp.add_argument("--top", type=int, default=10, help="kernels shown per exercise (default %(default)s)")
    sp.add_argument("--out", help="the HTML file (default feedback/leaderboard_<assignment>.html)")
    sp.add_argument("--secret-file", help="the course secret the aliases derive from")

    sp = command("similarity", cmd_similarity, help="which submissions' kernels look alike (HTML report; no score changes)")
    sp.add_argument("assignment")
    sp.add_argument("--names", action="store_true", help="show students' names (default: their course alias)")
    sp.add_argument("--out", help="the HTML file (default feedback/similarity_<assignment>.html)")
    sp.add_argument("--secret-file", help="the course secret the aliases derive from")

    sp = command("export", cmd_export, help="export grades: CSV and/or Gradescope results.json")
    sp.add_argument("assignment")
    sp.add_argument("--csv", help="CSV file to write")
    sp.add_argument("--gradescope", help="directory for <student>/results.json")

    sp = command("status", cmd_status, help="one line per student: graded, not gradable or failed to grade, "
                 "with the reason")
    sp.add_argument("assignment")

    sp = command("grade-notebook", cmd_grade_notebook, help="grade one notebook file without a gradebook")
    sp.add_argument("notebook")
    sp.add_argument("--assignment", required=True)
    sp.add_argument("--source", help="instructor notebook (default solutions/<assignment>/<same name>)")
    sp.add_argument("--student", default="student")
    sp.add_argument("--results-json", help="write Gradescope's results.json here")
    sp.add_argument("--secret-file")
    sp.add_argument("--timeout", type=float, default=None)

    for sp in commands:  # the options every command takes
        sp.add_argument("--course-dir", default=".", help="course root (holds nbgrader_config.py)")
        sp.add_argument("--db", default=None, help="gradebook database URL (default sqlite:///<course-dir>/gradebook.db)")
        sp.add_argument("-v", "--verbose", action="store_true", help="show nbgrader's log")
    return p


def _alembic_head_in_process() -> str:
    """What nbgrader's ``get_alembic_version`` returns, without running the ``alembic`` command."""
    import nbgrader.api
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", os.path.join(os.path.dirname(nbgrader.api.__file__), "alembic"))
    return ScriptDirectory.from_config(cfg).get_current_head()


def _ensure_tools_on_path() -> None:
    """nbgrader runs the ``alembic`` command when it opens a gradebook; it may not be on PATH
    (a ``pip install --target`` on the GPU machine installs no commands there), so the
    same question is answered in this process."""
    import nbgrader.api

    nbgrader.api.get_alembic_version = _alembic_head_in_process


def main(argv: list[str] | None = None) -> int:
    """Run one command; a wrong input or an interrupt ends it with one line on stderr (``-v``: and the traceback)."""
    args = build_parser().parse_args(argv)
    _ensure_tools_on_path()
    _quiet_nbgrader(args.verbose)
    root = os.path.abspath(args.course_dir)
    if root not in sys.path and os.path.isdir(os.path.join(root, "autograder")):
        sys.path.insert(0, root)
    try:
        require_course_dir(args.course_dir)
        return int(args.func(args) or 0)
    except Interrupted as exc:
        _error(str(exc), args)
        return 130
    except KeyboardInterrupt:
        _error(f"interrupted: nothing is left half-written; rerun `autograder {args.command}` to continue", args)
        return 130
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        _error(exc.code, args)
        return 1
    except Exception as exc:  # a failure of the grader's own: one line, the traceback with -v
        _error(f"autograder {args.command} stopped: {exception_reason(exc)} (run it again with -v for the traceback)",
               args)
        return 1


def _error(message: str, args: argparse.Namespace) -> None:
    """One line on stderr; with -v, the traceback of what is being handled before it."""
    if args.verbose and sys.exc_info()[0] is not None:
        traceback.print_exc(file=sys.stderr)
    line = " ".join(message.split())
    print(line if line.startswith(("autograder", "interrupted")) else f"autograder: {line}", file=sys.stderr,
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
