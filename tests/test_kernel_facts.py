"""Every topic states its kernels' facts once (``KERNELS``), and everything else asks that record.

* Every ``kernels/<part>/<topic>.cu`` has a ``kernels/<part>/<topic>.py`` whose ``KERNELS``
  maps CUDA names to :class:`KernelVersion` records of ``__global__``
  functions that exist in the source, with a launcher of that module; every
  ``__global__`` function has one.
* A version's number, title and key are written in its record only: the rungs
  run 1, 2, ... in teaching order, no topic module declares ``VERSIONS`` or
  ``LAUNCHERS`` by hand, each record's section of the ``.cu`` is found by the
  kernel's name, and where the ``.cu`` numbers a kernel in its comments it
  says the record's number.
* The grader's reference kernels, flop and byte counts are those records.
* A record's ``launch(shape)`` is what its launcher really launches: the
  launchers are run on small inputs and their launches recorded.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

from autograder.exercises import all_exercises
from kernels.runtime.signature import parse_kernels
from kernels.runtime.sources import function_lines, source_path, topic_module, topic_sources
from kernels.runtime.versions import KernelVersion, LaunchConfig, kernel_table, ladder, rung, versions
from book import ladders
from book.chapters import chapter
from kernels.basics import reduction

TOPICS = sorted(topic_sources())


def _exercises():
    found = all_exercises()
    return list(found.values()) if isinstance(found, dict) else list(found)


def _declared(topic, table) -> dict:
    """The ``__global__`` functions of the topic's file as its records compile it: a kernel written for one
    architecture only (under ``DLK_ARCH_SPECIFIC``) is declared only with its record's defines."""
    text = source_path(topic).read_text()
    declared = {}
    for defines in {tuple(sorted(version.defines.items())) for version in table.values()}:
        declared.update(parse_kernels(text, f"{topic}.cu", dict(defines)))
    return declared


@pytest.mark.parametrize("topic", TOPICS)
def test_every_topic_declares_its_versions_as_records(topic):
    module = importlib.import_module(topic_module(topic))
    assert module.TOPIC == topic
    table = module.KERNELS
    assert isinstance(table, dict) and table, f"{module.__name__}: KERNELS is empty"
    declared = _declared(topic, table)
    for name, version in table.items():
        assert isinstance(version, KernelVersion)
        assert version.kernel == name and version.topic == topic
        assert name in declared, f"{topic}.{name} is not a __global__ function of {source_path(topic).name}"
        launcher = getattr(version.launcher, "func", version.launcher)  # functools.partial: its function
        assert launcher.__module__ == module.__name__, f"{topic}.{name}: the launcher lives in {launcher.__module__}"
        for fact in (version.launch, version.bytes, version.flops, version.reference):
            assert callable(fact)


@pytest.mark.parametrize("topic", TOPICS)
def test_every_kernel_of_a_topic_has_a_record(topic):
    """Every ``__global__`` function has a record: a rung (a number) or, deliberately, a helper (None)."""
    table = importlib.import_module(topic_module(topic)).KERNELS
    declared = _declared(topic, table)
    missing = {name for name in declared if name not in table}
    assert not missing, f"{source_path(topic).name}: kernels without a record {sorted(missing)}"


def _record(kernel="k", **rung):
    return KernelVersion("t", kernel, print, print, print, print, print, **{"number": 1, "title": "a kernel", **rung})


def test_a_record_must_be_complete():
    with pytest.raises(TypeError, match="flops must be callable"):
        KernelVersion("t", "k", print, print, print, 3.0, print, number=1, title="a kernel")
    with pytest.raises(TypeError, match="number"):  # a rung or a helper is said, never left out
        KernelVersion("t", "k", print, print, print, print, print, title="a kernel")
    with pytest.raises(ValueError, match="give it a title"):
        _record(title=" ")
    with pytest.raises(ValueError, match="must be a rung 1, 2, ... or None"):
        _record(number=0)
    with pytest.raises(ValueError, match="a key names a rung"):
        _record(number=None, key="helper")


