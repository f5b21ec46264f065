"""``autograder similarity``: which submissions' kernels look alike, ranked, for the instructor.

A class of 300 generated submissions with one copied pair (renamed and reformatted) ranks that
pair first; so does a class made of the planted-bug corpus (the solution, every planted bug, and
two students handing in one other correct kernel, one of them renamed and reformatted).  What the
stub hands out counts for nobody, every submitted text is escaped, the page is written whole or
not at all, and wrong input gets one line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.similarity import SimilarityError, compare_class, similarity_report, write_atomically
from planted_corpus import corpus_files, read_corpus_file, solution_kernel

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_cuda_from_python"
KEEP = {"__global__", "void", "int", "float", "const", "if", "for", "return", "long", "unsigned", "extern",
        "__shared__", "__syncthreads", "blockIdx", "blockDim", "threadIdx", "gridDim", "x", "y", "z", "atomicAdd",
        "fmaxf", "fminf", "expf", "sqrtf", "define", "include", "while", "else", "char", "double", "sizeof",
        "__restrict__", "__device__", "inline", "size_t", "half", "float4", "reinterpret_cast", "static_cast"}


def renamed_and_reformatted(cell: str) -> str:
    """The same kernel as another student would hand it in: every name but the kernel's changed, one statement
    per line laid out anew, a comment added.  The ``%%cuda`` line stays (the exercise and the launch)."""
    magic, _, body = cell.partition("\n")
    keep = KEEP | {magic.split()[1]}
    names = sorted({w for w in re.findall(r"\b[A-Za-z_]\w*\b", body) if w not in keep and not w.startswith("__")})
    mapping = {name: f"v{i}_{name[::-1].lower()}" for i, name in enumerate(names)}
    body = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: mapping.get(m.group(0), m.group(0)), body)
    body = re.sub(r"//[^\n]*", "", body)
    directives = [line for line in body.split("\n") if line.lstrip().startswith("#")]  # they end at their line
    code = " ".join(line for line in body.split("\n") if not line.lstrip().startswith("#"))
    lines = [line for line in re.split(r"(?<=[;{}])\s*", re.sub(r"\s+", " ", code)) if line.strip()]
    return "\n".join([magic, "// my own kernel", *directives,
                      *("  " * (i % 3) + line.strip() for i, line in enumerate(lines))]) + "\n"


def write_submission(course: Path, assignment: str, student: str, cells: list[str]) -> None:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nb = new_notebook(cells=[new_code_cell("%load_ext autograder.student")] + [new_code_cell(c) for c in cells])
    nbformat.write(nb, str(folder / "notebook.ipynb"))


# ------------------------------------------------------------------ a generated class of 300

SCAFFOLD = """%%cuda saxpy block=256
__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
"""


def _expression(rng: np.random.Generator, depth: int) -> str:
    if depth == 0 or (depth < 3 and rng.random() < 0.2):
        return str(rng.choice(["x[i * incx]", "y[i * incy]", "alpha", f"{rng.integers(1, 999)}.{rng.integers(0, 99)}f"]))
    op = str(rng.choice(["+", "-", "*", "/"]))
    func = str(rng.choice(["", "fmaxf", "fminf", "expf"]))
    left, right = _expression(rng, depth - 1), _expression(rng, depth - 1)
    if func in ("fmaxf", "fminf"):
        return f"{func}({left}, {right})"
    if func == "expf":
        return f"expf({left} {op} {right})"
    return f"({left} {op} {right})"


def generated_kernel(rng: np.random.Generator) -> str:
    """A small kernel of the scaffold's shape with a body of its own (random expressions and constants)."""
    statements = [f"        float t{j} = {_expression(rng, 4)};" for j in range(int(rng.integers(2, 5)))]
    total = " + ".join(f"t{j}" for j in range(len(statements)))
    return SCAFFOLD + "\n".join(statements) + f"\n        y[i * incy] = {total};\n    }}\n}}\n"


def test_a_class_of_300_ranks_the_copied_pair_first(tmp_path):
    course = tmp_path / "course"
    stub = course / "exercises" / ASSIGNMENT
    stub.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell(SCAFFOLD + "        // YOUR CODE HERE\n    }\n}\n")]),
                   str(stub / "cuda_from_python.ipynb"))
    rng = np.random.default_rng(42)
    kernels = {f"student{n:03d}": generated_kernel(rng) for n in range(300)}
    kernels["student233"] = renamed_and_reformatted(kernels["student017"])
    for student, cell in kernels.items():
        write_submission(course, ASSIGNMENT, student, [cell])
    out, matches = similarity_report(course, ASSIGNMENT, course_secret="course secret")
    assert {matches[0].first, matches[0].second} == {"student017", "student233"}
    assert matches[0].score > 0.95 and matches[0].score > matches[1].score + 0.2
    page = out.read_text()
    assert out == course / "feedback" / f"similarity_{ASSIGNMENT}.html"
    assert "student017" not in page and "anonymous-" in page  # anonymised, as on the leaderboard


