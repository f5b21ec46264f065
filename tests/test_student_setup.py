"""What the README promises students and instructors: `make lab`, and grades kept out of git."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV_READY = (ROOT / ".venv" / ".installed").exists()


@pytest.mark.skipif(shutil.which("make") is None or not VENV_READY,
                    reason="needs make and the project's .venv (`make test` creates it)")
@pytest.mark.parametrize("backend", ["cpu", "gpu"], ids=lambda b: f"DLK_BACKEND={b}")
def test_make_lab_runs_jupyterlab_from_the_venv_with_the_chosen_backend(backend):
    """`make lab` starts the venv's JupyterLab (here only asked its version) and keeps DLK_BACKEND."""
    env = {**os.environ, "DLK_BACKEND": backend}
    result = subprocess.run(["make", "-s", "lab", "LAB_ARGS=--version"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"DLK_BACKEND={backend}" in result.stdout
    version = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c",
                              "import jupyterlab; print(jupyterlab.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert result.stdout.strip().splitlines()[-1] == version
    assert ".venv/bin/jupyter lab" in subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True,
                                                     text=True, env=env).stdout


def _lab_command(*make_args: str) -> tuple[str, str]:
    """(what `make -n lab` would print, the jupyter lab command line in it); -n runs nothing."""
    out = subprocess.run(["make", "-n", "lab", *make_args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout
    (lab,) = [line for line in out.splitlines() if "jupyter lab" in line and "echo" not in line]
    return out, lab


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("as_root", [True, False], ids=["root", "user"])
def test_make_lab_passes_allow_root_as_root_and_says_so(as_root):
    """jupyter lab refuses to start as root without --allow-root; containers and course VMs run as root."""
    out, lab = _lab_command(f"RUNNING_AS_ROOT={'0' if as_root else ''}")
    assert ("--allow-root" in lab) == as_root
    assert ("running as root" in out and "passing --allow-root" in out) == as_root


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_finds_out_whether_it_runs_as_root():
    _, lab = _lab_command()
    assert ("--allow-root" in lab) == (os.geteuid() == 0)


@pytest.mark.parametrize("path", [
    "grades.csv",
    "gradescope/alice/results.json",
    "gradebook.db",
    "submitted/alice/01_cuda_from_python/cuda_from_python.ipynb",
    "autograded/alice/01_cuda_from_python/cuda_from_python.ipynb",
    "feedback/alice/01_cuda_from_python/cuda_from_python.html",
])
def test_grade_outputs_are_ignored_by_git(path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    assert result.returncode == 0, f"{path} would be committed: add it to .gitignore"


def test_exercise_notebooks_are_not_ignored():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(["git", "check-ignore", "--no-index", "-q",
                             "exercises/01_cuda_from_python/cuda_from_python.ipynb"], cwd=ROOT)
    assert result.returncode == 1


def test_readme_tells_students_and_instructors_what_they_need():
    readme = (ROOT / "README.md").read_text()
    for needed in ("## For students", "make lab", 'check("', "nbgrader submit", "nbgrader fetch_assignment",
                   "--exchange", "--student", "--secret-file", "grades.csv", "gradescope/", "Offline", "Colab",
                   "--Exchange.root=", "--allow-root", "autograder status", "**When grading failed.**",
                   "Three outcomes", "not gradable", "failed to grade", "interrupted: 3 of 40 graded"):
        assert needed in readme, f"the README does not mention {needed!r}"
    # --regrade is told where --cluster meets a class graded before, by either path.
    cluster = readme[readme.index("**Failures, resuming and the record.**"):readme.index("**While it runs**")]
    assert "--regrade" in cluster and "after a plain `grade`" in cluster
    # The export paths the README shows are the ones .gitignore covers.
    assert "--gradescope gradescope/" in readme and "--csv grades.csv" in readme


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                    reason="needs make and git")
def test_student_copy_has_no_solutions():
    import tarfile

    if subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("not a git checkout with a commit")
    result = subprocess.run(["make", "-s", "student-copy"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    with tarfile.open(ROOT / "dist" / "deep-learning-kernels-student.tar.gz") as archive:
        names = archive.getnames()
    top = {name.split("/")[1] for name in names if name.count("/") >= 1 and name.split("/")[1]}
    assert "solutions" not in top and "tests" not in top
    assert {"book", "kernels", "exercises", "autograder", "Makefile", "requirements.lock"} <= top
    assert "deep-learning-kernels/autograder/student.py" in names
    assert not any("BEGIN SOLUTION" in archive_text for archive_text in _texts(names))


def _texts(names):
    """The exercise notebooks of the student copy, as text."""
    import tarfile

    with tarfile.open(ROOT / "dist" / "deep-learning-kernels-student.tar.gz") as archive:
        for name in names:
            if name.endswith(".ipynb"):
                yield archive.extractfile(name).read().decode()


def test_every_chapter_with_exercises_says_how_to_open_them():
    for path in sorted((ROOT / "book").glob("*.md")):
        text = path.read_text()
        if "`exercises/0" in text:
            assert "make lab" in text, f"{path.name} names its exercises but not how to open them"