def test_the_rungs_run_one_two_three_in_teaching_order():
    table = kernel_table(_record("a", key="first"), _record("h", number=None), _record("b", number=2, key="second"),
                         _record("b2", number=2))
    assert [v.kernel for v in ladder(table)] == ["a", "b"] and list(versions(table)) == ["first", "second"]
    assert rung(table, "second").kernel == "b"
    with pytest.raises(KeyError, match="no version 'third'; its versions are first, second"):
        rung(table, "third")
    with pytest.raises(ValueError, match="is rung 3, after rung 1"):
        kernel_table(_record("a"), _record("c", number=3))
    with pytest.raises(ValueError, match="is rung 1, after rung 2"):
        kernel_table(_record("a"), _record("b", number=2), _record("c", number=1))
    with pytest.raises(ValueError, match="key 'x' is taken"):
        kernel_table(_record("a", key="x"), _record("b", number=2, key="x"))
    with pytest.raises(ValueError, match="on a second kernel of its rung"):
        kernel_table(_record("a", key="x"), _record("b", key="y"))
    with pytest.raises(ValueError, match="listed twice"):
        kernel_table(_record("a"), _record("a", number=2))
    # a ladder that goes on from another topic's starts after its last rung
    assert [v.number for v in ladder(kernel_table(_record("d", number=3), continues=table))] == [3]
    with pytest.raises(ValueError, match="is rung 2, after rung 2"):  # no sharing the other topic's last rung
        kernel_table(_record("d", number=2), continues=table)
    # a ladder that alternates between two files skips, in each, the rungs the other holds, and only those
    assert [v.number for v in ladder(kernel_table(_record("a"), _record("e", number=3), taught_elsewhere=(2,)))] == [1, 3]
    assert [v.number for v in ladder(kernel_table(_record("e", number=3), taught_elsewhere=(1, 2)))] == [3]
    with pytest.raises(ValueError, match="is rung 4, after rung 2"):
        kernel_table(_record("a"), _record("e", number=4), taught_elsewhere=(2,))


@pytest.mark.parametrize("topic", TOPICS)
def test_no_topic_module_lists_its_versions_by_hand(topic):
    """``VERSIONS``, ``LAUNCHERS`` and the like are gone: what chooses a version asks ``versions(KERNELS)``."""
    module = importlib.import_module(topic_module(topic))
    text = source_path(topic).with_suffix(".py").read_text()
    by_hand = re.findall(r"^(\w*(?:VERSIONS|LAUNCHERS)\w*)\s*=", text, re.M)
    assert not by_hand, f"{module.__name__} declares {by_hand}"
    assert not hasattr(module, "VERSIONS") and not hasattr(module, "LAUNCHERS")


def _defines_function(source: str, name: str) -> bool:
    try:
        function_lines(source, name)
    except KeyError:
        return False
    return True


@pytest.mark.parametrize("topic", TOPICS)
def test_every_record_finds_its_section_of_the_source_by_its_name(topic):
    """The section holds the kernel's own definition, and no other kernel's."""
    table = importlib.import_module(topic_module(topic)).KERNELS
    kernels = _declared(topic, table)
    for name, version in table.items():
        section = version.source
        definitions = [kernel for kernel in kernels if _defines_function(section, kernel)]
        assert definitions == [name], f"{topic}.{name}: the section defines {definitions}"
        assert version.source_file == f"kernels/{source_path(topic).parent.name}/{topic}.cu"


#: "// 3." or "// 1a." at the start of a comment line: the number the .cu gives a kernel or a version.
NUMBERED = re.compile(r"^//\s*(\d+)[a-z]?\.\s", re.M)
#: A line of the list of versions at the top of a .cu: "//   3. reduce_sum_warp_shuffle: ...".
LISTED = re.compile(r"^//\s+(\d+)\.\s+(\w+)", re.M)


@pytest.mark.parametrize("topic", TOPICS)
def test_the_numbers_in_the_cu_comments_are_the_records(topic):
    """The .cu keeps its numbered comments for the reader (its list of versions at the top, the comment that
    opens a kernel's section); they must say what the records say, or a renumbering has missed one."""
    table = importlib.import_module(topic_module(topic)).KERNELS
    source = source_path(topic).read_text()
    opening = source[: re.search(r"^(?!//)", source, re.M).start()]  # the file's opening comment block
    for number, name in LISTED.findall(opening):
        if name in table:
            assert table[name].number == int(number), f"{topic}.cu lists {name} as {number}"
    for name, version in table.items():
        section = version.source
        comment = section[: section.index("__global__")]
        said = NUMBERED.search(comment)
        if said:
            assert version.number == int(said.group(1)), f"{topic}.cu numbers {name} {said.group(1)}"