# ------------------------------------------------------------------ the planted-bug corpus as a class


def corpus_class(exercise: str) -> dict[str, dict[str, str]]:
    """The solution, every planted bug, and two students with one other correct kernel (the second renamed
    and reformatted) of ``exercise``."""
    def cell(sub) -> str:
        launch = " ".join(f"{k}={v}" for k, v in sub.launch.items())
        return f"%%cuda {exercise} {launch}\n{sub.source}"

    kernels = {"solution": {exercise: cell(solution_kernel(exercise))}}
    others = []
    for path in corpus_files(exercise):
        kernel = read_corpus_file(path)
        if kernel.accepted:
            others.append(cell(kernel.submission))
        else:
            kernels[f"bug-{path.stem}"] = {exercise: cell(kernel.submission)}
    kernels["copier-a"] = {exercise: others[0]}
    kernels["copier-b"] = {exercise: renamed_and_reformatted(others[0])}
    return kernels


EXERCISES_WITH_ANOTHER_KERNEL = sorted({p.parent.name for p in (REPO / "tests" / "planted_bugs").glob("*/*.cu")})


@pytest.mark.parametrize("exercise", EXERCISES_WITH_ANOTHER_KERNEL)
def test_the_corpus_as_a_class_ranks_the_copied_pair_first(exercise):
    kernels = corpus_class(exercise)
    assert len(kernels) >= 7  # the solution, five planted bugs or more, the copied pair
    matches, _ = compare_class(kernels, stubs={}, book={})
    assert {matches[0].first, matches[0].second} == {"copier-a", "copier-b"}, matches[:3]
    assert (matches[0].score, matches[0].renaming) > max((m.score, m.renaming) for m in matches[1:])
    assert matches[0].renaming == 1.0  # one kernel, renamed


def test_the_stub_and_the_book_count_for_nobody():
    """Two students who hand in the stub, or the same kernel of the book, have nothing in common with each other;
    the one who handed in the book's kernel is listed under the book."""
    book_kernel = (REPO / "kernels").rglob("saxpy.cu").__next__().read_text()
    stub = SCAFFOLD + "        // YOUR CODE HERE\n    }\n}\n"
    kernels = {"a": {"saxpy": stub}, "b": {"saxpy": stub}, "c": {"saxpy": book_kernel}, "d": {"saxpy": book_kernel}}
    matches, from_book = compare_class(kernels, stubs={"saxpy": stub}, book={"kernels/saxpy.cu": book_kernel})
    assert matches == []
    assert {(student, path) for share, student, _, path in from_book if share > 0.9} == {("c", "kernels/saxpy.cu"),
                                                                                          ("d", "kernels/saxpy.cu")}


def test_every_submitted_text_is_escaped_and_names_are_shown_only_when_asked(tmp_path):
    course = tmp_path / "course"
    hostile = "<script>alert(1)</script>"
    kernel = generated_kernel(np.random.default_rng(1)).replace("{\n", "{ // " + hostile + "\n", 1)
    write_submission(course, ASSIGNMENT, "ann<b>", [kernel])
    write_submission(course, ASSIGNMENT, "bob", [renamed_and_reformatted(kernel)])
    out, matches = similarity_report(course, ASSIGNMENT, course_secret=None, named=True)
    page = out.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "ann&lt;b&gt;" in page and "ann<b>" not in page
    assert len(matches) == 1


def test_the_page_is_written_whole_or_not_at_all(tmp_path):
    path = tmp_path / "feedback" / "similarity.html"
    write_atomically(path, "old page\n")

    with pytest.raises(TypeError):
        write_atomically(path, 12345)  # not text: nothing is written
    assert path.read_text() == "old page\n"
    assert [p.name for p in path.parent.iterdir()] == ["similarity.html"]  # no temporary file left behind


def test_wrong_input_gets_one_sentence(tmp_path):
    course = tmp_path / "course"
    with pytest.raises(SimilarityError, match="no course directory"):
        similarity_report(course, ASSIGNMENT, course_secret="s")
    course.mkdir()
    with pytest.raises(SimilarityError, match="unknown assignment 'nope'"):
        similarity_report(course, "nope", course_secret="s")
    with pytest.raises(SimilarityError, match="no submissions of 01_cuda_from_python"):
        similarity_report(course, ASSIGNMENT, course_secret="s")
    write_submission(course, ASSIGNMENT, "ann", [generated_kernel(np.random.default_rng(2))])
    with pytest.raises(SimilarityError, match="course secret"):
        similarity_report(course, ASSIGNMENT, course_secret=None)


@pytest.mark.parametrize("args", [["similarity", "nope"], ["similarity", ASSIGNMENT]])
def test_the_command_answers_wrong_input_in_one_line(tmp_path, args):
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("autograder: "), proc.stderr
