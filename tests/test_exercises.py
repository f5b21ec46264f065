"""Every chapter's graded exercises, end to end through the grader, from the chapter manifest.

For every exercise of every chapter (:data:`book.chapters.CHAPTERS`):

* the solution notebook's kernel gets every correctness point;
* every planted bug of ``tests/planted_bugs/<exercise>/`` is rejected for its
  planted reason, its feedback naming its cause in the words the bug records
  (every bug records them but those listed as not named yet), and every other
  correct way to write it is accepted (see tests/planted_corpus.py);
* the float64 reference is finite and bounded by the error scale on every
  shape (the scale is the size of the terms float32 rounding works on), and
  the shapes drawn from the grading secret differ per student.

Graded on the CPU emulator (make test), which finds every planted race and
out-of-bounds access; the GPU grading of the solutions is in
tests/autograder/test_solutions_on_gpu*.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from autograder.comparison import compare
from autograder.exercises import gemm_ladder, get_exercise, warp_shuffle
from autograder.isolation import grade_submission
from autograder.submission import submission_from_cell
from benchmarks import conv_as_gemm as gemm_bench, cuda_from_python as basics_bench, sgemm_bf16 as bf16_bench
from benchmarks.common import results_path
from book.chapters import CHAPTERS, chapter
from kernels.gemm import sgemm
from planted_corpus import (CORPUS, PlantedBugDoesNotApply, apply_edits, check_causes_recorded, check_corpus_complete,
                            check_corpus_file, check_solution_graded_end_to_end, check_solution_kernel, corpus,
                            corpus_files, read_corpus_file, solution_kernel)

EXERCISES = [name for chapter in CHAPTERS for name in chapter.exercises()]
WITH_CORPUS = [name for name in EXERCISES if (CORPUS / name).is_dir()]
#: Chapter 1's corpus is graded in tests/autograder/test_engine_kernels.py, on either backend (make test and
#: make test-gpu), with what a GPU must say about each bug besides.
GRADED_IN_ENGINE_TESTS = {"saxpy", "reduce_sum"}
#: The warm-up puzzles' corpora and solutions are graded in tests/test_puzzles.py, a file the test processes run beside
#: this one.  They are a line to a dozen lines each: two or three planted bugs each (a missing guard, a wrong index, a
#: missing barrier), where the chapters' exercises have five or more.
PUZZLES = set(chapter("puzzles").exercises())


@pytest.mark.parametrize("path", corpus([name for name in WITH_CORPUS if name not in GRADED_IN_ENGINE_TESTS | PUZZLES]))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


@pytest.mark.parametrize("name", [name for name in EXERCISES if name not in PUZZLES])
def test_the_solution_kernel_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


def test_every_exercise_has_a_solution_kernel_and_planted_bugs():
    assert set(EXERCISES) == set(WITH_CORPUS)
    assert GRADED_IN_ENGINE_TESTS <= set(EXERCISES)
    check_corpus_complete([name for name in WITH_CORPUS if name not in PUZZLES])
    check_corpus_complete(sorted(PUZZLES), minimum=2)


def test_every_planted_bug_records_the_words_that_name_its_cause():
    """Of every exercise, chapter 1's and the puzzles' too: the words are checked where each corpus is graded."""
    check_causes_recorded()


def test_the_words_of_a_cause_name_one_cause(tmp_path):
    (tmp_path / "saxpy").mkdir()
    path = tmp_path / "saxpy" / "hedged.edit"
    line = "        y[i * incy] = alpha * x[i * incx] + y[i * incy];\n"
    edit = f"<<<<<<< solution\n{line}=======\n{line}        y[0] = 0.0f;\n>>>>>>> planted bug\n"
    path.write_text("// Bug: y[0] zeroed.\n// Expect: rejected, race\n// Feedback: race|never written\n" + edit)
    with pytest.raises(AssertionError, match="offers several causes"):
        read_corpus_file(path)
    path.write_text("// Bug: y[0] zeroed.\n// Expect: rejected, race\n// Feedback: race on (global|shared) memory\n" + edit)
    assert read_corpus_file(path).feedback == "race on (global|shared) memory"


@pytest.mark.parametrize("name", WITH_CORPUS)
def test_planted_bugs_are_edits_of_the_solution_that_change_it(name):
    """Every planted bug is a .edit of the solution kernel (whole kernels are only other correct ways)."""
    solution_cell = solution_kernel(name)
    solution = solution_cell.source.rstrip("\n") + "\n"
    for path in corpus_files(name):
        kernel = read_corpus_file(path)
        assert (path.suffix == ".edit") == (not kernel.accepted), path
        if not kernel.accepted and "<<<<<<< solution" in path.read_text():
            assert kernel.submission.source != solution, f"{path.name} leaves the solution as it is"
        elif not kernel.accepted:  # a bug in the launch alone
            assert kernel.submission.launch != solution_cell.launch, f"{path.name} leaves the solution as it is"


def test_a_planted_bug_whose_edit_no_longer_applies_fails_naming_it():
    solution = "int i = blockIdx.x;\nout[i] = a[i];\n"
    edit = "<<<<<<< solution\nout[i] = a[i];\n=======\nout[i] = a[i + 1];\n>>>>>>> planted bug\n"
    assert apply_edits("demo/off_by_one", solution, edit) == "int i = blockIdx.x;\nout[i] = a[i + 1];\n"
    with pytest.raises(PlantedBugDoesNotApply, match=r"planted bug demo/off_by_one: its edit 1 of 1 no longer applies.*0 times"):
        apply_edits("demo/off_by_one", solution.replace("a[i]", "b[i]"), edit)
    with pytest.raises(PlantedBugDoesNotApply, match=r"demo/off_by_one.*2 times"):
        apply_edits("demo/off_by_one", solution + "out[i] = a[i];\n", edit)
    with pytest.raises(PlantedBugDoesNotApply, match=r"demo/off_by_one.*found other text"):
        apply_edits("demo/off_by_one", solution, "out[i] = a[i + 1];\n")


def test_a_planted_bug_that_changes_neither_kernel_nor_launch_fails_naming_it(tmp_path):
    (tmp_path / "saxpy").mkdir()
    path = tmp_path / "saxpy" / "nothing.edit"
    path.write_text("// Bug: none.\n// Expect: rejected, wrong_result\n")
    with pytest.raises(PlantedBugDoesNotApply, match=r"planted bug saxpy/nothing: no replacements and no launch"):
        read_corpus_file(path)
    path.write_text("// Bug: the launch alone.\n// Expect: rejected, wrong_result\n// Launch: %%cuda saxpy block=96\n")
    launch_only = read_corpus_file(path)
    assert launch_only.submission.launch == {"block": 96}
    assert launch_only.submission.source == solution_kernel("saxpy").source.rstrip("\n") + "\n"


@pytest.mark.parametrize("name", EXERCISES)
def test_references_are_finite_and_within_the_error_scale(name):
    exercise = get_exercise(name)
    rng = np.random.default_rng(0)
    for shape in [*exercise.visible_shapes, *exercise.hidden_shapes]:
        inputs = exercise.make_inputs(shape, rng)
        expected = exercise.reference(inputs)
        scale = exercise.error_scale(inputs)
        for arg in exercise.outputs:
            value = np.asarray(expected[arg.name], np.float64)
            assert np.isfinite(value).all(), (name, shape)
            bound = np.broadcast_to(np.asarray(scale[arg.name], np.float64), value.shape)
            assert np.all(np.abs(value) <= bound * (1 + 1e-12)), (name, shape)


@pytest.mark.parametrize("name", EXERCISES)
def test_secret_shapes_differ_per_student(name):
    exercise = get_exercise(name)
    launch = {key.name: key.default for key in exercise.launch_keys if isinstance(key.default, int)}
    launch.setdefault("block", 256)
    shapes = {str(exercise.secret_shapes(np.random.default_rng(seed), launch)) for seed in range(8)}
    assert len(shapes) > 1


@pytest.mark.parametrize("assignment", [a for c in CHAPTERS if c.graded_end_to_end for a in c.assignments],
                         ids=lambda a: a.assignment)
def test_solution_notebook_is_graded_end_to_end(tmp_path, assignment):
    check_solution_graded_end_to_end(tmp_path, assignment.assignment, assignment.notebook, assignment.exercises())


# ------------------------------------------------------------------ what particular exercises must cover


@pytest.mark.parametrize("name", ["conv2d_forward", "conv2d_forward_tiled", "max_pool_forward", "conv2d_backward_input"])
def test_convolution_hidden_shapes_cover_the_hard_cases(name):
    """Batch 1, odd sizes, and channel / map counts that are no multiple of a tile or of 8."""
    shapes = list(get_exercise(name).hidden_shapes)
    assert any(s["N"] == 1 for s in shapes)
    assert any(s["H"] % 2 and s["W"] % 2 for s in shapes)
    assert any(s["C"] % 8 and s["C"] > 8 for s in shapes)
    if "M" in shapes[0]:
        assert any(s["M"] % 8 and s["M"] > 8 for s in shapes)
        assert any(s["H"] - s["K"] + 1 > 16 for s in shapes)  # more than one tile


def test_gemm_hidden_shapes_cover_the_hard_cases():
    """Sizes that are no multiple of any tile, skinny matrices, padding, strides and dilations, ranges not starting at
    0, and every kind of epilogue (alpha 1 and beta 0, beta 0 with C unset, beta 1, others)."""
    gemm = get_exercise("sgemm_tiled").hidden_shapes
    assert any(s["M"] == 1 for s in gemm) and any(s["N"] == 1 for s in gemm) and any(s["K"] == 1 for s in gemm)
    assert any(s["M"] % 32 and s["N"] % 32 and s["K"] % 32 and min(s["M"], s["N"], s["K"]) > 32 for s in gemm)
    assert any(max(s["M"], s["N"]) >= 100 * min(s["M"], s["N"]) for s in gemm)  # skinny
    epilogues = {(s["alpha"] == 1, s["beta"]) for s in gemm}
    assert {(True, 0.0), (False, 0.0), (True, 1.0)} <= epilogues and any(b not in (0.0, 1.0) for _, b in epilogues)
    unroll = get_exercise("im2col").hidden_shapes
    assert any(s["stride"] > 1 for s in unroll) and any(s["pad"] > 0 for s in unroll) and any(s["n0"] > 0 for s in unroll)
    assert any(s["C"] % 8 and s["C"] > 8 for s in unroll)
    conv = get_exercise("conv2d_gemm_forward").hidden_shapes
    assert any(s["M"] > 64 and s["M"] % 32 for s in conv) and any(s["N"] == 1 for s in conv)
    assert any(s["dilation"] > 1 and s["pad"] > 0 and s["stride"] > 1 for s in conv)
    assert any(s["K"] == 1 and s["dilation"] > 1 for s in conv)  # a 1x1 filter: the dilation changes nothing


def _recorded_fractions() -> dict[str, float]:
    """Each GEMM ladder exercise's reference kernel as a fraction of cuBLAS at 4096³, from the results files: versions
    5 and 6 in the ladder's group, version 7 in its default tiles (the tile search's row), version 12 against cuBLAS
    BF16 in the same run."""
    gemm = json.loads(results_path(gemm_bench.NAME).read_text())["results"]
    ladder = {r["name"]: r["percent_of_cublas"] for r in gemm if r["group"] == gemm_bench.SGEMM}
    (warptile,) = [r["percent_of_cublas"] for r in gemm if r["group"] == gemm_bench.SGEMM_SEARCH
                   and r.get("config") == sgemm.WARPTILE_DEFAULT]
    bf16 = json.loads(results_path(bf16_bench.NAME).read_text())["results"]
    (wmma,) = [r["percent_of_cublas"] for r in bf16 if r["group"] == bf16_bench.square(gemm_ladder.TIMING_SIZE)
               and r.get("kernel") == bf16_bench.WMMA]
    fractions = {"sgemm_blocktile_2d": ladder[sgemm.KERNELS["sgemm_blocktile_2d"].key],
                 "sgemm_vectorized": ladder[sgemm.KERNELS["sgemm_vectorized"].key],
                 "sgemm_warptile": warptile, "sgemm_bf16_wmma": wmma}
    return {kernel: percent / 100 for kernel, percent in fractions.items()}


def test_gemm_ladder_speed_bands_follow_the_recorded_fractions_of_cublas():
    """The upper rungs' bands are fractions of cuBLAS's speed turned into speed-ups over each reference kernel
    through its recorded fraction: those fractions are the results files' (measured at the exercises' timing size),
    and every exercise is banded through its own reference's."""
    recorded = _recorded_fractions()
    assert gemm_bench.GEMM_SIZE == gemm_ladder.TIMING_SIZE
    for kernel, fraction in gemm_ladder.FRACTION_OF_CUBLAS.items():
        assert fraction == pytest.approx(recorded[kernel], abs=0.0015), kernel
    for exercise in gemm_ladder.EXERCISES:
        kernel = exercise.reference_kernel.kernel
        assert exercise.timing_shape["M"] == exercise.timing_shape["N"] == exercise.timing_shape["K"] == gemm_ladder.TIMING_SIZE
        assert all(lower[0] < higher[0] for higher, lower in zip(exercise.speed_bands, exercise.speed_bands[1:]))
        assert f"{kernel} at M = N = K = {gemm_ladder.TIMING_SIZE}" in exercise.description
        assert f"{gemm_ladder.FRACTION_OF_CUBLAS[kernel]:.1%}" in exercise.description


