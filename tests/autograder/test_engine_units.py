"""The grading engine's parts that need no backend: parsing, results, tolerances, seeds, the child process."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
import time

import ml_dtypes
import nbformat
import numpy as np
import pytest

from autograder import case_outputs, isolation, scratch_space
from autograder.diagnosis import diagnose, error_map
from autograder.comparison import compare
from autograder.exercise import LaunchConfig, LaunchError
from autograder.exercises import all_exercises, get_exercise
from autograder.exercises.cuda_from_python import summed_terms
from autograder.case_plan import derive_seed, plan_cases
from autograder.isolation import grade_submission
from autograder.nbgrader_bridge import CPU_GRADINGS_ENV, _overlapping_gradings, cpu_gradings
from autograder.result import ExerciseResult, ShapeResult
from autograder.submission import KernelSubmission, parse_magic_line, submission_from_cell, submissions_from_notebook

SAXPY_BODY = "__global__ void saxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {}\n"


# ------------------------------------------------------------------ submissions
def test_magic_line_gives_name_and_launch_integers():
    m = parse_magic_line("%%cuda saxpy block=256 grid=512")
    assert (m.exercise, m.launch, m.error) == ("saxpy", {"block": 256, "grid": 512}, "")


@pytest.mark.parametrize("line, fragment", [
    ("%%cuda saxpy block=abc", "key=integer"),
    ("%%cuda saxpy block=1 block=2", "twice"),
    ("%%cuda saxpy block=2**8", "key=integer"),
    ("%%cuda block=256", "exercise name"),
    ("%%cuda saxpy block=__import__('os')", "key=integer"),
])
def test_malformed_magic_lines_are_reported_not_evaluated(line, fragment):
    assert fragment in parse_magic_line(line).error


def test_notebook_is_read_statically_last_cell_wins(tmp_path):
    marker = tmp_path / "executed"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('x')"),
        nbformat.v4.new_code_cell("%%cuda saxpy block=128\n" + SAXPY_BODY),
        nbformat.v4.new_markdown_cell("%%cuda reduce_sum block=1\nnot code"),
        nbformat.v4.new_code_cell("\n%%cuda saxpy block=256 grid=7\n" + SAXPY_BODY),
        nbformat.v4.new_code_cell("%%cuda\n// scratch cell, not graded\n"),
        nbformat.v4.new_code_cell("%%cudax saxpy\n"),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    subs = submissions_from_notebook(path)
    assert not marker.exists()
    assert [s.exercise for s in subs] == ["saxpy"]
    sub = subs[0]
    assert sub.launch == {"block": 256, "grid": 7}
    assert sub.source == SAXPY_BODY
    assert sub.cell_line == 3 and sub.cell_index == 3
    # Padding puts the body at the cell's own line numbers.
    assert sub.compile_source().split("\n")[2] == SAXPY_BODY.split("\n")[0]
    assert submissions_from_notebook(nbformat.read(str(path), as_version=4)) == subs


# ------------------------------------------------------------------ results
def test_result_round_trips_through_json_with_nan_and_inf():
    r = ExerciseResult(
        exercise="saxpy", status="failed", correctness_score=2.5, correctness_max=6, speed_max=2,
        shapes=[ShapeResult(label="n=5", shape={"n": 5}, seed_index=0, visible=True, passed=False,
                            max_abs_err=float("inf"), max_rel_err=float("nan"), first_bad_index=[3],
                            expected=1.5, got=float("nan"), n_bad=1, n_total=5, output="y", hint="h",
                            error_map={"rows": [[0.0, 1.0]], "shape": [5]})],
        message="m", timing={"student_ms": 1.0, "speedup": float("inf")}, backend="cpu", device="emu",
    )
    text = r.to_json()
    json.loads(text)  # strict JSON: no bare NaN
    back = ExerciseResult.from_json(text)
    assert back.to_json() == text
    assert np.isnan(back.shapes[0].got) and np.isinf(back.shapes[0].max_abs_err)
    assert "expected 1.5, got nan" in back.feedback_text()


def test_missing_result_has_the_exercise_points():
    r = ExerciseResult.missing("saxpy")
    assert r.status == "missing" and r.score == 0
    assert r.max_score == get_exercise("saxpy").max_points
    assert "%%cuda saxpy" in r.feedback_text()


# ------------------------------------------------------------------ exercises
def test_exercises_are_discovered():
    assert {"saxpy", "reduce_sum"} <= set(all_exercises())


@pytest.mark.parametrize("name", sorted(all_exercises()))
def test_exercise_declares_enough_shapes_and_seeds(name):
    ex = get_exercise(name)
    sizes = [s for s, _ in ex.all_shapes("hidden")]
    assert len(sizes) >= 5 and len(ex.visible_shapes) >= 1 and len(ex.hidden_shapes) >= 1
    assert ex.hidden_seeds >= 3
    assert ex.secret_shapes is not None


@pytest.mark.parametrize("name", ["saxpy", "reduce_sum"])
def test_chapter_one_sizes(name):
    ns = [s["n"] for s, _ in get_exercise(name).all_shapes("hidden")]
    assert 1 in ns and 1000003 in ns and 2**20 + 1 in ns and 31 in ns


def _coarser_type(ex, output: str):
    """A type whose rounding the exercise's tolerance must reject: float16 (11 significant bits) for a float32
    output, float8 e5m2 (3) for a bfloat16 one (8)."""
    if ex.language == "cuda" and next(p for p in ex.declared_params if p.name == output).dtype.name == "bfloat16":
        return ml_dtypes.float8_e5m2
    return np.float16


@pytest.mark.parametrize("name", sorted(all_exercises()))
def test_tolerance_rejects_zeros_mean_and_float16_but_accepts_float32(name):
    """Authoring check: |expected| is far above the tolerance on every shape; float16 results fail (a coarser
    type's where the output is stored coarser than float16: BF16)."""
    ex = get_exercise(name)
    half_rejected, shapes = 0, 0
    for shape, _ in ex.all_shapes("hidden"):
        if int(np.prod([v for v in shape.values()])) > 300000:
            continue  # the same distribution; keeps the test quick
        for seed in range(3):
            inputs = ex.make_inputs(shape, np.random.default_rng(seed))
            expected = ex.reference(inputs)
            scale = ex.error_scale(inputs)
            shapes += 1
            rejected = False
            for out in ex.outputs:
                exp = np.asarray(expected[out.name])
                zeros = np.zeros(exp.shape, np.float32)
                mean = np.full(exp.shape, exp.mean(), np.float32)
                with np.errstate(over="ignore"):
                    half = exp.astype(_coarser_type(ex, out.name)).astype(np.float32)
                f32 = exp.astype(np.float32)
                assert compare(zeros, exp, scale[out.name], ex.rtol, ex.atol)["n_bad"] > 0, shape
                if exp.size > 4:
                    assert compare(mean, exp, scale[out.name], ex.rtol, ex.atol)["n_bad"] > 0, shape
                assert compare(f32, exp, scale[out.name], ex.rtol, ex.atol)["n_bad"] == 0, shape
                rejected |= compare(half, exp, scale[out.name], ex.rtol, ex.atol)["n_bad"] > 0
            half_rejected += rejected
    # One rounding of a single value can be lucky; over the cases it must not be.
    assert half_rejected >= 0.8 * shapes, (half_rejected, shapes)


def test_reduce_sum_tolerance_admits_a_sequential_float32_sum():
    ex = get_exercise("reduce_sum")
    inputs = ex.make_inputs({"n": 2**20 + 1, "incx": 3}, np.random.default_rng(3))
    sequential = np.cumsum(summed_terms(inputs), dtype=np.float32)[-1:]  # one atomicAdd per element, in order
    assert compare(sequential, ex.reference(inputs)["out"], ex.error_scale(inputs)["out"], ex.rtol, ex.atol)["n_bad"] == 0


def test_launch_validation():
    ex = get_exercise("saxpy")
    assert ex.validate_launch({"block": 1024, "grid": 2**31 - 1}) == {"block": 1024, "grid": 2**31 - 1}
    for bad in ({}, {"block": 0}, {"block": 1025}, {"block": 256, "grid": 0}, {"block": 256, "grid": 2**31},
                {"block": 256, "warp": 3}):
        with pytest.raises(LaunchError):
            ex.validate_launch(bad)
    resolved, config = get_exercise("reduce_sum").resolve_launch({"n": 1000}, {"block": 128})
    assert resolved == {"block": 128, "grid": 8, "shared": 512}
    assert config == LaunchConfig((8, 1, 1), (128, 1, 1), 512)


@pytest.mark.parametrize("launch, fragment", [
    ({"block": 0}, "between 1 and 1024"),
    ({"block": 2048}, "between 1 and 1024"),
    ({"block": 256, "grid": -1}, "grid=-1"),
    ({"grid": 4}, "required"),
    ({"block": 256, "tile": 4}, "unknown launch key"),
])
def test_out_of_range_launch_integers_give_invalid_launch(launch, fragment):
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, launch), mode="visible")
    assert r.status == "invalid_launch" and fragment in r.message
    assert r.score == 0 and r.max_score == get_exercise("saxpy").max_points