def test_the_chapters_count_the_versions_from_the_records():
    assert ladders.has_versions(reduction.KERNELS) == (
        f"`kernels/basics/reduction.cu` has {ladders.NUMBER_WORDS[len(ladder(reduction.KERNELS))]} versions")
    assert ladders.in_words(4) == "four" and ladders.in_words(13) == "13"


#: Exercises whose reference kernel computes a special case of them from fewer operands, so that their bytes are
#: their own: the dot product's reference is the chapter's sum by shuffles where every y is 1, which reads x alone.
READS_MORE_THAN_ITS_RECORD = {"dot_shuffle": "reads y besides x"}


@pytest.mark.parametrize("exercise", _exercises(), ids=lambda e: e.name)
def test_the_grader_asks_the_kernel_records(exercise):
    """The reference kernel, its launch, flops and bytes: one record of ``kernels/<part>/<topic>.py``.  Two kinds,
    graded for correctness alone, have none: an index-notation exercise (a kernel generated from its answer would
    spell that answer out to students, who are given every reference kernel) and a warm-up puzzle (too small for a
    time to mean anything; its reference is the NumPy line beside its thread map)."""
    reference = exercise.reference_kernel
    if exercise.language == "tc" and exercise.speed_points == 0:
        assert reference is None and exercise.flops(exercise.hidden_shapes[-1]) > 0
        return
    if exercise.name in chapter("puzzles").exercises():
        assert reference is None and exercise.speed_points == 0 and exercise.thread_map
        return
    assert reference is not None
    launcher = getattr(reference.version.launcher, "func", reference.version.launcher)
    record = importlib.import_module(launcher.__module__).KERNELS[reference.kernel]  # the generated kernels: no .cu
    assert reference.version is record
    if exercise.name in READS_MORE_THAN_ITS_RECORD:
        # its own cost, never below the record's: its physical floor is at least as strict as the reference's
        shape = exercise.timing_shape
        assert exercise.bytes_moved(shape) > record.bytes(shape) and exercise.flops(shape) >= record.flops(shape)
    else:
        assert exercise.flops is record.flops and exercise.bytes_moved is record.bytes
    # the record launches the chapter's kernel where it solves the exercise (a head dimension compiled in, ...)
    for shape in ({**shape, **reference.solves} for shape in (*exercise.visible_shapes, exercise.timing_shape)):
        config = reference.launch(shape)
        assert isinstance(config, LaunchConfig) and all(g >= 1 for g in config.grid)
        assert exercise.bytes_moved(shape) > 0 and exercise.flops(shape) >= 0


# ------------------------------------------------------------------ launches: record against launcher


def _f32(rng, *shape):
    return (rng.standard_normal(shape) + 0.5).astype(np.float32)


#: the capsule kernels' small problem: u (3, 2, 8), W (2, 3, 4, 8), u_hat and its gradient (3, 2, 3, 4)
CAPSULES = {"batch": 3, "in_caps": 2, "in_dim": 8, "out_caps": 3, "out_dim": 4}


def _capsule_case(topic, kernel, *tensors):
    """A capsule prediction kernel's case on ``CAPSULES``: its launcher gets the named tensors, in order."""
    batch, in_caps, in_dim, out_caps, out_dim = CAPSULES.values()
    dims = {"u": (batch, in_caps, in_dim), "W": (in_caps, out_caps, out_dim, in_dim),
            "du_hat": (batch, in_caps, out_caps, out_dim)}
    return topic, kernel, CAPSULES, lambda v, r: v.launcher(*[_f32(r, *dims[name]) for name in tensors])

#: the convolution kernels' small problems: X (2, 2, H, W) and 3 maps of 3 x 3 filters
CONV_20x19 = {"N": 2, "C": 2, "H": 20, "W": 19, "M": 3, "K": 3}
CONV_9x8 = {"N": 2, "C": 2, "H": 9, "W": 8, "M": 3, "K": 3}


