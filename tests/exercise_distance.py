"""How far an exercise's solution is from the kernels students are given, token by token.

The CUDA a student receives (``make student-copy``) is every ``.cu`` and ``.cuh`` under ``kernels/``
and ``autograder/``.  A solution that shares a long run of tokens with one of them could be pasted
from it; :func:`longest_shared_run` measures the longest such run, after pygments' CUDA lexer has
dropped comments and whitespace (names and literals are kept as written: this is about text a
student could copy, not about kernels that merely look alike, which ``autograder similarity``
judges).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pygments.lexers import get_lexer_by_name
from pygments.token import Token

REPO = Path(__file__).resolve().parents[1]
#: A solution may share at most this many consecutive tokens with any kernel shipped to students.
MAX_SHARED_RUN = 25

_CUDA = get_lexer_by_name("cuda")


def tokens(text: str) -> tuple[str, ...]:
    return tuple(value for kind, value in _CUDA.get_tokens(text)
                 if value.strip() and kind not in Token.Comment and kind not in Token.Text)


def shipped_sources() -> dict[str, str]:
    """Path (from the repository root) -> text of every CUDA source students are given."""
    paths = [p for folder in ("kernels", "autograder") for pattern in ("*.cu", "*.cuh")
             for p in (REPO / folder).rglob(pattern)]
    return {str(p.relative_to(REPO)): p.read_text() for p in sorted(paths)}


@functools.lru_cache(maxsize=1)
def _shipped_runs() -> dict[tuple[str, ...], str]:
    """Every run of MAX_SHARED_RUN + 1 consecutive shipped tokens -> the file it comes from."""
    runs: dict[tuple[str, ...], str] = {}
    width = MAX_SHARED_RUN + 1
    for path, text in shipped_sources().items():
        found = tokens(text)
        for start in range(len(found) - width + 1):
            runs.setdefault(found[start:start + width], path)
    return runs


def longest_shared_run(text: str) -> tuple[int, str, str]:
    """(length of the longest run of ``text``'s tokens found verbatim in a shipped kernel, if longer than
    :data:`MAX_SHARED_RUN`, else 0; that file; the run's text)."""
    runs = _shipped_runs()
    mine = tokens(text)
    width = MAX_SHARED_RUN + 1
    best = (0, "", "")
    start = 0
    while start + width <= len(mine):
        path = runs.get(mine[start:start + width])
        if path is None:
            start += 1
            continue
        end = start + width
        while end < len(mine) and _in_shipped(mine[start:end + 1], path):
            end += 1
        if end - start > best[0]:
            best = (end - start, path, " ".join(mine[start:end]))
        start = end - width + 1
    return best


def _in_shipped(run: tuple[str, ...], path: str) -> bool:
    return " ".join(run) in _shipped_text(path)


@functools.lru_cache(maxsize=None)
def _shipped_text(path: str) -> str:
    return " ".join(tokens(shipped_sources()[path]))


def solution_body(exercise: str) -> str:
    """What the student writes of the instructor's solution of ``exercise``: the text between its solution
    markers, every region of them (helpers before the kernel, its body), or the whole cell if it has none."""
    from autograder.submission import submissions_from_notebook  # deferred: reads notebooks (nbformat) on first use

    (source,) = [sub.source for notebook in sorted((REPO / "solutions").glob("*/*.ipynb"))
                 for sub in submissions_from_notebook(notebook) if sub.exercise == exercise]
    regions = re.findall(r"BEGIN SOLUTION[^\n]*\n(.*?)\n[^\n]*END SOLUTION", source, re.S)
    return "\n".join(regions) if regions else source