def test_unknown_exercise_and_unreadable_line_are_refused():
    assert grade_submission(KernelSubmission("nope", SAXPY_BODY, {"block": 1})).status == "invalid_launch"
    sub = submission_from_cell("%%cuda saxpy block=x\n" + SAXPY_BODY)
    r = grade_submission(sub)
    assert r.status == "invalid_launch" and "key=integer" in r.message


# ------------------------------------------------------------------ seeds and cases
def test_hidden_seeds_depend_on_secret_student_and_exercise():
    a = derive_seed(b"k1", "alice", "saxpy", 0, 0)
    assert a == derive_seed(b"k1", "alice", "saxpy", 0, 0)
    assert len({a, derive_seed(b"k2", "alice", "saxpy", 0, 0), derive_seed(b"k1", "bob", "saxpy", 0, 0),
                derive_seed(b"k1", "alice", "reduce_sum", 0, 0), derive_seed(b"k1", "alice", "saxpy", 0, 1)}) == 5


def test_hidden_plan_has_fresh_seeds_and_a_size_off_the_students_block():
    ex = get_exercise("saxpy")
    visible = plan_cases(ex, {"block": 96}, "visible", b"s", "alice")
    hidden = plan_cases(ex, {"block": 96}, "hidden", b"s", "alice")
    assert visible == plan_cases(ex, {"block": 96}, "visible", b"other", "bob")
    assert {c["seed"] for c in hidden if not c["visible"]}.isdisjoint({c["seed"] for c in visible})
    hidden_sizes = {c["shape"]["n"] for c in hidden if not c["visible"]}
    declared = {s["n"] for s in ex.visible_shapes + ex.hidden_shapes}
    secret = hidden_sizes - declared
    assert secret and all(n % 96 and n % 32 for n in secret)
    per_shape = {}
    for c in hidden:
        if not c["visible"]:
            per_shape[c["shape"]["n"]] = per_shape.get(c["shape"]["n"], 0) + 1
    assert min(per_shape.values()) >= 3


