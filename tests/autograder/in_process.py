"""The `autograder` command run in the test's own process (cheaper than a subprocess: no start-up, no imports)."""

from __future__ import annotations

import contextlib
import io

from autograder.cli import main


def run_main(*argv: str) -> tuple[int, str, str]:
    """``autograder ARGV`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()