def test_gemm_ladder_hidden_shapes_cover_the_hard_cases():
    """Each extra at every value, the chapter's case among them, and sizes no vector load or tile divides."""
    def hidden(name):
        return get_exercise(name).hidden_shapes

    assert {s["epilogue"] for s in hidden("sgemm_register_tiles")} >= {0, 1, 3}
    assert {s["trans_b"] for s in hidden("sgemm_float4")} == {0, 1}
    assert any(s["K"] % 4 and s["trans_b"] for s in hidden("sgemm_float4"))
    assert any(s["N"] % 4 and not s["trans_b"] for s in hidden("sgemm_float4"))
    assert {s["batch"] for s in hidden("sgemm_warp_tiles")} >= {1, 2, 3} and any(s["K"] > 2 * 16 for s in hidden("sgemm_warp_tiles"))
    wmma = hidden("gemm_bf16_wmma")
    assert any(s["alpha"] == 1 and s["beta"] == 0 for s in wmma) and any(s["beta"] == 1 for s in wmma)
    assert any(s["K"] % 8 == 0 for s in wmma) and any(s["K"] % 8 for s in wmma) and any(s["K"] > 32 for s in wmma)
    strided = hidden("sgemm_cp_async")
    assert any(s["pad_b"] % 4 == 0 and s["N"] % 4 for s in strided) and any(s["pad_b"] % 4 for s in strided)
    assert all(any(s[pad] for s in strided) for pad in ("pad_a", "pad_b", "pad_c"))
    for name in ("sgemm_register_tiles", "sgemm_float4", "sgemm_warp_tiles", "sgemm_cp_async"):
        shapes = hidden(name)
        assert any(s["M"] == 1 for s in shapes) and any(s["K"] == 1 for s in shapes) and any(s["M"] > 256 for s in shapes)