def _conv_case(topic, kernel, shape, gives):
    """A convolution kernel's case: its launcher gets the tensors of the pass that ``gives`` the
    output ("forward"), or the gradient of the "input", "weight" or "bias", on a problem of ``shape``
    (valid convolution, stride 1)."""
    N, C, H, W, M, K = (shape[k] for k in "NCHWMK")
    x, w, dy = (N, C, H, W), (M, C, K, K), (N, M, H - K + 1, W - K + 1)
    arguments = {
        "forward": lambda r: (_f32(r, *x), _f32(r, *w), _f32(r, M)),
        "input": lambda r: (_f32(r, *dy), _f32(r, *w), x),
        "weight": lambda r: (_f32(r, *x), _f32(r, *dy), K),
        "bias": lambda r: (_f32(r, *dy),),
    }[gives]
    return topic, kernel, shape, lambda v, r: v.launcher(*arguments(r))


def _winograd_case(kernel):
    """One of Winograd's kernels, through conv2d_winograd on CONV_9x8 padded by 1 (3 x 3 tiles of 4 x 4)."""
    shape = {**CONV_9x8, "pad": 1}
    N, C, H, W, M, K = (shape[k] for k in "NCHWMK")
    return "conv2d_gemm", kernel, shape, lambda v, r: v.launcher(_f32(r, N, C, H, W), _f32(r, M, C, K, K), 1)


