"""Which submissions of an assignment look alike: a report for the instructor, never a score.

Every ``%%cuda`` cell of ``submitted/<student>/<assignment>/*.ipynb`` is fingerprinted as MOSS
does (winnowing of hashed k-grams, by ``copydetect``) after pygments' CUDA lexer has dropped
comments and whitespace and written every name as one letter, so that renaming variables and
reformatting change nothing.  What every student was handed counts for nobody: the k-grams of
the released stub of the exercise and of the book's kernels (``kernels/**/*.cu`` and ``.cuh``) are
taken out of every fingerprint before two submissions are compared.  The same fingerprints,
compared with the book's kernels, say how much of each submission is the book's.

For each exercise, every pair of students is compared; the pairs are ranked by the smaller of
the two shares (the share of one student's kernel found in the other's), then by how much of the
two is equal up to a consistent renaming (two kernels that differ only by swapped names, such as
``y[m * P + p]`` and ``y[p * M + m]``, share every fingerprint but are not one kernel renamed), and the closest pairs
are shown with their matching lines side by side.  Students appear under their course alias, as
on the leaderboard, unless the instructor asks for names.  Everything a student wrote is escaped.
"""

from __future__ import annotations

import copy
import difflib
import html
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage
from pygments.lexers import get_lexer_by_name
from pygments.token import Token

from .leaderboard import course_alias
from .submission import submissions_from_notebook

REPO = Path(__file__).resolve().parent.parent
#: Length of a k-gram, in characters of the normalised text (a name is one character): about ten tokens.
K = 25
#: Winnowing window: one fingerprint kept per window of this many k-grams.
WINDOW = 4
#: Pairs per exercise compared in full (those that share the largest part of their fingerprints).
COMPARED = 1000
#: Pairs whose smaller share is at least this are also compared up to a consistent renaming (to order ties).
CLOSE = 0.5
#: Pairs shown with their lines side by side.
DETAILED_PAIRS = 20


_CUDA = get_lexer_by_name("cuda")


class SimilarityError(ValueError):
    """The report cannot be made; the message is one sentence for the instructor."""


@dataclass(frozen=True)
class Match:
    exercise: str
    first: str
    second: str
    shares: tuple[float, float]  # the share of each kernel found in the other
    tokens: int  # normalised characters the two have in common
    slices: tuple[np.ndarray, np.ndarray]  # matching character ranges in each kernel's text
    #: the share of tokens that are equal once each kernel's names are numbered in order of first use: 1 for two
    #: kernels that differ by a consistent renaming, less where names were swapped (a different kernel)
    renaming: float = 0.0

    @property
    def score(self) -> float:
        """The smaller share: a copied kernel is mostly found in the other both ways, while a short kernel found
        inside a long one is not."""
        return min(self.shares)


def _fingerprint(text: str) -> CodeFingerprint:
    return CodeFingerprint("kernel.cu", K, WINDOW, filter=True, language="cuda", fp=io.StringIO(text))


def _named_in_order(text: str) -> list[str]:
    """The kernel's tokens without comments and spacing, each name replaced by the order of its first use."""
    order: dict[str, str] = {}
    out = []
    for kind, value in _CUDA.get_tokens(text):
        if kind in Token.Comment or kind in Token.Text or not value.strip():
            continue
        if kind in Token.Name:
            value = order.setdefault(value, f"#{len(order)}")
        out.append(value)
    return out


def _renaming_share(first: str, second: str) -> float:
    return difflib.SequenceMatcher(None, _named_in_order(first), _named_in_order(second), autojunk=False).ratio()


def _without(fp: CodeFingerprint, boilerplate: frozenset) -> CodeFingerprint:
    """``fp`` without the k-grams in ``boilerplate`` (taken out after winnowing, as copydetect does, but by set:
    its own removal also drops k-grams a kernel repeats)."""
    shared = fp.hashes & boilerplate
    if not shared:
        return fp
    kept = copy.copy(fp)
    kept.hashes = fp.hashes - shared
    kept.hash_idx = {value: where for value, where in fp.hash_idx.items() if value not in shared}
    kept.token_coverage = get_token_coverage(kept.hash_idx, K, len(fp.filtered_code))
    return kept


def cell_text(sub) -> str:
    """What a ``%%cuda`` cell holds: its launch line and its kernel."""
    launch = " ".join(f"{k}={v}" for k, v in sub.launch.items())
    return f"%%cuda {sub.exercise} {launch}\n{sub.source}"


def notebook_kernels(paths) -> dict[str, str]:
    """exercise -> the text of its ``%%cuda`` (or ``%%tc``) cell, over the notebooks ``paths`` (an unreadable
    notebook adds none)."""
    kernels: dict[str, str] = {}
    for path in paths:
        try:
            subs = submissions_from_notebook(path)
        except Exception:  # a notebook that is not JSON: nothing of it to compare
            continue
        for sub in subs:
            if sub.source.strip():
                kernels[sub.exercise] = cell_text(sub)
    return kernels