def test_the_warp_shuffle_bands_follow_the_recorded_fraction_of_the_bandwidth_bound():
    """The block reduction's bands are fractions of its memory-bandwidth bound turned into speed-ups over the chapter's
    shuffle kernel through that kernel's recorded fraction of its own bound (x alone: half the exercise's bytes), at
    about the exercise's timing size."""
    recorded = json.loads(results_path(basics_bench.NAME).read_text())
    exercise = warp_shuffle.DOT_SHUFFLE
    assert abs(recorded[basics_bench.SIZE] - exercise.timing_shape["n"]) < 8
    percent = {r["name"]: r["percent_of_peak_bandwidth"] for r in recorded["results"]}
    for kernel, fraction in warp_shuffle.FRACTION_OF_BANDWIDTH.items():
        assert fraction == pytest.approx(percent[kernel] / 100, abs=0.0015), kernel
    reference = exercise.reference_kernel
    share = reference.version.bytes(exercise.timing_shape) / exercise.bytes_moved(exercise.timing_shape)
    assert share == pytest.approx(warp_shuffle.REFERENCE_BYTES_SHARE, rel=1e-6)
    assert exercise.speed_bands == warp_shuffle.SPEED_BANDS
    for (speedup, share_of_points), (fraction, bound_share) in zip(exercise.speed_bands, warp_shuffle.BOUND_BANDS):
        assert share_of_points == bound_share
        assert speedup * warp_shuffle.FRACTION_OF_BANDWIDTH[reference.kernel] / share == pytest.approx(fraction, abs=2e-3)
    assert f"{warp_shuffle.FRACTION_OF_BANDWIDTH[reference.kernel]:.1%}" in exercise.description


