"""The notebook side: the ``%%cuda`` and ``%%tc`` cell magics and ``check()``.

In a notebook::

    %load_ext autograder.student          # or: from autograder.student import *

    %%cuda saxpy block=256 grid=512
    __global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) { ... }

    check("saxpy")

The magic compiles the cell on the current backend (the GPU, or the CPU
emulator without one) and shows compiler messages at the cell's own line
numbers (the ``%%cuda`` line is line 1).  ``check()`` runs the visible cases
in a separate process, exactly as grading does, and prints a report; where
it helps it draws where the errors are.  Grading never runs this module: it
reads the ``%%cuda`` cells from the notebook file (see
:mod:`autograder.submission`).
"""

from __future__ import annotations

import sys

from kernels.runtime import errors, selection
from kernels.runtime.module import compile_source

from . import feedback
from .checker import check_signature
from .exercise import LaunchError
from .exercises import all_exercises
from .isolation import grade_submission
from .kernel_profile import show_profile
from .report import plot_error_maps
from .result import ExerciseResult
from .submission import KernelSubmission, parse_magic_line
from .thread_maps import show_thread_map

__all__ = ["check", "submission", "load_ipython_extension"]

#: The last ``%%cuda`` cell run for each exercise (this notebook session).
_SUBMISSIONS: dict[str, KernelSubmission] = {}
#: Why the last ``%%cuda`` cell of an exercise left it without a kernel (header, compile, signature).
_FAILED: dict[str, str] = {}
#: The result of the last ``check()``.
last_result: ExerciseResult | None = None


def _header_name(line: str) -> str | None:
    """The exercise a ``%%cuda`` line names, even when the rest of it does not parse."""
    tokens = line.strip().removeprefix("%%cuda").split()
    return tokens[0] if tokens and "=" not in tokens[0] else None


def _fail(name: str | None, why: str, err) -> None:
    """A cell that failed leaves its exercise with no kernel, so check() cannot test an older one."""
    if not name:
        return
    _SUBMISSIONS.pop(name, None)
    _FAILED[name] = why
    print(f"(no kernel for '{name}' now: check('{name}') will say so until a %%cuda {name} cell compiles)", file=err)


def compile_cell(line: str, cell: str, out=None) -> KernelSubmission | None:
    """What ``%%cuda`` does: parse the line, compile the body, remember it for ``check()``.

    A cell that fails (a header that does not parse, a compile error, a kernel
    whose name or parameters are not the exercise's) removes the exercise's
    earlier kernel: ``check()`` then says there is none rather than testing it.
    """
    out = out or sys.stdout
    err = sys.stderr
    parsed = parse_magic_line(line)
    if parsed.error:
        print(f"%%cuda: {parsed.error}", file=err)
        _fail(parsed.exercise or _header_name(line), "its %%cuda line did not parse", err)
        return None
    name = parsed.exercise
    sub = KernelSubmission(exercise=name or "", source=cell, launch=dict(parsed.launch), cell_line=2)

    try:
        module = compile_source(sub.compile_source(), name=f"{name or 'cell'}.cu")
    except errors.KernelCompileError as exc:
        print(str(exc), file=err)
        print("(line numbers are those of this cell; the %%cuda line is line 1)", file=err)
        _fail(name, "it did not compile", err)
        return sub
    except errors.KernelError as exc:
        print(f"%%cuda: {exc}", file=err)
        _fail(name, "it could not be compiled", err)
        return sub
    backend = module.backend.name
    kernels = ", ".join(module.kernel_names) or "no __global__ functions"
    print(f"compiled on the {'GPU' if backend == 'gpu' else 'CPU emulator'}: {kernels}", file=out)
    if name:
        problem = _warn_exercise(name, sub, module, err)
        if problem:
            _fail(name, problem, err)
        else:
            _FAILED.pop(name, None)
            _SUBMISSIONS[name] = sub
    return sub


def _warn_exercise(name: str, sub: KernelSubmission, module, err) -> str:
    """Print what is wrong for the exercise; the reason it cannot be checked ('' if it can)."""
    ex = all_exercises().get(name)
    if ex is None:
        print(f"note: there is no exercise '{name}' (known: {', '.join(sorted(all_exercises()))}); "
              f"the cell compiled but cannot be checked", file=err)
        return ""
    problem = check_signature(ex, module)
    if problem:
        print(f"%%cuda: {problem}", file=err)
        return "its kernel's name or parameters are not the exercise's: see the note under it"
    try:
        ex.validate_launch(sub.launch)
    except LaunchError as exc:
        print(f"note: launch configuration: {exc}", file=err)
    return ""