def book_kernels() -> dict[str, str]:
    """``kernels/...`` path -> text, for every CUDA source a student is given."""
    root = REPO / "kernels"
    paths = sorted([*root.rglob("*.cu"), *root.rglob("*.cuh")])
    return {str(p.relative_to(REPO)): p.read_text() for p in paths}


def known_assignments(course: Path) -> set[str]:
    names = {p.name for p in (REPO / "solutions").iterdir() if p.is_dir()}
    for folder in ("solutions", "exercises"):
        if (course / folder).is_dir():
            names |= {p.name for p in (course / folder).iterdir() if p.is_dir()}
    return names


def class_kernels(course: Path, assignment: str) -> dict[str, dict[str, str]]:
    """student -> exercise -> kernel text, from ``submitted/<student>/<assignment>/*.ipynb``."""
    submitted = course / "submitted"
    found = {}
    if submitted.is_dir():
        for folder in sorted(submitted.iterdir()):
            notebooks = sorted((folder / assignment).glob("*.ipynb")) if folder.is_dir() else []
            if notebooks:
                found[folder.name] = notebook_kernels(notebooks)
    return found


def stub_kernels(course: Path, assignment: str) -> dict[str, str]:
    """exercise -> the released stub's cell (the course's release, else this repository's)."""
    for root in (course, REPO):
        notebooks = sorted((root / "exercises" / assignment).glob("*.ipynb"))
        if notebooks:
            return notebook_kernels(notebooks)
    return {}


def compare_class(kernels: dict[str, dict[str, str]], stubs: dict[str, str], book: dict[str, str],
                  compared: int = COMPARED):
    """(the pairs with something in common, as :class:`Match`, best first; per (student, exercise) the book
    file most of it comes from and that share, largest first).  Every pair's fingerprints are intersected;
    the ``compared`` pairs per exercise that share the largest part of them are compared in full."""
    book_prints = {path: _fingerprint(text) for path, text in book.items()}
    stub_hashes = frozenset().union(*(_fingerprint(text).hashes for text in stubs.values()))
    boilerplate = stub_hashes.union(*(fp.hashes for fp in book_prints.values()))
    matches: list[Match] = []
    from_book = []
    for exercise in sorted({e for per in kernels.values() for e in per}):
        students = sorted(s for s in kernels if exercise in kernels[s])
        raw = {s: _fingerprint(kernels[s][exercise]) for s in students}
        for s in students:
            own = _without(raw[s], stub_hashes)
            best = max(((compare_files(own, fp)[1][0], path) for path, fp in book_prints.items()
                        if own.hashes & fp.hashes), default=(0.0, ""))
            if best[0] > 0:
                from_book.append((float(best[0]), s, exercise, best[1]))
        prints = {s: _without(raw[s], boilerplate) for s in students}
        overlap = []
        for n, a in enumerate(students):
            for b in students[n + 1:]:
                common = len(prints[a].hashes & prints[b].hashes)
                if common:
                    overlap.append((common / max(len(prints[a].hashes), len(prints[b].hashes)), a, b))
        overlap.sort(reverse=True)
        for _, a, b in overlap[:compared]:
            tokens, shares, slices = compare_files(prints[a], prints[b])
            if tokens:
                shares = (float(shares[0]), float(shares[1]))
                renaming = _renaming_share(kernels[a][exercise], kernels[b][exercise]) if min(shares) >= CLOSE else 0.0
                matches.append(Match(exercise, a, b, shares, int(tokens), slices, renaming))
    matches.sort(key=lambda m: (-m.score, -m.renaming, -m.tokens, m.exercise, m.first, m.second))
    from_book.sort(key=lambda row: (-row[0], row[1], row[2]))
    return matches, from_book


# ------------------------------------------------------------------ the page


def _matched_lines(text: str, slices) -> set[int]:
    """Line numbers (0-based) of ``text`` that a matching character range touches."""
    starts = np.cumsum([0] + [len(line) + 1 for line in text.split("\n")])
    lines: set[int] = set()
    for start, end in zip(np.asarray(slices[0], int), np.asarray(slices[1], int)):
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, max(start, end - 1), side="right")) - 1
        lines.update(range(first, last + 1))
    return lines


def _listing(text: str, marked: set[int]) -> str:
    rows = []
    for number, line in enumerate(text.split("\n")):
        cls = ' class="same"' if number in marked else ""
        rows.append(f"<tr{cls}><td class=\"n\">{number + 1}</td><td><code>{html.escape(line)}</code></td></tr>")
    return "<table class=\"code\">" + "".join(rows) + "</table>"


STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:110em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
table.code td{border:none;padding:0 .4em;white-space:pre}table.code td.n{color:#888;text-align:right}
tr.same{background:#ffe08a}.side{display:flex;gap:1em}.side>div{flex:1;overflow-x:auto}"""


def report_html(assignment: str, kernels, matches: list[Match], from_book, name_of, named: bool,
                top: int = DETAILED_PAIRS) -> str:
    e = html.escape
    who = "names" if named else "course aliases (the same as on the leaderboard)"
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Similarity: {e(assignment)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>Similar kernels in {e(assignment)}</h1>",
             f"<p>{len(kernels)} submissions; students shown by {e(who)}. Kernels are compared after comments, "
             f"spacing and names are normalised; what the released stub and the book's kernels contain counts for "
             f"nobody. A high share is a reason to look, not a finding: this report changes no score.</p>",
             "<h2>Pairs, most similar first</h2>"]
    if not matches:
        parts.append("<p>No two submissions have a fingerprint in common.</p>")
    else:
        parts.append("<table><thead><tr><th>#</th><th>exercise</th><th>student</th><th>share</th><th>student</th>"
                     "<th>share</th><th>common (normalised characters)</th></tr></thead><tbody>")
        for rank, m in enumerate(matches, 1):
            link = f"<a href=\"#pair{rank}\">{rank}</a>" if rank <= top else str(rank)
            parts.append(f"<tr><td>{link}</td><td>{e(m.exercise)}</td><td>{e(name_of(m.first))}</td>"
                         f"<td>{m.shares[0]:.0%}</td><td>{e(name_of(m.second))}</td><td>{m.shares[1]:.0%}</td>"
                         f"<td>{m.tokens}</td></tr>")
        parts.append("</tbody></table>")
    for rank, m in enumerate(matches[:top], 1):
        first, second = kernels[m.first][m.exercise], kernels[m.second][m.exercise]
        parts.append(f"<h3 id=\"pair{rank}\">{rank}. {e(m.exercise)}: {e(name_of(m.first))} and "
                     f"{e(name_of(m.second))}</h3><div class=\"side\">"
                     f"<div><p>{e(name_of(m.first))} ({m.shares[0]:.0%} found in the other)</p>"
                     f"{_listing(first, _matched_lines(first, m.slices[0]))}</div>"
                     f"<div><p>{e(name_of(m.second))} ({m.shares[1]:.0%} found in the other)</p>"
                     f"{_listing(second, _matched_lines(second, m.slices[1]))}</div></div>")
    parts.append("<h2>Submissions that contain the book's kernels</h2>")
    if not from_book:
        parts.append("<p>No submission shares a fingerprint with the book's kernels beyond its stub.</p>")
    else:
        parts.append("<table><thead><tr><th>student</th><th>exercise</th><th>share from the book</th>"
                     "<th>closest book file</th></tr></thead><tbody>")
        for share, student, exercise, path in from_book:
            parts.append(f"<tr><td>{e(name_of(student))}</td><td>{e(exercise)}</td><td>{share:.0%}</td>"
                         f"<td>{e(path)}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def report_path(course: Path, assignment: str) -> Path:
    return course / "feedback" / f"similarity_{assignment}.html"


def write_atomically(path: Path, text: str) -> None:
    """``text`` at ``path``, never a half-written file: written beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def similarity_report(course_dir, assignment: str, course_secret: str | None, named: bool = False, path=None,
                      top: int = DETAILED_PAIRS) -> tuple[Path, list[Match]]:
    """Compare the class's kernels of ``assignment`` and write the page; (its path, the ranked pairs).
    :class:`SimilarityError` for input that cannot give a report."""
    course = Path(course_dir).resolve()
    if not course.is_dir():
        raise SimilarityError(f"no course directory at {course} (pass --course-dir)")
    if assignment not in known_assignments(course):
        raise SimilarityError(f"unknown assignment '{assignment}' (known: {', '.join(sorted(known_assignments(course)))})")
    kernels = class_kernels(course, assignment)
    if not kernels:
        raise SimilarityError(f"no submissions of {assignment} in {course / 'submitted'} "
                              f"(collect them first: autograder collect {assignment})")
    if not named and not course_secret:
        raise SimilarityError("students are shown by their course alias, which derives from the course secret, and "
                              "this course has none yet (grade first, or pass --names)")
    matches, from_book = compare_class(kernels, stub_kernels(course, assignment), book_kernels())
    name_of = (lambda s: s) if named else (lambda s: course_alias(course_secret, s))
    out = Path(path) if path else report_path(course, assignment)
    write_atomically(out, report_html(assignment, kernels, matches, from_book, name_of, named, top))
    return out, matches
