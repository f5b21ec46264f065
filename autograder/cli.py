"""``autograder``: the instructor's workflow around nbgrader.

    autograder release  ASSIGNMENT...|all [--exchange DIR]  solutions/ -> exercises/ (+ exchange)
    autograder collect  ASSIGNMENT [--exchange DIR]   exchange -> submitted/
    autograder grade    ASSIGNMENT [--student ID ...] submitted/ -> autograded/ + gradebook
                        [--cluster [SCHEDULER_ADDRESS]]   as Dask tasks, one per GPU (autograder.cluster)
    autograder feedback ASSIGNMENT [--student ID ...] autograded/ -> feedback/ (HTML)
    autograder export   ASSIGNMENT [--csv F] [--gradescope DIR]
    autograder leaderboard ASSIGNMENT [--names]       gradebook -> feedback/leaderboard_<assignment>.html
    autograder similarity ASSIGNMENT [--names]        submitted/ -> feedback/similarity_<assignment>.html
    autograder grade-notebook NOTEBOOK --assignment A [--results-json F]
                                                      one notebook, no gradebook
                                                      (e.g. a Gradescope runner)

Every command takes ``--course-dir`` (default: the current directory, which
holds nbgrader_config.py) and ``--db`` (any database URL nbgrader accepts;
default ``sqlite:///<course-dir>/gradebook.db``).

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

import nbformat

from . import export
from .class_run import ClassRun, grade_sequentially
from .cluster import DEFAULT_RETRIES, grade_on_cluster
from .course import coursedir, load_config, submitted_students
from .course_secret import existing_course_secret, get_course_secret, student_key
from .exchange_guard import guarded_collect_class
from .feedback_html import finish_feedback_pages
from .grade_cells import instructor_test_cells
from .leaderboard import write_leaderboard
from .nbgrader_bridge import grade_notebook
from .sandbox import SandboxUnavailable, require
from .similarity import SimilarityError, similarity_report


def _say(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------
# nbgrader's log and errors
# --------------------------------------------------------------------------


def _quiet_nbgrader(verbose: bool) -> None:
    if not verbose:
        import warnings

        # nbgrader 0.9.6's gradebook code trips SQLAlchemy's autoflush warnings.
        warnings.filterwarnings("ignore", message=".*not in session.*")
    level = logging.INFO if verbose else logging.WARNING
    for name in ("traitlets", "nbgrader", "NbGrader", "TrustedAutograde", "Autograde",
                 "GenerateAssignment", "GenerateFeedback"):
        logging.getLogger(name).setLevel(level)


def _run_converter(converter) -> None:
    from nbgrader.converters.base import NbGraderException

    try:
        converter.start()
    except NbGraderException as exc:
        raise SystemExit(f"error: {exc}") from None


# --------------------------------------------------------------------------
# release
# --------------------------------------------------------------------------


def cmd_release(args: argparse.Namespace) -> int:
    from nbgrader.converters import GenerateAssignment

    config = load_config(args.course_dir, args.db, args.exchange)
    assignments = args.assignment
    if assignments == ["all"]:
        base = coursedir(config, "*").format_path(coursedir(config, "*").source_directory, ".", "")
        assignments = sorted(d for d in os.listdir(base)
                             if glob.glob(os.path.join(base, d, "*.ipynb")))
    for assignment in assignments:
        cd = coursedir(config, assignment)
        gen = GenerateAssignment(coursedir=cd, config=config)
        gen.force = True
        gen.create_assignment = True
        _run_converter(gen)
        out = cd.format_path(cd.release_directory, ".", assignment)
        _say(f"generated student notebooks: {os.path.relpath(out, cd.root)}")
        for path in sorted(glob.glob(os.path.join(out, "*.ipynb"))):
            _say(f"  {os.path.relpath(path, cd.root)}")
        if args.exchange:
            from nbgrader.auth import Authenticator
            from nbgrader.exchange.default import ExchangeReleaseAssignment

            rel = ExchangeReleaseAssignment(coursedir=cd, authenticator=Authenticator(config=config), config=config)
            rel.force = True
            rel.start()
            _say(f"released {assignment} to the exchange {args.exchange}")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from nbgrader.auth import Authenticator

    config = load_config(args.course_dir, args.db, args.exchange)
    cd = coursedir(config, args.assignment)
    collect = guarded_collect_class()(coursedir=cd, authenticator=Authenticator(config=config), config=config)
    collect.update = True
    collect.start()
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
    course_secret, where = get_course_secret(args.course_dir, args.secret_file)
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
    config = load_config(args.course_dir, args.db)
    course_secret = _course_secret_of(args)
    if args.timeout is not None and args.timeout <= 0:
        raise SystemExit(f"autograder: --timeout {args.timeout:g}: the time limit must be more than 0 seconds")
    _check_cluster_options(args)
    _quiet_nbgrader(args.verbose)
    run = ClassRun(config, args.assignment, course_secret, args.timeout)
    students = args.student or submitted_students(run.coursedir(), args.assignment)
    if not students:
        cd = run.coursedir()
        _say(f"no submissions of {args.assignment} under {os.path.join(cd.root, cd.submitted_directory)}")
        return 1
    if args.cluster is not None:
        return _grade_on_cluster(args, run, students)
    return _grade_sequentially(run, students)


def _check_cluster_options(args: argparse.Namespace) -> None:
    """Options of the cluster path: valid values, and only with --cluster."""
    if args.cluster is None:
        for flag, value in (("--workers", args.workers), ("--task-timeout", args.task_timeout)):
            if value is not None:
                raise SystemExit(f"autograder: {flag} is an option of --cluster (grading as Dask tasks)")
        return
    if args.workers is not None and args.workers < 1:
        raise SystemExit(f"autograder: --workers {args.workers}: a local cluster needs at least 1 worker")
    if args.workers is not None and args.cluster:
        raise SystemExit("autograder: --workers sizes the local cluster; a cluster at an address has the "
                         "workers started there (dask worker ADDRESS --resources GPU=1)")
    if args.retries < 0:
        raise SystemExit(f"autograder: --retries {args.retries}: the number of retries cannot be negative")
    if args.task_timeout is not None and args.task_timeout <= 0:
        raise SystemExit(f"autograder: --task-timeout {args.task_timeout:g}: the time limit must be more than 0 seconds")


def _grade_sequentially(run: ClassRun, students: list[str]) -> int:
    """Every student in this process, one after another (the grading record is kept as on a cluster)."""
    _say(f"grading {run.assignment}: {len(students)} submission(s), backend "
         f"{os.environ.get('DLK_BACKEND', 'auto')}")
    started = time.perf_counter()
    failures = grade_sequentially(run, students, _say)
    _say(f"graded {len(students) - len(failures)} of {len(students)} in {time.perf_counter() - started:.1f} s")
    _warn_mixed_gpus(run)
    return 1 if failures else 0


def _grade_on_cluster(args: argparse.Namespace, run: ClassRun, students: list[str]) -> int:
    """Every student missing or changed, as Dask tasks; results written here as they arrive."""
    done = grade_on_cluster(run, students, address=args.cluster, workers=args.workers, retries=args.retries,
                            task_timeout=args.task_timeout, regrade=args.regrade, progress=not args.no_progress,
                            say=_say)
    record = run.record
    _final_table(record, students, done.graded_now)
    ran = [s for s in done.graded_now if record.students.get(s) is not None]
    n_failed = sum(1 for s in students if record.students.get(s) is None or record.students[s].status != "graded")
    rate = f", {60 * done.prepared / done.seconds:.1f} gradings per minute" if done.prepared and done.seconds > 0 else ""
    _say(f"graded {len(ran) - sum(1 for s in ran if record.students[s].status != 'graded')} of {len(done.graded_now)} "
         f"in {done.seconds:.1f} s{rate}; {len(done.up_to_date)} up to date; {n_failed} without a grade")
    _warn_mixed_gpus(run)
    return 1 if n_failed else 0


def _final_table(record, students: list[str], graded_now: list[str]) -> None:
    """One line per student: graded now, up to date, or failed with the reason."""
    rows = []
    for student in students:
        entry = record.students.get(student)
        if entry is None:
            rows.append((student, "not graded", "", "", "", "the run stopped before it"))
            continue
        status = entry.status if student in graded_now else ("up to date" if entry.status == "graded" else entry.status)
        score = f"{entry.score:g} / {entry.max_score:g}" if entry.status == "graded" else "-"
        gpus = sorted({d for b, d in zip(entry.backends, entry.devices) if b == "gpu" and d})
        device = ", ".join(gpus) or ("CPU emulator (speed not measured)" if entry.speed_pending
                                     else ("CPU emulator" if entry.backends else "-"))
        rows.append((student, status, score, device, f"{entry.seconds:.1f}" if entry.seconds else "",
                     entry.reason))
    header = ("student", "status", "points", "graded on", "s", "reason")
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
# feedback
# --------------------------------------------------------------------------


def cmd_feedback(args: argparse.Namespace) -> int:
    from nbgrader.converters import GenerateFeedback

    config = load_config(args.course_dir, args.db)
    config.HTMLExporter.template_name = "feedback"
    _quiet_nbgrader(args.verbose)
    students = args.student or ["*"]
    for student in students:
        cd = coursedir(config, args.assignment, student)
        conv = GenerateFeedback(coursedir=cd, config=config)
        conv.force = True
        _run_converter(conv)
    cd = coursedir(config, args.assignment)
    for path in finish_feedback_pages(cd.format_path(cd.feedback_directory, "*", args.assignment)):
        _say(f"  {os.path.relpath(path, cd.root)}")
    _write_leaderboard(args, cd)
    return 0


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
    rows = export.collect(cd, args.assignment)
    if not (args.csv or args.gradescope):
        args.csv = f"{args.assignment}_grades.csv"
    if args.csv:
        export.write_csv(rows, args.csv)
        _say(f"wrote {args.csv} ({len(rows)} students)")
    if args.gradescope:
        paths = export.write_gradescope(rows, args.gradescope)
        _say(f"wrote {len(paths)} Gradescope results.json under {args.gradescope}")
    return 0


# --------------------------------------------------------------------------
# grade-notebook (no gradebook)
# --------------------------------------------------------------------------


def cmd_grade_notebook(args: argparse.Namespace) -> int:
    _require_sandbox()
    config = load_config(args.course_dir)
    cd = coursedir(config, args.assignment)
    source_nb = args.source
    if not source_nb:
        folder = cd.format_path(cd.source_directory, ".", args.assignment)
        source_nb = os.path.join(folder, os.path.basename(args.notebook))
        candidates = sorted(glob.glob(os.path.join(folder, "*.ipynb")))
        if not os.path.exists(source_nb) and len(candidates) == 1:
            source_nb = candidates[0]  # the assignment's only notebook, whatever the upload is called
    cells = instructor_test_cells(nbformat.read(source_nb, as_version=4))
    nb = nbformat.read(args.notebook, as_version=4)
    course_secret = _course_secret_of(args)
    grading = grade_notebook(
        nb,
        list(dict.fromkeys(c.exercise for c in cells)),
        student=args.student,
        notebook=os.path.splitext(os.path.basename(args.notebook))[0],
        student_key=student_key(course_secret, args.assignment, args.student),
        timeout_s=args.timeout,
        log=_say,
    )
    data = export.gradescope_from_grading(grading, cells)
    _say(f"{args.student}: {data['score']:g} / {sum(t['max_score'] for t in data['tests']):g} points; "
         f"grading took {grading.total_seconds:.1f} s")
    if args.results_json:
        with open(args.results_json, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
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
                    help="with --cluster and no address: the local cluster's workers (at most one per GPU)")
    sp.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                    help="with --cluster: attempts after the first for a grading whose worker died or timed out "
                    "(default %(default)s); then it is recorded as failed, with the reason")
    sp.add_argument("--task-timeout", type=float, default=None,
                    help="with --cluster: seconds one student's grading may run on a worker "
                    "(default: twice the exercises' limits, plus a minute)")
    sp.add_argument("--regrade", action="store_true", help="with --cluster: grade every submission again, "
                    "even those graded before and unchanged")
    sp.add_argument("--no-progress", action="store_true", help="with --cluster: no progress bar")

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
    args = build_parser().parse_args(argv)
    _ensure_tools_on_path()
    _quiet_nbgrader(args.verbose)
    root = os.path.abspath(args.course_dir)
    if root not in sys.path and os.path.isdir(os.path.join(root, "autograder")):
        sys.path.insert(0, root)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