# ------------------------------------------------------------------ hints
def _cmp(got, exp):
    return compare(np.asarray(got, np.float32), np.asarray(exp, np.float64), np.abs(exp) + 1, 1e-5, 1e-30)


def test_hint_for_errors_in_the_last_partial_block():
    exp = np.arange(1, 1001, dtype=np.float64)
    got = exp.astype(np.float32).copy()
    got[990:] = np.nan
    c = _cmp(got, exp)
    hint = diagnose(c, got, exp, None, "nan", LaunchConfig((4, 1, 1), (256, 1, 1)), np.abs(exp) + 1)
    assert "never written" in hint and "bounds check" in hint


def test_a_2d_output_written_only_where_the_grid_covers_it_with_x_and_y_swapped_says_so():
    exp = np.arange(1, 33 * 20 + 1, dtype=np.float64).reshape(33, 20)  # 33 rows, 20 columns
    cfg = LaunchConfig((2, 3, 1), (16, 16, 1))  # x covers 32 columns, y 48 rows: all of it, laid as meant
    swapped = exp.astype(np.float32).copy()
    swapped[32:, :] = np.nan  # rows from x (32 of them), columns from y (48, all 20)
    hint = diagnose(_cmp(swapped, exp), swapped, exp, None, "nan", cfg, np.abs(exp) + 1)
    assert "never written" in hint and "are x and y swapped" in hint, hint
    elsewhere = exp.astype(np.float32).copy()
    elsewhere[:, 15:] = np.nan  # unwritten, but not where a swap of x and y leaves elements
    hint = diagnose(_cmp(elsewhere, exp), elsewhere, exp, None, "nan", cfg, np.abs(exp) + 1)
    assert "never written" in hint and "swapped" not in hint, hint


def test_hint_for_all_zeros_and_nan_and_small_errors():
    exp = np.arange(1, 101, dtype=np.float64)
    cfg = LaunchConfig((1, 1, 1), (128, 1, 1))
    zeros = np.zeros(100, np.float32)
    assert "0" in diagnose(_cmp(zeros, exp), zeros, exp, None, "nan", cfg, exp)
    nan = exp.astype(np.float32)
    nan[5] = np.nan
    assert "initialised" in diagnose(_cmp(nan, exp), nan, exp, None, None, cfg, exp)
    exp = np.linspace(1.1, 100.3, 100)
    half = exp.astype(np.float16).astype(np.float32)
    assert "half" in diagnose(_cmp(half, exp), half, exp, None, None, cfg, exp)