def test_the_block_reduction_asks_for_warp_shuffles():
    check = warp_shuffle.shuffles
    assert check("v += __shfl_down_sync(0xffffffffu, v, d);", "k") == ""
    assert check("v += __shfl_xor_sync(0xffffffffu, v, m);", "k") == ""
    assert check("v += tile.shfl_down(v, d);", "k") == ""
    refused = check("s[t] += s[t + d]; // v += __shfl_down_sync(0xffffffffu, v, d);", "dot_shuffle")
    assert "dot_shuffle must reduce inside each warp with warp shuffles" in refused


def test_the_cp_async_exercise_asks_for_asynchronous_copies():
    check = gemm_ladder.copies_asynchronously
    assert check("__pipeline_memcpy_async(&s[i], &g[i], 16);", "k") == ""
    assert check("cuda::memcpy_async(block, s, g, n, pipe);", "k") == ""
    refused = check("s[i] = g[i]; // __pipeline_memcpy_async(&s[i], &g[i], 4);", "sgemm_cp_async")
    assert "sgemm_cp_async must copy its tiles into shared memory with cp.async" in refused


def test_capsule_secret_shapes_differ_per_student_and_break_alignment():
    exercise = get_exercise("capsule_predict")
    shapes = [exercise.secret_shapes(np.random.default_rng(seed), {"block": 256})[0] for seed in range(20)]
    assert len({tuple(s.values()) for s in shapes}) > 10
    for s in shapes:
        assert (s["out_caps"] * s["out_dim"]) % 4 != 0


