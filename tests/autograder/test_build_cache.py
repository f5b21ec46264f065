"""The grader's builds: a grading's live in its own scratch space and go with it; no ballast is left behind.

A student's cache that outlived a grading was theirs to write (their code runs beside the grader's in the
sandbox), so its builds could be planted for a later submission of theirs to run, and it grew by a whole
budget at every grading.  Now nothing a grading builds is kept for another (a regrade builds again, in
seconds); ``check()`` on a student's own machine keeps its builds in a folder of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograder import emulator_builds, sandbox
from autograder.isolation import _check_cache_dir, _child_env, grade_submission
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
#: A constructor (it runs before the emulator's main()) that plants the wrong kernel's build under every build name
#: of the honest source it will find in its build cache, and a copy of itself under the names it makes up.
PLANTER = HONEST.replace("__global__", 'extern "C" int system(const char*);\n'
                         'struct Plant { Plant() { system("for f in $DLK_CACHE_DIR/emulator/module-*; do '
                         'cp -f /proc/self/exe $f 2>/dev/null; done; mkdir -p $DLK_CACHE_DIR/emulator; '
                         'for k in $(seq 1 50); do cp -f /proc/self/exe $DLK_CACHE_DIR/emulator/module-planted-$k; '
                         'done"); } } plant;\n__global__', 1).replace("y[i * incy] = alpha * x[i * incx] + y[i * incy];", "y[i] = 0.0f;")


def _grade(cell: str, student: str, mode: str = "hidden"):
    return grade_submission(submission_from_cell(cell), mode=mode, student_key=SECRET, student_id=student, backend="cpu")


def _kept(cache: Path) -> list[Path]:
    """Every file the grader's cache folder holds, but the runtime the grader builds itself (its prebuilt folders)."""
    return sorted(p for p in cache.rglob("*") if p.is_file() and not p.parent.name.startswith("prebuilt-"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLK_CACHE_DIR", str(tmp_path / "grader-cache"))
    return tmp_path / "grader-cache"


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="a grading's builds live in its sandbox's scratch space")
def test_nothing_a_grading_builds_outlives_it(cache):
    twin = _grade(HONEST, "alice")
    assert twin.status == "passed", twin.feedback_text()
    assert _kept(cache) == [], "a grading left builds in the grader's cache"


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="a grading's builds live in its sandbox's scratch space")
def test_builds_planted_by_a_submission_never_reach_a_later_grading(cache):
    """The planter's grading fails (its kernel writes zeros); what it planted dies with it, so the student's next,
    honest submission is graded on its own build, to the twin's score."""
    twin = _grade(HONEST, "twin")
    attack = _grade(PLANTER, "mallory")
    assert attack.status != "passed" and attack.score <= twin.score
    assert _kept(cache) == []
    again = _grade(HONEST, "mallory")
    assert again.status == "passed" and again.score == twin.score, again.feedback_text()


def test_a_build_cannot_leave_ballast_behind(cache):
    ballast = HONEST.replace("__global__", "__device__ char ballast[96 << 20] = {1};\n__global__", 1).replace(
        "alpha * x[i * incx] + y[i * incy];", "alpha * x[i * incx] + y[i * incy] + ballast[i];")
    assert "ballast[i]" in ballast
    result = _grade(ballast, "ballast")
    twin = _grade(HONEST, "ballast_twin")
    assert result.status == "compile_error" and "more than 64 MB" in result.message, result.feedback_text()
    assert result.score == 0 <= twin.score
    assert max((p.stat().st_size for p in cache.rglob("*") if p.is_file()), default=0) < 32 * 2**20


@pytest.mark.skipif(bool(sandbox.unavailable_reason()), reason="the prebuilt runtime is given only to sandboxed gradings")
def test_a_sandboxed_check_links_with_the_runtime_the_grader_built(cache):
    """check() keeps its builds (the student's own machine): they hold the kernel's module, not a runtime of their own."""
    result = _grade(HONEST, "alice", mode="visible")
    assert result.status == "passed", result.feedback_text()
    kept = Path(_check_cache_dir("visible")) / "emulator"
    own = sorted(p.name for p in kept.glob("runtime-*"))
    lent = sorted(p.name for p in Path(emulator_builds.built_folder() or "/nonexistent").glob("*"))
    modules = [p for p in kept.glob("module-*") if not p.name.endswith((".sha256", ".tmp"))]
    assert modules and not own, f"the check built {own} itself; the runtime lent to it: {lent}"


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

    monkeypatch.setattr(emulator_builds, "_folder", None)
    monkeypatch.setenv("CXX", "no-such-compiler")
    child_env = _child_env(str(tmp_path), "cpu", 60.0)
    assert "CXX" not in child_env
    folder = emulator_builds.folder(tmp_path / "grader-cache", child_env)
    assert folder and list(Path(folder).glob("runtime-*.o"))


def test_the_runtime_is_built_once_per_host_and_verified_before_it_is_lent(tmp_path, monkeypatch):
    """The next grading process (a new command, another worker) finds the runtime an earlier one built, and
    lends it without building it again; a copy whose bytes no longer match its record is built again first."""

    child_env = _child_env(str(tmp_path), "cpu", 60.0)
    monkeypatch.setattr(emulator_builds, "_folder", None)
    first = Path(emulator_builds.folder(tmp_path / "grader-cache", child_env))
    runtime = next(first.glob("runtime-*.o"))
    built = runtime.stat()
    monkeypatch.setattr(emulator_builds, "_folder", None)  # as in the next grading process
    emulator_builds.build._toolchain_for.cache_clear()
    assert Path(emulator_builds.folder(tmp_path / "grader-cache", child_env)) == first
    again = runtime.stat()
    assert (again.st_ino, again.st_mtime_ns) == (built.st_ino, built.st_mtime_ns), "built again"
    assert oct(again.st_mode & 0o777) == oct(0o644) and oct(first.stat().st_mode & 0o777) == oct(0o755)

    runtime.write_bytes(b"not the runtime")  # changed after it was built: never lent as it is
    monkeypatch.setattr(emulator_builds, "_folder", None)
    emulator_builds.build._toolchain_for.cache_clear()
    assert Path(emulator_builds.folder(tmp_path / "grader-cache", child_env)) == first
    rebuilt = next(first.glob("runtime-*.o"))
    assert rebuilt.read_bytes() != b"not the runtime"
    assert Path(f"{rebuilt}.sha256").read_text().strip() == emulator_builds.build._file_hash(rebuilt)


def test_a_runtime_folder_the_grader_does_not_own_is_not_lent(tmp_path, monkeypatch):
    """A folder of that name made by anyone else might hold builds they wrote: the child then builds its own."""

    if os.getuid() != 0:
        pytest.skip("making a folder owned by another uid needs root")
    cache = tmp_path / "grader-cache"
    (cache / emulator_builds.HOST_FOLDER).mkdir(parents=True)
    os.chown(cache / emulator_builds.HOST_FOLDER, 4242, 4242)
    monkeypatch.setattr(emulator_builds, "_folder", None)
    assert emulator_builds.folder(cache, _child_env(str(tmp_path), "cpu", 60.0)) is None