def test_small_errors_with_a_structure_are_not_called_half_precision():
    """Rounding to half precision reaches every row and is not proportional to the values: its twin, a 2-D output
    rounded to float16, keeps the hint; a few rows off by a little, or every value off by the same small factor,
    is a formula's mistake, and the hint says so instead of blaming the precision."""
    rng = np.random.default_rng(3)
    exp = rng.standard_normal((20, 64)) + 0.2
    cfg = LaunchConfig((1, 1, 1), (128, 1, 1))
    scale = np.abs(exp) + 1
    half = exp.astype(np.float16).astype(np.float32)
    assert "half precision" in diagnose(_cmp(half, exp), half, exp, None, None, cfg, scale)
    some_rows = exp.astype(np.float32)
    some_rows[[2, 9, 15]] *= np.float32(1.001)  # three of twenty rows a little off
    hint = diagnose(_cmp(some_rows, exp), some_rows, exp, None, None, cfg, scale)
    assert "half precision" not in hint and "3 of the 20 rows" in hint, hint
    scaled = (exp * 0.9995).astype(np.float32)  # every value 0.05 % too small
    hint = diagnose(_cmp(scaled, exp), scaled, exp, None, None, cfg, scale)
    assert "half precision" not in hint and "proportional to the values" in hint and "too small" in hint, hint


def test_small_errors_on_a_few_values_all_one_way_are_not_called_half_precision():
    """One row of seven values, too few for the row and correlation tests: rounded to float16, the errors take either
    sign and stay within one rounding (the hint stays); all seven too large by 0.4 % (a sum divided by a part of
    itself) is beyond one rounding and all one way, which rounding never is.  A single value cannot tell either way,
    and the hint says so."""
    exp = np.array([[0.31, 0.02, 0.11, 0.07, 0.25, 0.13, 0.11]])
    cfg = LaunchConfig((1, 1, 1), (32, 1, 1))
    half = exp.astype(np.float16).astype(np.float32)
    assert "half precision" in diagnose(_cmp(half, exp), half, exp, None, None, cfg, exp)
    too_large = (exp * 1.004).astype(np.float32)
    hint = diagnose(_cmp(too_large, exp), too_large, exp, None, None, cfg, exp)
    assert "half precision" not in hint and "all 7 wrong values are too large" in hint, hint
    one = np.array([15.3])
    off = (one * 0.9995).astype(np.float32)
    hint = diagnose(_cmp(off, one), off, one, None, None, cfg, one)
    assert "half precision" in hint and "one value cannot tell which" in hint, hint


def test_an_infinite_output_is_an_overflow_and_a_guard_sized_one_is_a_read_past_the_end():
    """inf (a sum of exponentials that overflowed) is larger than the guard value but never the guard itself."""
    exp = np.arange(1, 101, dtype=np.float64)
    cfg = LaunchConfig((1, 1, 1), (128, 1, 1))
    overflow = exp.astype(np.float32)
    overflow[7] = np.inf
    hint = diagnose(_cmp(overflow, exp), overflow, exp, None, "nan", cfg, exp)
    assert "overflow" in hint and "guard" not in hint
    guard = exp.astype(np.float32)
    guard[7] = np.float32(-7.0e33)
    assert "guard" in diagnose(_cmp(guard, exp), guard, exp, None, "nan", cfg, exp)


def test_hint_for_elements_past_the_first_grid_stride_pass():
    exp = np.arange(1, 5001, dtype=np.float64)
    got = exp.astype(np.float32)
    before = np.zeros(5000, np.float32)
    got[2048::7] = 0  # skipped elements beyond one pass of 2048 threads
    hint = diagnose(_cmp(got, exp), got, exp, before, None, LaunchConfig((8, 1, 1), (256, 1, 1)), exp)
    assert "grid-stride" in hint


def test_error_map_is_a_strip_for_1d_and_a_grid_for_2d():
    bad = np.zeros(1000, bool)
    bad[-10:] = True
    m = error_map(bad)
    assert len(m["rows"]) == 1 and m["rows"][0][-1] > 0 and m["rows"][0][0] == 0
    m2 = error_map(np.eye(100, dtype=bool))
    assert len(m2["rows"]) == 64 and len(m2["rows"][0]) == 64