LSOFTMAX = ["lsoftmax_cos_mtheta", "lsoftmax_patch_logits", "lsoftmax_margin_grad_input"]


def test_lsoftmax_exercises_have_six_planted_bugs_each():
    check_corpus_complete(LSOFTMAX, minimum=6)


def test_lsoftmax_k_is_a_whole_number_the_grader_compares_exactly():
    """k's tolerance (rtol * k, k <= 6) is below 1: a wrong integer cannot pass; with an angular margin k reaches m."""
    exercise = get_exercise("lsoftmax_cos_mtheta")
    rng = np.random.default_rng(0)
    reached = set()
    for shape in [*exercise.visible_shapes, *exercise.hidden_shapes]:
        inputs = exercise.make_inputs(shape, rng)
        k = exercise.reference(inputs)["k_out"]
        assert np.all(k == np.round(k)) and k.min() >= 0 and k.max() <= shape["m"] - (shape["angle_margin"] == 0)
        reached.add(int(k.max()) == shape["m"])
        tolerance = exercise.atol + exercise.rtol * np.asarray(exercise.error_scale(inputs)["k_out"])
        assert np.all(tolerance < 1)
    assert True in reached


def test_lsoftmax_hidden_shapes_carry_margins_beyond_four_and_the_hard_cases():
    cos = get_exercise("lsoftmax_cos_mtheta")
    assert {5, 6} <= {s["m"] for s in cos.hidden_shapes}
    patch = get_exercise("lsoftmax_patch_logits")
    assert any(s["batch"] == 1 and s["classes"] == 1 for s in patch.hidden_shapes)
    assert any(s["lam"] > 0 for s in patch.hidden_shapes) and any(s["m"] > 4 for s in patch.hidden_shapes)
    grad = get_exercise("lsoftmax_margin_grad_input")
    assert any(s["dim"] == 1 for s in grad.hidden_shapes)  # cos(theta) = +-1 exactly
    a = grad.secret_shapes(np.random.default_rng(1), {})
    b = grad.secret_shapes(np.random.default_rng(2), {})
    assert a != b
    # the margins the chapter's kernels do not handle, on most hidden shapes, and the chapter's case on one
    for exercise, margin in ((cos, "angle_margin"), (patch, "angle_margin"), (grad, "cos_margin")):
        margins = [s[margin] for s in exercise.hidden_shapes]
        assert 0.0 in margins and sum(m > 0 for m in margins) >= len(margins) - 1