def compile_tc_cell(line: str, cell: str, out=None) -> KernelSubmission | None:
    """What ``%%tc`` does: parse the line, check the index notation, show its ranges, remember it for ``check()``."""
    out = out or sys.stdout
    err = sys.stderr
    parsed = parse_magic_line(line)
    if parsed.error:
        print(f"%%tc: {parsed.error}", file=err)
        return None
    name = parsed.exercise
    sub = KernelSubmission(exercise=name or "", source=cell, launch=dict(parsed.launch), cell_line=2)
    from kernels.index_notation import TcError, check_text  # deferred: its parser, 100 ms, loads at the first %%tc cell

    try:
        checked = check_text(sub.compile_source())
    except TcError as exc:
        print(str(exc), file=err)
        print("(line numbers are those of this cell; the %%tc line is line 1)", file=err)
    else:
        print(checked.describe_ranges(), file=out)
    if name:
        _SUBMISSIONS[name] = sub
    return sub


def tc(line: str, cell: str) -> None:
    """The ``%%tc`` cell magic (index notation, see ``kernels.index_notation``)."""
    compile_tc_cell(line, cell)


def submission(name: str) -> KernelSubmission | None:
    """The last ``%%cuda <name>`` cell run in this session."""
    return _SUBMISSIONS.get(name)


def check(name: str, plot: bool = True, timeout_s: float | None = None, profile: bool = True) -> None:
    """Run the visible tests of exercise ``name`` on the kernel of the last ``%%cuda name`` cell.

    On the CPU emulator a correct kernel is also profiled (``profile=False``: not): per line, the sectors
    its global loads and stores touch, its shared-memory bank conflicts, the branches that diverge within
    a warp, its occupancy, and the hints they imply (:mod:`autograder.kernel_profile`).  For an exercise with
    a thread map (the warm-up puzzles), correct or not, it draws which thread read and which wrote each
    element beside the expected map (:mod:`autograder.thread_maps`; ``profile=False``: not)."""
    global last_result
    known = all_exercises()
    if name not in known:
        print(f"check('{name}'): there is no exercise '{name}'; the exercises are: {', '.join(sorted(known))}.")
        return None
    sub = _SUBMISSIONS.get(name)
    if sub is None:
        if name in _FAILED:
            print(f"No kernel for '{name}': the last '%%cuda {name}' cell failed ({_FAILED[name]}); "
                  f"fix that cell and run it again (its messages are printed under it).")
        else:
            print(f"No kernel for '{name}' yet: run the cell that starts with '%%cuda {name} ...' first.")
        return None
    try:
        backend = selection.current_backend().name
    except Exception:
        backend = None
    result = grade_submission(sub, mode="visible", backend=backend, timeout_s=timeout_s, profile=profile)
    last_result = result
    print(feedback.check_text(result))
    show_thread_map(result, notebook=plot and _in_notebook())
    if result.status == "passed":
        show_profile(result, notebook=plot and _in_notebook())
    if plot and result.status == "failed":
        try:
            fig = plot_error_maps(result)
        except Exception:
            fig = None
        if fig is not None:
            try:
                from IPython.display import display

                display(fig)
                import matplotlib.pyplot as plt

                plt.close(fig)
            except ImportError:
                pass
    return None


def _in_notebook() -> bool:
    """Whether check() runs in a Jupyter kernel (HTML and pictures) rather than a terminal (text)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def cuda(line: str, cell: str) -> None:
    """The ``%%cuda`` cell magic."""
    compile_cell(line, cell)


def load_ipython_extension(ipython) -> None:
    """``%load_ext autograder.student``: register ``%%cuda`` and put ``check`` in the namespace."""
    ipython.register_magic_function(cuda, magic_kind="cell", magic_name="cuda")
    ipython.register_magic_function(tc, magic_kind="cell", magic_name="tc")
    ipython.user_ns.setdefault("check", check)


def _register_if_interactive() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        load_ipython_extension(ip)


_register_if_interactive()