# ------------------------------------------------------------------ the child process (no kernel needed)
#: What every grading child does first (autograder.grading_child): read the request, say it is ready, wait until
#: the grader holds its scratch space.  A stand-in child then runs with ``req`` defined.
_CHILD_START = """
import json, os, sys
req = json.loads(sys.stdin.buffer.readline())
os.write(req["result_fd"], (json.dumps(dict(nonce=req["nonce"], event="ready")) + "\\n").encode())
sys.stdin.buffer.read()
"""


def _fake_child(monkeypatch, code: str):
    """Replace the grading child by a small Python program (the parent's handling is what is tested)."""
    program = _CHILD_START + textwrap.dedent(code)
    monkeypatch.setattr(isolation, "_child_command", lambda: [sys.executable, "-I", "-c", program])


def test_a_hung_child_costs_only_its_time_limit(monkeypatch):
    _fake_child(monkeypatch, "import time\nwhile True: time.sleep(1)")
    start = time.monotonic()
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="visible", timeout_s=2)
    assert r.status == "timeout" and r.score == 0
    # The child sleeps for ever: that grading returns at all shows it was stopped.  The bound only says it was not
    # waited on past its limit by much more than a busy machine's start-up of the grading (a generous margin).
    assert time.monotonic() - start < 60
    assert "2 s" in r.message


def test_a_child_killed_by_a_signal_is_a_crash(monkeypatch):
    _fake_child(monkeypatch, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="visible", timeout_s=20)
    assert r.status == "crashed" and "SIGSEGV" in r.message


def test_a_child_using_too_much_memory_is_stopped(monkeypatch):
    _fake_child(monkeypatch, "import time\nx = bytearray(600 * 2**20)\nfor i in range(0, len(x), 4096): x[i] = 1\ntime.sleep(30)")
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="visible", timeout_s=20,
                         memory_limit=200 * 2**20)
    assert r.status == "crashed" and "memory" in r.message


def test_results_on_stdout_or_without_the_nonce_are_ignored(monkeypatch):
    forged = json.dumps({"event": "result", "result": {"exercise": "saxpy", "status": "passed", "correctness_score": 6}})
    _fake_child(monkeypatch, f"""
        import json, os, sys
        print({forged!r})                               # a kernel's printf
        os.write(req["result_fd"], ({forged!r} + "\\n").encode())   # no nonce
    """)
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="visible", timeout_s=20)
    assert r.status == "crashed" and r.score == 0


def test_child_environment_is_scrubbed(monkeypatch, tmp_path):
    monkeypatch.setenv("DLK_GRADER_SECRET", "top secret")
    monkeypatch.setenv("GRADEBOOK_URL", "sqlite:///gradebook.db")
    _fake_child(monkeypatch, """
        import json, os, sys
        print(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "files": os.listdir("."),
                          "request_keys": sorted(req)}))
    """)
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k", timeout_s=20)
    seen = json.loads(r.log.split("output:\n", 1)[-1] if "output:" in r.log else r.log)
    assert "DLK_GRADER_SECRET" not in seen["env"] and "GRADEBOOK_URL" not in seen["env"]
    assert "top secret" not in json.dumps(seen) and "k" not in seen["request_keys"]
    assert seen["files"] == [] and seen["cwd"] != os.getcwd()
    assert seen["env"]["DLK_EMULATOR_SANDBOX"] == "1"
    assert "secret" not in seen["request_keys"]


def test_the_endless_loop_limit_in_force_is_the_one_the_readme_states(monkeypatch):
    import re
    from pathlib import Path

    from autograder.isolation import EMULATOR_LAUNCH_LIMIT_S, launch_limit_s

    monkeypatch.delenv("DLK_EMULATOR_TIMEOUT", raising=False)
    ex = get_exercise("saxpy")
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    m = re.search(r"`DLK_EMULATOR_TIMEOUT` \(seconds per launch, default\s+(\d+);.*?after (\d+) s under `check\(\)` "
                  r"and after (\d+) s when grading", readme, re.S)
    assert m, "README no longer states the endless-loop limit"
    default, visible, hidden = (float(g) for g in m.groups())
    assert default == EMULATOR_LAUNCH_LIMIT_S
    assert launch_limit_s(ex.visible_time_limit_s) == visible
    assert launch_limit_s(ex.time_limit_s) == hidden