def test_row_hidden_shapes_cover_the_hard_cases():
    """Rows empty, of one score, shorter than a warp, longer than 128 per lane; scores that overflow expf unless the
    maximum is subtracted; LayerNorm rows whose mean is a thousand times their spread; earlier parts and masks."""
    soft = get_exercise("softmax_rows").hidden_shapes
    assert any(s["padded"] and s["n"] >= 3 for s in soft)  # an empty, a full and a one-score row
    assert any(s["c"] < 32 for s in soft) and any(s["c"] > 4096 for s in soft) and any(s["c"] % 32 for s in soft)
    assert any(s["shift"] / s["temperature"] > 88 or 10 / s["temperature"] > 88 for s in soft)
    assert {1.0} != {s["temperature"] for s in soft} and any(s["n"] == 1 for s in soft)
    norm = get_exercise("layernorm_residual").hidden_shapes
    assert any(s["offset"] >= 1000 and s["n"] >= 5 for s in norm) and any(s["c"] > 4096 for s in norm)
    assert any(s["c"] < 32 for s in norm) and sum(s["residual"] for s in norm) >= len(norm) - 1
    resume = get_exercise("online_softmax_resume").hidden_shapes
    assert any(s["earlier"] and s["masked"] and s["rows"] >= 3 for s in resume)
    assert any(s["cols"] < 32 for s in resume) and any(s["cols"] > 32 * 32 for s in resume)


@pytest.mark.parametrize("name", ["attention_forward_padded", "attention_forward_window"])
def test_attention_hidden_shapes_cover_the_hard_cases(name):
    """One position; lengths that end inside a tile; head dimensions that are no multiple of 16 (and small ones);
    both masks; padding down to one real key; windows narrower than a key tile and wider than a query tile."""
    shapes = get_exercise(name).hidden_shapes
    assert any(s["seq"] == 1 for s in shapes) and any(s["seq"] % 32 and s["seq"] > 64 for s in shapes)
    assert any(s["head_dim"] % 16 for s in shapes) and any(s["head_dim"] == 64 for s in shapes)
    assert {s["causal"] for s in shapes} == {0, 1}
    if name == "attention_forward_padded":
        assert any(s["padded"] and s["batch"] > 1 for s in shapes)  # a sequence with one real key
    else:
        windows = [s["window"] for s in shapes]
        assert any(0 < w < 32 for w in windows) and any(w > 64 for w in windows) and 0 in windows
        assert any(s["window"] and not s["causal"] for s in shapes)


# ------------------------------------------------------------------ index notation: %%tc cells


def test_a_tc_error_is_reported_at_the_cells_line():
    sub = submission_from_cell("%%tc tc_batched_matmul\ndef batched_matmul(float(B,M,K) X, float(B,K,N) Y) -> (Z) {\n"
                               "    Z(b,i,j) = X(b,i,k) * Y(b,k,j)\n}")
    result = grade_submission(sub, mode="visible")
    assert result.status == "compile_error"
    assert "line 3, column 22" in result.message and "+=!" in result.message


def test_a_tc_definitions_interface_is_checked():
    sub = submission_from_cell("%%tc tc_batched_matmul\ndef bmm(float(B,M,K) P, float(B,K,N) Q) -> (R) {\n"
                               "    R(b,i,j) +=! P(b,i,k) * Q(b,k,j)\n}")
    result = grade_submission(sub, mode="visible")
    assert result.status == "compile_error" and "inputs are P, Q, but the exercise gives X, Y" in result.message


def test_an_empty_tc_cell_says_what_to_write():
    sub = submission_from_cell("%%tc tc_avgpool2x2\n")
    result = grade_submission(sub, mode="visible")
    assert result.status == "not_written" and "'%%tc tc_avgpool2x2' cell is empty" in result.message


def test_index_notation_hidden_shapes_cover_the_hard_cases():
    pool = get_exercise("tc_avgpool2x2").hidden_shapes  # 3 x 3 windows at stride 2: odd sizes, and the smallest map
    assert any(s["H"] % 2 for s in pool) and any(min(s["H"], s["W"]) == 3 for s in pool)
    bmm = get_exercise("tc_batched_matmul").hidden_shapes
    assert any(min(s.values()) == 1 for s in bmm) and any(s["K"] == 1 for s in bmm)
    mv = get_exercise("mv_faster").hidden_shapes
    assert any(s["M"] % 8 for s in mv) and any(s["K"] == 1 for s in mv) and any(s["K"] > 4096 for s in mv)


@pytest.mark.parametrize("name", ["tc_batched_matmul", "tc_avgpool2x2", "tc_depthwise_conv", "tc_capsule_predict",
                                  "mv_faster"])
