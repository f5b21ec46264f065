"""check()'s profile comes from the sandboxed child, where the student's code runs: the grader keeps it only if it
reads back as a profile, cut to a size, and only in visible mode; it never scores it."""

from __future__ import annotations

from autograder.kernel_profile import MAX_ROWS, case_to_profile, checked_profile
from kernels.runtime.emulator.profiling import LaunchProfile, LaunchShape, LineCounts


def honest() -> dict:
    p = LaunchProfile("saxpy", LaunchShape((32, 1, 1), (256, 1, 1), 0), blocks_profiled=4)
    p.memory = [LineCounts(5, "y[i] = alpha * x[i] + y[i];", "global", "load", requests=64, lanes=2048,
                           bytes_per_lane=4, sectors=256, ideal_sectors=256, stride_bytes=4)]
    return p.as_dict()


def test_an_honest_profile_is_kept_as_it_is():
    assert checked_profile(honest()) == honest()


def test_a_forged_profile_that_does_not_read_back_is_dropped():
    forged = honest()
    forged["memory"] = [{"line": "<script>", "evil": True}]
    assert checked_profile(forged) is None
    assert checked_profile("line 5 is perfect") is None
    assert checked_profile({"kernel": "saxpy"}) is None


def test_a_profile_of_endless_rows_is_cut():
    flood = honest()
    flood["memory"] = flood["memory"] * (MAX_ROWS * 50)
    assert len(checked_profile(flood)["memory"]) == MAX_ROWS


def test_the_largest_visible_case_is_profiled_and_none_when_not_asked():
    cases = [{"visible": True, "shape": {"n": 31}}, {"visible": True, "shape": {"n": 16513}},
             {"visible": False, "shape": {"n": 10 ** 6}}]
    assert case_to_profile(cases, True) == 1
    assert case_to_profile(cases, False) is None


def test_a_grading_child_does_not_profile_every_launch_whatever_the_grader_s_environment(monkeypatch, tmp_path):
    from autograder import isolation
    from kernels.runtime.emulator import profiling

    assert isolation.PROFILE_ENV == profiling.ENV_VAR
    monkeypatch.setenv(profiling.ENV_VAR, "all")
    monkeypatch.setenv("DLK_EMULATOR_CHECKS", "1")
    env = isolation._child_env(str(tmp_path), "cpu", 10.0, str(tmp_path))
    assert profiling.ENV_VAR not in env and env["DLK_EMULATOR_CHECKS"] == "1"