# ------------------------------------------------------------------ the verdict is the grader's
_FORGING_CHILD = """
import json, os, sys
sys.path[:0] = {path!r}  # the grader's own import path, as the real child gets it
if {write_arrays}:
    import numpy as np
    from autograder import case_outputs
    from autograder.exercises import get_exercise
    from autograder.verdict import case_data
    ex = get_exercise(req["exercise"])
    for i, c in enumerate(req["cases"]):
        _, pristine, expected, _ = case_data(ex, c["shape"], c["seed"])
        outputs = {{"y": np.asarray(expected["y"], dtype=np.float32)}}
        case_outputs.save(req["outputs_dir"], f"case-{{i}}", outputs, {{"x": pristine["x"]}})
shapes = [dict(label=str(c["shape"]), shape=c["shape"], seed_index=c["seed_index"], visible=c["visible"], passed=True)
          for c in req["cases"]]
result = dict(exercise="saxpy", status="passed", correctness_score=6, correctness_max=6, speed_score=2, speed_max=2,
              speed_measured=True, backend="gpu", device="H100", shapes=shapes,
              timing=dict(student_ms=1e-6, reference_ms=1.0, speedup=1e6, floor_ms=0.0, timed_inputs=dict(seed_a=1, seed_b=2, call_seed=3)))
os.write(req["result_fd"], (json.dumps(dict(nonce=req["nonce"], event="result", result=result)) + "\\n").encode())
"""


def _forging_child(monkeypatch, write_arrays: bool):
    _fake_child(monkeypatch, _FORGING_CHILD.format(path=isolation._import_path(), write_arrays=write_arrays))


def test_a_bfloat16_buffer_comes_back_as_the_numbers_it_holds(tmp_path):
    """np.save writes bfloat16 (ml_dtypes) as raw two-byte records: the grader reads them back as bfloat16, NaN and
    all, and still refuses a file of the wrong size."""
    values = np.array([1.5, -2.0, np.nan], dtype=ml_dtypes.bfloat16)
    case_outputs.save(tmp_path, "case-0", {"C": values})
    back = case_outputs.load(tmp_path, "case-0", "out", "C", 3)
    assert back.dtype == ml_dtypes.bfloat16 and np.array_equal(back.view(np.uint16), values.view(np.uint16))
    assert case_outputs.load(tmp_path, "case-0", "out", "C", 4) is None


def test_a_perfect_report_without_the_arrays_earns_nothing(monkeypatch):
    """A child that claims every case passed, full points and a million-fold speed-up, and hands back no arrays."""
    _forging_child(monkeypatch, write_arrays=False)
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k",
                         timeout_s=60, backend="cpu")
    assert r.score == 0 and r.status == "failed" and not r.speed_measured
    assert all(not s.passed and "could not read back" in s.error for s in r.shapes)


def test_the_grader_judges_the_arrays_itself_and_gives_speed_only_where_it_chose_the_gpu(monkeypatch):
    """The same report with right arrays: correctness from the grader's own comparison; the claimed GPU timing
    counts for nothing, because the grader chose the emulator."""
    _forging_child(monkeypatch, write_arrays=True)
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k",
                         timeout_s=60, backend="cpu")
    assert r.status == "passed" and r.correctness_score == r.correctness_max
    assert r.speed_score == 0 and not r.speed_measured