def test_index_notation_references_are_float64_and_nonzero(name):
    ex = get_exercise(name)
    inputs = ex.make_inputs(ex.visible_shapes[1], np.random.default_rng(0))
    for arg in ex.outputs:
        out = ex.reference(inputs)[arg.name]
        assert out.dtype == np.float64 and np.isfinite(out).all() and np.abs(out).max() > 1e-3


def test_tc_cell_magic_shows_ranges_or_the_error(capsys):
    from autograder.student import compile_tc_cell, submission

    compile_tc_cell("tc_avgpool2x2", "def avgpool2x2(float(N,C,H,W) X) -> (Y) {\n"
                    "    Y(n,c,i,j) +=! X(n,c,2 * i + u,2 * j + v) / 4 where u in 0:2, v in 0:2\n}")
    out = capsys.readouterr()
    assert "i in [0, floor((H - 2) / 2)]" in out.out and submission("tc_avgpool2x2") is not None
    compile_tc_cell("tc_avgpool2x2", "def avgpool2x2(float(N,C,H,W) X) -> (Y) {\n    Y(n,c,i,j) = X(n,c,i,k)\n}")
    out = capsys.readouterr()
    assert "line 3, column" in out.err and "no reduction operator" in out.err


#: the exercises whose reference kernel is a kernel of kernels/<part>/<topic>.cu (the index-notation ones are
#: generated from a definition: the generator is checked against NumPy in tests/test_comprehensions_kernels.py)
WITH_CHAPTER_REFERENCE = [name for name in EXERCISES
                          if get_exercise(name).reference_kernel is not None
                          and get_exercise(name).reference_kernel.source is None]


#: compile-time definitions that fix a size of the problem: the compiled reference serves only the shapes
#: of that size (the capsule kernels unroll over in_dim; the timing shape has the record's)
SIZE_DEFINES = {"CAPS_IN_DIM": "in_dim"}


@pytest.mark.backend
@pytest.mark.parametrize("name", WITH_CHAPTER_REFERENCE)
def test_the_reference_kernel_launched_as_its_record_says_solves_the_exercise(backend, name):
    """The chapter kernel speed is measured against, with the record's launch and argument order, passes
    the grader's comparison on every visible shape taken where it solves the exercise (``solves``: no
    padding, stride 1, ...; the timing shape is such a shape): the speed-up compares two kernels that do
    the same work."""
    exercise = get_exercise(name)
    reference = exercise.reference_kernel
    module = reference.compile(backend)
    params = module.signatures[reference.kernel].params
    order = reference.arg_order or tuple(arg.name for arg in exercise.args)
    roles = {arg.name: arg for arg in exercise.args}
    fixed = {SIZE_DEFINES[define]: value for define, value in reference.defines.items() if define in SIZE_DEFINES}
    # the visible shapes at the values where the chapter's kernel is the exercise's problem (no padding, ...)
    shapes = [{**shape, **reference.solves} for shape in exercise.visible_shapes
              if all(shape[k] == v for k, v in fixed.items())]
    assert shapes and all(exercise.timing_shape[k] == v for k, v in fixed.items())
    rng = np.random.default_rng(11)
    for shape in shapes:
        inputs = exercise.make_inputs(shape, rng)
        expected, scales = exercise.reference(inputs), exercise.error_scale(inputs)
        args, outputs = [], {}
        for arg_name, param in zip(order, params, strict=True):
            arg = roles[arg_name]
            if arg.role == "scalar":
                args.append(param.dtype.type(inputs[arg_name]))
                continue
            if arg.role == "out":  # written over a value no correct kernel leaves behind
                fill = 0 if arg.init == "zeros" else (np.nan if param.dtype.kind == "f" else -7)
                value = np.full(np.shape(expected[arg_name]), fill, param.dtype)
            else:
                value = np.array(inputs[arg_name], dtype=param.dtype)
            if arg.role != "in":
                outputs[arg_name] = value
            args.append(value)
        config = reference.launch(shape)
        module.function(reference.kernel)(*args, grid=config.grid, block=config.block, shared=config.shared)
        for arg_name, got in outputs.items():
            verdict = compare(got, expected[arg_name], scales[arg_name], exercise.rtol, exercise.atol)
            assert verdict["n_bad"] == 0, (name, exercise.shape_label(shape), arg_name,
                                           {k: verdict.get(k) for k in ("first_bad_index", "expected", "got")})
