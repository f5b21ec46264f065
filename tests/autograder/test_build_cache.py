"""The grader's build cache: one per student, verified on use, and no ballast left behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autograder import emulator_builds, sandbox
from autograder.isolation import _build_cache_dir, grade_submission
from autograder.submission import submission_from_cell

pytestmark = pytest.mark.backend

SECRET = b"build cache tests"
HONEST = (
    "%%cuda saxpy block=256\n"
    "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i * incy] = alpha * x[i * incx] + y[i * incy];\n"
    "}\n"
)
ZEROS = HONEST.replace("y[i * incy] = alpha * x[i * incx] + y[i * incy];", "y[i] = 0.0f;")


def _grade(cell: str, student: str):
    return grade_submission(submission_from_cell(cell), mode="hidden", student_key=SECRET, student_id=student, backend="cpu")


def _modules(student: str) -> list[Path]:
    return sorted(p for p in (Path(_build_cache_dir(student)) / "emulator").glob("module-*")
                  if not p.name.endswith((".sha256", ".tmp")))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLK_CACHE_DIR", str(tmp_path / "grader-cache"))
    return tmp_path / "grader-cache"


def test_each_student_builds_into_a_folder_of_their_own(cache):
    assert _build_cache_dir("alice") != _build_cache_dir("mallory")
    assert "alice" not in _build_cache_dir("alice")  # the folder name says nothing about who
    assert Path(_build_cache_dir("alice")).is_relative_to(cache)


def test_a_poisoned_cache_does_not_change_the_next_students_grade(cache):
    twin = _grade(HONEST, "alice")
    assert twin.status == "passed", twin.feedback_text()
    attack = _grade(ZEROS, "mallory")
    assert attack.score <= twin.score and attack.status != "passed"
    # The attack: mallory's (wrong) executable put under every name alice's builds have, and into
    # mallory's own folder under the names alice's source hashes to.
    wrong = _modules("mallory")[0]
    for module in _modules("alice"):
        shutil.copyfile(wrong, module)
        shutil.copyfile(wrong, Path(_build_cache_dir("mallory")) / "emulator" / module.name)
    again = _grade(HONEST, "alice")
    assert again.status == "passed", again.feedback_text()
    assert again.score == twin.score
    for module in _modules("alice"):  # rebuilt, not trusted
        assert module.read_bytes() != wrong.read_bytes()


def test_a_build_cannot_leave_ballast_behind(cache):
    ballast = HONEST.replace("__global__", "__device__ char ballast[96 << 20] = {1};\n__global__", 1).replace(
        "alpha * x[i] + y[i];", "alpha * x[i] + y[i] + ballast[i];")
    result = _grade(ballast, "ballast")
    twin = _grade(HONEST, "ballast_twin")
    assert result.status == "compile_error" and "more than 64 MB" in result.message, result.feedback_text()
    assert result.score == 0 <= twin.score
    assert max(p.stat().st_size for p in cache.rglob("*") if p.is_file()) < 32 * 2**20


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="the prebuilt runtime is given only to sandboxed gradings")
def test_a_sandboxed_grading_links_with_the_runtime_the_grader_built(cache):
    result = _grade(HONEST, "alice")
    assert result.status == "passed", result.feedback_text()
    own = sorted(p.name for p in (Path(_build_cache_dir("alice")) / "emulator").glob("runtime-*"))
    lent = sorted(p.name for p in Path(emulator_builds.built_folder() or "/nonexistent").glob("*"))
    assert _modules("alice") and not own, f"the grading built {own} itself; the runtime lent to it: {lent}"


def test_the_runtime_folders_of_ended_grading_processes_are_removed(tmp_path):
    gone, alive = tmp_path / f"prebuilt-{2**22 + 12345}-x1", tmp_path / f"prebuilt-{os.getpid()}-x2"
    for folder in (gone, alive):
        folder.mkdir()
        (folder / "runtime-0.o").write_bytes(b"built")
    emulator_builds._remove_orphans(tmp_path)
    assert not gone.exists() and alive.exists()


def test_the_runtime_is_built_with_the_compiler_the_grading_child_will_use(tmp_path, monkeypatch):
    """The grader's own $CXX is not passed to a grading child, which builds with its own default: the runtime
    lent to it is built as it would build it, whatever this process's $CXX says."""
    from autograder.isolation import _child_env

    monkeypatch.setattr(emulator_builds, "_folder", None)
    monkeypatch.setenv("CXX", "no-such-compiler")
    child_env = _child_env(str(tmp_path), "cpu", 60.0)
    assert "CXX" not in child_env
    folder = emulator_builds.folder(tmp_path / "grader-cache", child_env)
    assert folder and list(Path(folder).glob("runtime-*.o"))