def test_grading_refuses_to_start_without_the_sandbox(monkeypatch, tmp_path, capsys):
    from autograder import sandbox

    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "no user namespaces here")
    with pytest.raises(sandbox.SandboxUnavailable, match="no user namespaces here"):
        grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k")
    from autograder.cli import main

    assert main(["grade", "01_cuda_from_python", "--course-dir", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert re.search("graded only inside the sandbox.*no user namespaces here", line), line


class _HostMemory:
    """Stands for a device allocation: ``get`` copies its bytes back, as a GPU buffer's does."""

    def __init__(self, data: np.ndarray):
        self.data, self.dtype, self.shape = data, data.dtype, data.shape

    def get(self) -> np.ndarray:
        return self.data.copy()


def test_gpu_guards_before_and_after_each_buffer_catch_writes_on_either_side(monkeypatch):
    """On a GPU the kernel gets the middle of an allocation with guard words on both sides; a write into
    either guard fails the case, naming the side and the buffer."""
    from types import SimpleNamespace

    from autograder.checker import GUARD_ELEMENTS, CaseRunner
    from autograder.comparison import CaseError
    from kernels.runtime.gpu import GPUBufferView

    runner = CaseRunner.__new__(CaseRunner)
    runner.guard = GUARD_ELEMENTS
    runner.backend = SimpleNamespace(name="gpu", to_device=lambda host: _HostMemory(host.copy()))
    # what the kernel is given: the data between the guards (here a NumPy view of the "allocation")
    monkeypatch.setattr(runner, "_view", lambda whole, size: whole.data[runner.guard: runner.guard + size])
    host = np.arange(10, dtype=np.float32)

    whole, given = runner._buffer(host)
    given[:] = host * 2  # a kernel writing exactly its own elements
    assert np.array_equal(runner._read(whole, host.size, "y"), host * 2)

    for offset, side in ((-1, "before the start of 'y'"), (host.size, "past the end of 'y'")):
        whole, given = runner._buffer(host)
        whole.data[runner.guard + offset] = 1.0  # y[-1] = 1 or y[n] = 1
        with pytest.raises(CaseError, match=side) as caught:
            runner._read(whole, host.size, "y")
        assert caught.value.status == "launch_error"
    for dtype in (np.int32, np.int8, np.float64):  # integer, narrow and wide guards too
        whole, _ = runner._buffer(np.zeros(3, dtype))
        whole.data[runner.guard - 1] = 7
        with pytest.raises(CaseError, match="before the start"):
            runner._read(whole, 3, "out")

    # the pointer the kernel gets: GUARD_ELEMENTS elements into the allocation, as aligned as it for vector loads
    base = SimpleNamespace(ptr=0x7F0000000000, dtype=np.dtype(np.float32), size=host.size + 2 * GUARD_ELEMENTS)
    view = GPUBufferView(base, GUARD_ELEMENTS, (host.size,))
    assert view.ptr == base.ptr + GUARD_ELEMENTS * 4 and view.ptr % 256 == 0 and view.size == host.size


_REPORTING_CHILD = """
import json, os, sys, time
def send(**msg):
    os.write(req["result_fd"], (json.dumps(dict(nonce=req["nonce"], **msg)) + "\\n").encode())
send(event="stage", stage="waiting_for_gpu")
time.sleep(4)
send(event="stage", stage="correctness")
send(event="result", result=dict(exercise="saxpy", status="failed"))
"""


@pytest.mark.parametrize("given_a_turn", [True, False], ids=["GPU grading", "no GPU lock given"])
def test_waiting_for_the_gpu_does_not_count_against_the_time_limit(monkeypatch, tmp_path, given_a_turn):
    """A child that waits 4 s for its turn on the card, under a 2 s limit, is not timed out; where the grader
    gave it no turn to wait for (the emulator), saying it waits changes nothing."""
    import tempfile

    from autograder.gpu_turn import GpuTurn

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the lock file is made
    _fake_child(monkeypatch, _REPORTING_CHILD)
    ex = get_exercise("saxpy")
    request = {"exercise": "saxpy", "source": SAXPY_BODY, "cell_line": 1, "launch": {"block": 256}, "mode": "hidden",
               "cases": [], "nonce": "n0nce"}
    turn = GpuTurn("hidden", "gpu") if given_a_turn else None
    r = isolation._run_child(ex, request, 2, "cpu", 2**30, lock=turn)
    assert (r.status == "timeout") is not given_a_turn, r.message


def test_a_child_takes_its_turn_on_the_gpu_and_the_next_one_waits_for_it(tmp_path):
    import threading

    from autograder.gpu_turn import take_gpu_turn

    path = tmp_path / "gpu.lock"
    first = os.open(path, os.O_RDWR | os.O_CREAT)
    said = []
    take_gpu_turn(first, lambda *a, **k: said.append(k))
    assert said == []  # the card was free: no wait to report
    second = os.open(path, os.O_RDWR)
    waiter = threading.Thread(target=take_gpu_turn, args=(second, lambda *a, **k: said.append(k)))
    waiter.start()
    waiter.join(1.0)
    assert waiter.is_alive() and said == [{"stage": "waiting_for_gpu"}]
    os.close(first)  # the first child ends
    waiter.join(5.0)
    assert not waiter.is_alive()
    os.close(second)


@pytest.mark.parametrize("backend, cores, overlapping", [("gpu", "1", 2), ("cpu", "1", 1), ("cpu", "2", 2),
                                                          ("cpu", "8", 2)])
def test_a_notebook_s_exercises_overlap_on_a_gpu_and_on_the_emulator_s_cores(monkeypatch, backend, cores,
                                                                              overlapping):
    """Two at a time on a GPU (one has the card while the next compiles); on the emulator, one per core the
    grading process may use, at most one per exercise."""

    monkeypatch.setenv("DLK_BACKEND", backend)
    monkeypatch.setenv(CPU_GRADINGS_ENV, cores)
    assert _overlapping_gradings(grade_submission, 2) == overlapping
    assert _overlapping_gradings(grade_submission, 1) == 1
    assert _overlapping_gradings(lambda sub, **kw: None, 2) == 1  # a stand-in grader: one at a time, in order


def test_without_a_share_of_cores_given_the_emulator_grades_on_the_cores_the_process_may_use(monkeypatch):

    for unset in ("", "none", "0", "-2"):
        monkeypatch.setenv(CPU_GRADINGS_ENV, unset)
        assert cpu_gradings() == len(os.sched_getaffinity(0))


def test_a_root_grader_without_an_id_for_the_sandbox_refuses_to_grade(monkeypatch):
    """As root, where no id but root's is mapped, the child would run as the machine's root: no grading."""
    import functools

    from autograder import sandbox

    monkeypatch.setattr(sandbox, "lease_ids", lambda: None)
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    # the answer is cached per process: ask afresh (the cached one is back after the test)
    monkeypatch.setattr(sandbox, "unavailable_reason", functools.lru_cache(maxsize=1)(sandbox.unavailable_reason.__wrapped__))
    reason = sandbox.unavailable_reason()
    assert "runs as root" in reason and "maps no id besides root's" in reason
    with pytest.raises(sandbox.SandboxUnavailable, match="runs as root"):
        grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k")


_WRITING_CHILD = """
import os, time
for i in range({files}):
    with open(f"ballast-{{i}}", "wb") as f:
        f.write(os.urandom(2**20))
time.sleep(3)
"""


@pytest.mark.parametrize("files, stopped", [(48, True), (4, False)], ids=["filling the disk", "honest twin"])
def test_a_grading_that_fills_its_scratch_directory_is_stopped(monkeypatch, files, stopped):
    """Files count against the grading's limit however many there are (each one under the file-size limit);
    the limit is lowered here to 16 MiB, so that the attack writes 48 MiB, not gigabytes.  In the sandbox the
    kernel refuses the writes past it (the scratch space is a tmpfs of that size); the grader says why."""

    monkeypatch.setattr(scratch_space, "SCRATCH_BYTES", 16 * 2**20)
    monkeypatch.setattr(isolation, "SCRATCH_POLL_S", 0.1)
    _fake_child(monkeypatch, _WRITING_CHILD.format(files=files))
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k",
                         timeout_s=20, student_id="writer")
    if stopped:
        assert r.status == "crashed" and r.score == 0
        assert "wrote more than it may (16 MiB of files" in r.message, r.message
    else:
        assert "of files" not in r.message, r.message


@pytest.mark.parametrize("entries, stopped", [(30_000, True), (40, False)], ids=["inodes", "honest twin"])
def test_a_grading_that_makes_many_empty_files_is_stopped(monkeypatch, entries, stopped):
    """Empty files and folders take no block, but an inode each (kernel memory): they count too."""
    monkeypatch.setattr(isolation, "SCRATCH_POLL_S", 0.1)
    _fake_child(monkeypatch, f"""
        import time
        for i in range({entries}):
            os.mkdir(f"empty-{{i}}")
        time.sleep(5)
    """)
    r = grade_submission(KernelSubmission("saxpy", SAXPY_BODY, {"block": 256}), mode="hidden", student_key=b"k",
                         timeout_s=30, student_id="inodes")
    assert ("files and folders" in r.message) is stopped, r.message
    assert r.score == 0


def test_gradings_of_one_student_at_the_same_time_share_the_student_s_build_cache():
    """A notebook's exercises are graded at once on a GPU, and both children write the student's build
    cache: the sandbox's uid belongs to the student (the cache's owner), not to one grading, so the second
    grading handing the cache over cannot lock the first one out of it."""
    import threading
    from pathlib import Path

    corpus = Path(__file__).parents[1] / "planted_bugs"
    cells = [(corpus / "saxpy" / "one_thread_per_element.cu").read_text().removeprefix("// "),
             (corpus / "reduce_sum" / "one_atomic_per_element.cu").read_text().removeprefix("// ")]
    results = {}

    def grade(cell: str) -> None:
        sub = submission_from_cell(cell)
        results[sub.exercise] = grade_submission(sub, mode="hidden", student_key=b"k", student_id="both-at-once",
                                                 timeout_s=120)

    for _ in range(2):  # the second time the student's cache exists, as it does for every later grading
        threads = [threading.Thread(target=grade, args=(cell,)) for cell in cells]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert {name: r.status for name, r in results.items()} == {"saxpy": "passed", "reduce_sum": "passed"}, \
            {name: r.message for name, r in results.items()}