def _cases():
    """(topic, kernel, shape, run(rng)): a small problem of that shape through the record's own launcher."""
    return [
        ("saxpy", "saxpy_grid_stride", {"n": 3001},
         lambda v, r: v.launcher(2.0, _f32(r, 3001), _f32(r, 3001))),
        ("reduction", "reduce_sum_warp_shuffle", {"n": 3001}, lambda v, r: v.launcher(_f32(r, 3001))),
        ("reduction", "reduce_sum_shared_tree", {"n": 3001}, lambda v, r: v.launcher(_f32(r, 3001))),
        ("perceptron", "perceptron_forward_sigmoid", {"n": 300, "d": 3},
         lambda v, r: v.launcher(_f32(r, 300, 3), _f32(r, 4))),
        ("perceptron", "gradient_sum_tree", {"n": 300, "k": 3}, lambda v, r: v.launcher(_f32(r, 300, 3))),
        ("fully_connected", "fc_forward_matvec", {"n": 1, "in": 33, "out": 130},
         lambda v, r: v.launcher(_f32(r, 130, 33), _f32(r, 130), _f32(r, 33))),
        ("fully_connected", "fc_backward_bias", {"n": 5, "in": 33, "out": 130}, lambda v, r: v.launcher(_f32(r, 5, 130))),
        ("fully_connected", "fc_backward_input", {"n": 5, "in": 33, "out": 7},
         lambda v, r: v.launcher(_f32(r, 5, 7), _f32(r, 7, 33))),
        ("fully_connected", "fc_backward_weight", {"n": 5, "in": 33, "out": 7},
         lambda v, r: v.launcher(_f32(r, 5, 7), _f32(r, 5, 33))),
        _conv_case("conv2d", "conv2d_forward_tiled", CONV_20x19, "forward"),
        _conv_case("conv2d_backward", "conv2d_backward_input", CONV_20x19, "input"),
        _conv_case("conv2d_backward", "conv2d_backward_weight_naive", CONV_20x19, "weight"),
        _conv_case("conv2d_backward", "conv2d_backward_weight_reduce", CONV_20x19, "weight"),
        _conv_case("conv2d_backward", "conv2d_backward_bias", CONV_20x19, "bias"),
        _conv_case("conv2d_backward", "conv2d_backward_weight_bias_split",
                   {"N": 3, "C": 2, "H": 9, "W": 8, "M": 3, "K": 5}, "weight"),
        _conv_case("conv2d_backward", "conv2d_backward_bias_split", {"N": 3, "C": 1, "H": 5, "W": 4, "M": 3, "K": 1},
                   "bias"),
        _conv_case("conv2d_backward", "conv2d_backward_bias_planes", {"N": 3, "C": 1, "H": 6, "W": 4, "M": 3, "K": 1},
                   "bias"),
        _conv_case("conv2d_backward", "conv2d_backward_input_shared",
                   {"N": 2, "C": 2, "H": 20, "W": 19, "M": 3, "K": 5}, "input"),
        _conv_case("conv2d_backward", "conv2d_backward_input_fixed",
                   {"N": 2, "C": 2, "H": 20, "W": 19, "M": 3, "K": 5}, "input"),
        _conv_case("conv2d_backward", "conv2d_backward_flip_filters", CONV_9x8, "input"),
        _conv_case("conv2d_backward", "conv2d_backward_weight_gemm", CONV_9x8, "weight"),
        _conv_case("conv2d_backward", "conv2d_backward_split_sum", CONV_9x8, "weight"),
        _conv_case("conv2d", "conv2d_forward_register_tiled", CONV_20x19, "forward"),
        ("conv2d_gemm", "conv2d_implicit_gemm", {**CONV_20x19, "pad": 1, "stride": 2},
         lambda v, r: v.launcher(_f32(r, 2, 2, 20, 19), _f32(r, 3, 2, 3, 3), 1, 2)),
        *[_winograd_case(kernel) for kernel in ("conv2d_winograd_filters", "conv2d_winograd_inputs",
                                                "conv2d_winograd_gemm", "conv2d_winograd_outputs")],
        ("pooling", "max_pool_forward", {"N": 2, "C": 3, "H": 9, "W": 8, "pool": 2},
         lambda v, r: v.launcher(_f32(r, 2, 3, 9, 8), 2)),
        ("pooling", "subsample_bias_sigmoid_forward", {"N": 2, "C": 3, "H": 9, "W": 8, "pool": 2},
         lambda v, r: v.launcher(_f32(r, 2, 3, 9, 8), _f32(r, 3), 2)),
        ("pooling", "avg_pool_backward", {"N": 2, "C": 3, "H": 9, "W": 8, "pool": 2},
         lambda v, r: v.launcher(_f32(r, 2, 3, 4, 4), (2, 3, 9, 8), 2)),
        ("pooling", "max_pool_backward", {"N": 2, "C": 3, "H": 9, "W": 8, "pool": 2},
         lambda v, r: v.launcher(_f32(r, 2, 3, 9, 8), _f32(r, 2, 3, 4, 4), 2)),
        ("im2col", "im2col_unroll", {"N": 2, "C": 3, "H": 9, "W": 8, "K": 3, "pad": 1, "stride": 2, "count": 2},
         lambda v, r: v.launcher(_f32(r, 2, 3, 9, 8), 3, 1, 2)),
        ("sgemm", "sgemm_shared_tiled", {"M": 40, "N": 70, "K": 9},
         lambda v, r: v.launcher(_f32(r, 40, 9), _f32(r, 9, 70))),
        ("sgemm", "sgemm_splitk", {"M": 40, "N": 10, "K": 300},
         lambda v, r: v.launcher(_f32(r, 40, 300), _f32(r, 300, 10))),
        ("sgemm", "sgemm_splitk_sum", {"M": 40, "N": 10, "K": 300},
         lambda v, r: v.launcher(_f32(r, 40, 300), _f32(r, 300, 10))),
        ("sgemm", "matrix_transpose", {"rows": 30, "cols": 5}, lambda v, r: v.launcher(_f32(r, 30, 5))),
        *[_capsule_case("capsule_prediction", kernel, "u", "W")
          for kernel in ("capsule_predict_vectorized", "capsule_predict_naive", "capsule_predict_shared_input",
                         "capsule_predict_streaming")],
        ("capsule_routing", "squash_backward", {"batch": 3, "in_caps": 2, "out_caps": 5, "out_dim": 4},
         lambda v, r: v.launcher(_f32(r, 3, 5, 4), _f32(r, 3, 5, 4))),
        ("capsule_routing", "routing_weighted_sum_backward", {"batch": 3, "in_caps": 2, "out_caps": 5, "out_dim": 4},
         lambda v, r: v.launcher(_f32(r, 3, 2, 5), _f32(r, 3, 5, 4))),
        _capsule_case("capsule_prediction_backward", "capsule_grad_input_naive", "du_hat", "W"),
        _capsule_case("capsule_prediction_backward", "capsule_grad_weight_naive", "du_hat", "u"),
        _capsule_case("capsule_prediction_backward", "capsule_grad_fused", "du_hat", "W", "u"),
        _conv_case("conv2d", "conv2d_bias_act_pool_fused", CONV_9x8, "forward"),
        _capsule_case("capsule_prediction_backward", "capsule_grad_input_shared_weights", "du_hat", "W"),
        _capsule_case("capsule_prediction_backward", "capsule_grad_weight_register_blocked", "du_hat", "u"),
        ("layernorm", "layernorm_forward", {"n": 300, "c": 10},
         lambda v, r: v.launcher(_f32(r, 300, 10), _f32(r, 10), _f32(r, 10))),
        ("softmax", "softmax_cross_entropy_forward", {"n": 300, "c": 10},
         lambda v, r: v.launcher(_f32(r, 300, 10), r.integers(0, 10, 300).astype(np.int32))),
        ("lsoftmax", "lsoftmax_cos_mtheta", {"n": 3001, "m": 3}, lambda v, r: v.launcher(_f32(r, 3001) / 4, 3)),
        ("lsoftmax", "lsoftmax_patch_logits", {"batch": 30, "classes": 7},
         lambda v, r: v.launcher(_f32(r, 30, 7), r.integers(0, 7, 30).astype(np.int32), _f32(r, 30) + 2,
                                 _f32(r, 7) + 2, 2, 0.5)),
        ("lsoftmax", "lsoftmax_margin_grad_input", {"batch": 30, "dim": 5, "classes": 7},
         lambda v, r: v.launcher(_f32(r, 30), _f32(r, 30, 5), _f32(r, 7, 5), r.integers(0, 7, 30).astype(np.int32),
                                 2, 0.5)),
    ] + [
        # the large-margin softmax layer's kernels, each through the layer launcher that runs it
        ("lsoftmax", kernel, {"batch": 30, "classes": 7, "dim": 5}, _lsoftmax_run(launcher))
        for kernel, launcher in (("lsoftmax_copy_label_score", "caffe"), ("lsoftmax_blend_label_score", "caffe"),
                                 ("lsoftmax_backward_input_naive", "caffe_backward"),
                                 ("lsoftmax_backward_weight_naive", "caffe_backward"),
                                 ("lsoftmax_rescale_label_column", "factored_backward"),
                                 ("lsoftmax_add_scaled_rows", "factored_backward"),
                                 ("lsoftmax_class_sums", "factored_backward"),
                                 ("lsoftmax_transpose_add_scaled_rows", "factored_backward"),
                                 ("lsoftmax_fused_forward", "fused"), ("lsoftmax_fused_backward", "fused_backward"),
                                 ("lsoftmax_label_targets", "epilogue"), ("lsoftmax_gemm_margin_forward", "epilogue"),
                                 ("lsoftmax_combine_partials", "epilogue"), ("lsoftmax_mean_loss", "mean"))
    ] + [("lsoftmax", "lsoftmax_psi_values", {"n": 301, "m": 3}, lambda v, r: v.launcher(_f32(r, 301) / 4, 3))]


def _lsoftmax_run(which):
    """Run the layer launcher ``which`` of the large-margin softmax on N = 30, C = 7, D = 5."""

    def run(version, rng):
        from kernels.lsoftmax import lsoftmax as L

        N, C, D, m, lam = 30, 7, 5, 2, 0.5
        X, W, y = _f32(rng, N, D), _f32(rng, C, D), rng.integers(0, C, N).astype(np.int32)
        F = X @ W.T
        if which == "caffe":
            return L.forward_caffe(F, X, W, y, m, lam)
        if which in ("caffe_backward", "factored_backward"):
            _, saved = L.forward_caffe(F, X, W, y, m, lam)
            step = L.backward_naive if which == "caffe_backward" else L.backward_factored
            return step(_f32(rng, N, C), X, W, y, saved, m, lam)
        if which in ("fused", "fused_backward"):
            loss, stats = L.fused_forward(F, X, W, y, m, lam)
            return L.fused_backward(F, y, stats, np.full(N, 1 / N, np.float32), m, lam) if which != "fused" else loss
        if which == "epilogue":
            return L.gemm_margin_forward(X, W, y, m, lam)
        return L.mean_loss(_f32(rng, N)).get()

    return run


@pytest.mark.backend
@pytest.mark.parametrize("topic, kernel, shape, run", _cases(), ids=lambda c: c if isinstance(c, str) else None)
def test_the_record_launches_as_its_launcher_does(backend, launches, topic, kernel, shape, run):
    version = importlib.import_module(topic_module(topic)).KERNELS[kernel]
    run(version, np.random.default_rng(0))
    mine = [config for name, config in launches if name == kernel]
    assert mine, f"the launcher of {topic}.{kernel} did not launch it"
    assert mine[0] == version.launch(shape)
