"""The chapters' prose says what the recorded figures show.

Sentences that state a measurement (how fast against the library, which device) are
written by ``book/prose.py`` from ``benchmarks/results/*.json`` and shown in the prose
with ``{glue:md}`name```. These tests check that each phrase follows the numbers (the
recorded ones, and altered ones that must change the words), that the chapters use the
phrases instead of the sentences the figures contradicted, and, when the book has been
built, that the built pages carry the phrases with the recorded numbers.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from benchmarks import attention as attention_bench
from book import prose
from book.speed_figures import SpeedFigures
from kernels import read_source
from kernels.models.lenet import CONV_LAYERS

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILT = ROOT / "_build" / "html" / "book"


def recorded(name: str) -> dict:
    data = SpeedFigures.recorded(name).data
    if data is None:
        pytest.skip(f"{name}.json has not been recorded (make bench on a GPU machine)")
    return data


def chapter(name: str) -> str:
    return (BOOK / f"{name}.md").read_text()


def prose_of(markdown: str) -> str:
    """A chapter's text without its code cells and front matter."""
    markdown = re.sub(r"^```\{code-cell\}.*?^```", "", markdown, flags=re.S | re.M)
    return re.sub(r"\A---\n.*?\n---\n", "", markdown, flags=re.S)


# --- phrases follow the numbers ---------------------------------------------------------------

def test_relative_speed_words():
    assert prose.relative_speed(100, 102) == "about the same speed as"
    assert prose.relative_speed(92, 109) == "84% of the speed of"
    assert prose.relative_speed(150, 100) == "1.5× the speed of"


def test_elementwise_phrase_follows_the_library_speeds():
    data = recorded("cuda_from_python")
    text = prose.elementwise_against_library(data)
    for group in ("vector_add", "saxpy", "copy"):
        assert f"`{group}`" in text
    ours = max(r["gbs"] for r in data["results"] if r["group"] == "vector_add" and r["kind"] == "kernel")
    peer = max(r["gbs"] for r in data["results"] if r["group"] == "vector_add" and r["kind"] == "peer")
    assert f"{ours:,.0f} against {peer:,.0f} GB/s" in text
    # Make the library as fast as ours: the words must change to say so.
    same = copy.deepcopy(data)
    for r in same["results"]:
        if r["kind"] == "peer" and r["group"] == "vector_add":
            r["gbs"] = ours
    assert "`vector_add` runs at about the same speed as" in prose.elementwise_against_library(same)


def test_sum_phrase_says_whether_ours_reach_the_libraries():
    data = recorded("cuda_from_python")
    text = prose.sum_against_library(data)
    ours = max(r["gbs"] for r in data["results"]
               if r["group"] == "reduce_sum" and r["kind"] == "kernel" and r["name"] != "reduce_sum_atomic")
    best_peer = max(r["gbs"] for r in data["results"] if r["group"] == "reduce_sum" and r["kind"] == "peer")
    if ours < 0.95 * best_peer:
        assert "not yet limited by reading `x`" in text
    else:
        assert "about as fast as the libraries" in text and "not yet limited" not in text
    for r in data["results"]:
        if r["group"] == "reduce_sum" and r["kind"] == "kernel" and r["name"] != "reduce_sum_atomic":
            assert f"`{r['name']}` {r['percent_of_peak_bandwidth']:.0f} %" in text
    faster = copy.deepcopy(data)
    for r in faster["results"]:
        if r["group"] == "reduce_sum" and r["kind"] == "kernel" and r["name"] != "reduce_sum_atomic":
            r["gbs"], r["percent_of_peak_bandwidth"] = best_peer, 95.0
    assert "about as fast as the libraries" in prose.sum_against_library(faster)


def test_roof_phrase_states_the_specification_the_best_copies_and_the_yardstick():
    data = recorded("cuda_from_python")
    text = prose.bandwidth_roof(data)
    assert "`copy_grid_stride_float4`'s" in text and f"{data['peaks']['bandwidth_gbs']:,.0f} GB/s" in text
    dram = prose.dram_bandwidth_gbs(data)
    assert f"by its specification, is {dram:,.0f} GB/s" in text and data["device"]["name"] in text
    copies = [r for r in data["results"] if r["group"] == "copy"]
    for kind in ("kernel", "peer"):
        best = max((r for r in copies if r["kind"] == kind), key=lambda r: r["gbs"])
        assert f"`{best['name']}`" in text and f"{best['gbs']:,.0f} GB/s ({best['gbs'] / dram:.0%}" in text
    beyond = [r for r in data["results"] if r.get("gbs") and r["gbs"] > data["peaks"]["bandwidth_gbs"] * 1.01]
    assert (f"{len(beyond)} of the rows go past it" in text) == bool(beyond)
    assert max(r["gbs"] for r in data["results"] if r.get("gbs")) < dram, "nothing measured passes the specification"


def test_block_sweep_phrase_computes_the_time_per_block_from_the_sweep():
    data = recorded("cuda_from_python")
    sweep = data["block_sweep"]
    text = prose.block_size_sweep(data)
    best = max(sweep, key=lambda r: r["gbs"])
    assert f"blocks of {best['block']} threads are the fastest, {best['gbs']:,.0f} GB/s" in text
    small = [r for r in sweep if r["block"] < best["block"]]
    per_block = [r["median_ms"] * 1e6 / r["blocks"] for r in small]
    if max(per_block) / min(per_block) < 1.05:
        assert f"the same {sum(per_block) / len(per_block):.2f} ns" in text
    # A sweep whose small blocks are limited by their bytes, not their count, must not be said to be.
    flat = copy.deepcopy(data)
    for r in flat["block_sweep"]:
        r["median_ms"] = best["median_ms"]
    assert "the same" not in prose.block_size_sweep(flat)


def test_versions_recorded_names_what_the_run_lacks():
    data = recorded("cuda_from_python")
    present = [r["name"] for r in data["results"] if r["group"] == "copy" and r["kind"] == "kernel"]
    assert "in the recorded run" in prose.versions_recorded(data, {"copy": present})
    text = prose.versions_recorded(data, {"copy": present + ["copy_of_the_future"]})
    assert "no row for `copy_of_the_future`" in text


def test_tree_sum_phrase_follows_the_sweep():
    data = recorded("perceptrons_mlp")
    text = prose.tree_sum_against_library(data)
    rows = [r for r in data["results"] if r["group"] == "gradient_sum_sweep"]
    big = max(r["n"] for r in rows)
    tree = next(r for r in rows if r["name"] == "gradient_sum_tree" and r["n"] == big)
    assert f"{tree['percent_of_peak_bandwidth']:.0f} % of the copy bandwidth" in text
    peer = next(r for r in rows if r["kind"] == "peer" and r["n"] == big)
    if peer["median_ms"] < tree["median_ms"]:
        assert f"is {tree['median_ms'] / peer['median_ms']:.2g}× faster" in text


def test_small_layer_phrase_gives_each_versions_speed():
    data = recorded("cnn")
    t = {r["name"]: r["median_ms"] for r in SpeedFigures.recorded("cnn").rows("forward", layer="LeNet C3")}
    text = prose.small_layer_versions(data)
    assert f"`constant` runs at {t['naive'] / t['constant']:.2f}×" in text
    assert f"`tiled` runs at {t['naive'] / t['tiled']:.2f}×" in text
    slower = copy.deepcopy(data)
    for r in slower["results"]:
        if r.get("layer") == "LeNet C3" and r["name"] == "constant":
            r["median_ms"] = 2 * t["naive"]
    assert "`constant` runs at 0.50×" in prose.small_layer_versions(slower)


def test_direct_convolution_phrase_names_the_faster_register_tiled_version():
    gemm, cnn = recorded("conv_as_gemm"), recorded("cnn")
    text = prose.direct_against_register_tiled(gemm, cnn)
    assert "`tiled_multimap`" in text and "`register_tiled`" in text
    main = SpeedFigures.recorded("conv_as_gemm").layers("conv")[0]
    t = {r["name"]: r["median_ms"] for r in SpeedFigures.recorded("conv_as_gemm").rows("conv", layer=main)
         if "median_ms" in r}
    implicit = min(ms for name, ms in t.items() if name.startswith("implicit_gemm"))
    assert f"{t['direct conv2d tiled_multimap'] / implicit:.1f}× slower than implicit GEMM" in text


def test_large_layer_phrase_gives_each_versions_speed_from_the_file():
    data = recorded("cnn")
    t = {r["name"]: r["median_ms"] for r in SpeedFigures.recorded("cnn").rows("forward", layer="large 56x56 C64 M64 3x3")
         if r.get("median_ms")}
    text = prose.small_layer_versions(data, "large 56x56 C64 M64 3x3", ("tiled", "register_tiled"))
    assert f"`tiled` runs at {t['naive'] / t['tiled']:.2f}×" in text
    assert f"`register_tiled` runs at {t['naive'] / t['register_tiled']:.2f}×" in text


def test_bias_gradient_phrase_quotes_the_share_of_its_own_run():
    for name in ("cnn_backward", "cnn_backward_h200"):
        data = SpeedFigures.recorded(name.split("_h200")[0], tag="h200" if "h200" in name else None).data
        if data is None:
            continue
        text = prose.bias_gradient_bandwidth(data)
        assert data["device"]["name"] in text
        for prefix in ("bias_split", "bias_planes"):
            r = next(r for r in data["results"] if r["name"] == f"{prefix} S=auto" and r["layer"].startswith("large"))
            assert f"`{prefix} S=auto` at {r['percent_of_peak_bandwidth']:.0f} % ({r['gbs']:,.0f} GB/s)" in text


def test_filter_bank_phrase_counts_from_the_layers():
    text = prose.filter_banks_in_constant_memory(CONV_LAYERS, 64 * 1024 // 4)
    assert text == "C1's 150 and C3's 2,400 floats fit; C5's 48,000 do not"
    assert "do not" not in prose.filter_banks_in_constant_memory(CONV_LAYERS, 10**6)


def test_gemm_chapter_phrases_compute_their_ratios_from_the_files():
    gemm, tensor = recorded("conv_as_gemm"), recorded("sgemm_tensor_cores")
    ladder = {r["name"]: r for r in gemm["results"] if r["group"] == "sgemm" and r["kind"] == "kernel"}
    span = prose.sgemm_ladder_span(gemm)
    assert (f"from {ladder['naive']['percent_of_cublas']:.2g} % of cuBLAS's speed" in span
            and f"to {ladder['warptile']['percent_of_cublas']:.0f} %" in span and gemm["device"]["name"] in span)
    errors = {(r["group"], r["name"]): r["max_error"] for r in tensor["results"] if r.get("max_error")}
    without = errors[("square 4096, no partial sums", "version 10 without float partial sums (H_PROMOTE=0)")]
    v10 = errors[("square 4096", "version 10: 3xTF32, wgmma")]
    fp32 = errors[("square 4096", "cuBLAS FP32 (TF32 off)")]
    text = prose.partial_sums_accuracy(tensor)
    assert f"{without / v10:.0f}× version 10's" in text and f"{without / fp32:.0f}× cuBLAS FP32's" in text
    ms = {(r["group"], r["name"]): r["median_ms"] for r in tensor["results"] if r.get("median_ms")}
    ratio = ms[("square 4096", "cuBLAS FP32 (TF32 off)")] / ms[("square 4096", "version 11: 3xTF32, wgmma fed by TMA")]
    assert f"version 11 at {ratio:.1f}×" in prose.tensor_cores_summary(tensor)
    kernels = prose.cudnn_kernels(gemm, "resnet 28x28 C128 M128 3x3")
    assert "fft2d_r2c_32x32" in kernels and "gemm_cf32cf32" in kernels


def test_capsule_phrases_quote_the_recorded_floor_and_step():
    data = recorded("capsules")
    summary = data["summary"]
    assert f"{summary['forward_floor_us']:.1f} µs" in prose.capsule_floor(data)
    assert f"{data['peaks']['bandwidth_gbs']:,.0f} GB/s" in prose.capsule_floor(data)
    words = prose.relative_speed(1 / summary["training_step_us"], 1 / summary["training_step_pure_pytorch_us"])
    assert f"the op's step runs at {words} the pure-PyTorch one" in prose.capsule_training_step(data)


def test_generation_phrase_sorts_wins_from_losses_by_the_file():
    data = recorded("index_notation")
    text = prose.generated_against_handwritten(data)
    for workload in dict.fromkeys(r["group"] for r in data["results"]):
        here = [r for r in data["results"] if r["group"] == workload and r.get("median_ms")]
        generated = next(r for r in here if r["name"] == "generated, autotuned")
        hand = min((r for r in here if r.get("source") == "handwritten"), key=lambda r: r["median_ms"])
        ratio = hand["median_ms"] / generated["median_ms"]
        expected = (f"{workload} ({ratio:.1f}× the speed of" if ratio >= 1.05 else
                    f"{workload} ({ratio:.0%} of the speed of" if ratio <= 0.95 else f"{workload} (about as fast")
        assert expected in text
        losses = text.split(" loses on ")[1] if " loses on " in text else ""
        assert (workload in losses) == (ratio <= 0.95)


def test_gemm_phrase_of_the_lsoftmax_chapter_follows_the_gemm_figures():
    data = recorded("conv_as_gemm")
    rates = {r["name"]: r["gflops"] for r in data["results"] if r["group"] == "sgemm"}
    text = prose.warptile_against_cublas(data)
    assert f"{rates['warptile'] / 1e3:,.1f} against {rates['cublas'] / 1e3:,.1f} TFLOP/s" in text
    assert data["device"]["name"] in text
    same = copy.deepcopy(data)
    for r in same["results"]:
        if r["group"] == "sgemm" and r["name"] == "warptile":
            r["gflops"] = rates["cublas"]
    assert "about the same speed as cuBLAS" in prose.warptile_against_cublas(same)
    assert "not been recorded" in prose.warptile_against_cublas({})


def test_capsule_backward_phrase_compares_each_gradient_with_torch():
    text = prose.capsule_backward_against_torch(recorded("capsules"))
    assert text.count("PyTorch's autograd") == 3
    t = {r["name"]: r["median_ms"] for r in recorded("capsules")["results"]}
    words = prose.relative_speed(1 / t["capsule_grad_input_shared_weights"], 1 / t["torch autograd du only"])
    assert f"`capsule_grad_input_shared_weights` runs at {words} PyTorch's autograd" in text


def test_training_step_phrase_follows_the_recorded_step():
    data = recorded("cnn_training_step")
    ours, peer = data["results"]
    text = prose.training_step_against_torch(data)
    words = prose.relative_speed(1 / ours["median_ms"], 1 / peer["median_ms"])
    assert f"the book's step runs at {words} PyTorch's" in text and "with the same loss on the first step" in text
    slower = copy.deepcopy(data)
    slower["results"][0].update(median_ms=peer["median_ms"] * 4, correct=False, launches=40)
    text = prose.training_step_against_torch(slower)
    assert "runs at 25% of the speed of PyTorch's" in text and "with a different loss" in text
    assert f"Its 40 launches take {peer['median_ms'] * 4e3 / 40:,.0f} µs of wall time each" in text


def _backward_data(old_us: float, new_us: float, torch_us: float) -> dict:
    """A results file of the backward group in the layout benchmarks/cnn.py writes: one layer, the weight gradient."""
    from benchmarks.cnn import backward_goals

    def row(name, kind, gradient, us, **extra):
        return {"name": name, "group": "backward", "kind": kind, "layer": "LeNet C3", "gradient": gradient, "version": name,
                "median_ms": us / 1e3, "correct": True, **extra}

    rows = [row("torch conv2d_weight", "peer", "weight", torch_us),
            row("backward_weight_reduce", "kernel", "weight", old_us, torch_ms=torch_us / 1e3),
            row("weight_bias_split S=auto tasks=2", "kernel", "weight+bias", new_us, torch_ms=torch_us / 1e3)]
    return {"results": rows, "summary": {"goal": backward_goals(rows)}}


def test_backward_phrases_follow_the_figures():
    faster = _backward_data(old_us=56.0, new_us=8.0, torch_us=17.0)
    text = prose.backward_against_torch(faster)
    assert text.startswith("PyTorch is matched or beaten in all 1 cases")
    assert "`weight_bias_split S=auto tasks=2` at 2.1× the speed of PyTorch (8.0 against 17.0 µs)" in text
    assert "`backward_weight_reduce` 56.0 µs, `weight_bias_split S=auto tasks=2` (the bias computed too) 8.0 µs, " \
           "7.0× faster" in prose.backward_new_against_old(faster)
    slower = _backward_data(old_us=56.0, new_us=34.0, torch_us=17.0)
    text = prose.backward_against_torch(slower)
    assert text.startswith("PyTorch is matched or beaten in 0 of the 1 cases")
    assert "50% of the speed of PyTorch (34.0 against 17.0 µs)" in text
    assert "1.6× faster" in prose.backward_new_against_old(slower)
    assert "not been measured yet" in prose.backward_against_torch(None)
    assert "not been measured yet" in prose.backward_new_against_old({"results": []})


def test_backward_phrases_of_the_recorded_figures():
    data = recorded("cnn_backward")
    for goal in data["summary"]["goal"]:
        assert f"{goal['best_ms'] * 1e3:,.1f} against {goal['torch_ms'] * 1e3:,.1f} µs" in prose.backward_against_torch(data)


def test_device_phrases_come_from_the_results_file():
    data = recorded("cuda_from_python")
    assert prose.device_name(data) == data["device"]["name"]
    assert prose.device_memory(data) == f"{data['device']['memory_bytes'] / 2**30:,.0f} GiB"
    other = copy.deepcopy(data)
    other["device"]["name"] = "NVIDIA H100 80GB HBM3"
    assert prose.device_name(other) == "NVIDIA H100 80GB HBM3"


# --- the chapters use the phrases ------------------------------------------------------------

# (chapter, a sentence the recorded figures contradicted, the glued phrase that replaced it)
REPLACED = [
    ("sums", "the sum is limited by reading `x`, like the other", "sum_vs_library"),
    ("cuda_from_python", "the library does the same job at about the same speed", "elementwise_vs_library"),
    ("cuda_from_python", "An H100 SM holds", "device"),
    ("cuda_from_python", "80 GB of HBM on an H100", "device_memory"),
    ("cuda_from_python", "set against the *measured* peak", "bandwidth_roof"),
    ("perceptrons", "it approaches the time it\ntakes just to read the matrix", "tree_vs_library"),
    ("cnn_forward_speed", "four loops over outputs (output map, row, column)", "c3_constant_tiled"),
    ("conv_implicit_gemm", "which reuses nothing from registers", "direct_vs_gemm"),
    ("conv_implicit_gemm", "compiler spills some to local memory", "direct_vs_gemm"),
    ("capsules_fast", "Wide\naccesses cut the number of memory instructions by four", "v3_to_v4"),
    ("capsules_fast", "The backward kernels, fast", "backward_vs_torch"),
    ("capsules_fast", "slower on the H200 we measured", "device"),
    ("mlp_backprop", "the matrix-multiplication chapter", None),
    ("mlp_backprop", "The chapter on matrix multiplication", None),
]


@pytest.mark.parametrize("name, contradicted, phrase", REPLACED, ids=lambda v: str(v)[:40])
def test_chapter_uses_the_phrase_not_the_contradicted_sentence(name, contradicted, phrase):
    text = chapter(name)
    assert contradicted not in text
    if phrase:
        assert f"{{glue:md}}`{phrase}`" in text, f"{name}.md does not show the phrase {phrase!r}"
        assert f'glue_phrase("{phrase}"' in text, f"{name}.md never glues {phrase!r}"


def test_every_glued_phrase_in_the_prose_is_glued_by_its_chapter():
    for path in sorted(BOOK.glob("*.md")):
        text = path.read_text()
        for name in set(re.findall(r"\{glue:md\}`([\w]+)`", text)):
            assert f'glue_phrase("{name}"' in text, f"{path.name} shows {name!r} but never glues it"


#: Statements the recorded figures (or the kernels) contradicted, each replaced by words written from them; none may
#: come back on any page.  Matched with the page's white space folded to single spaces.
CONTRADICTED = [
    "has three versions",                                   # kernels/basics/reduction.cu has four
    "the softmax of the multilayer-perceptron chapter",     # that softmax uses no warp shuffles
    "tiny blocks hit the limit of 32 resident blocks",      # explains the 32-thread blocks only
    "what the card can physically do",                      # the roof was a copy PyTorch beats
    "all of LeNet's (C5 has",                               # C5's bank does not fit constant memory
    "is the order of their reuse",                          # the tiled kernel is slower than the naive one
    "does not use a GEMM at all but the FFT",               # its FFT route ends in a complex GEMM
    "four times the input and output",                      # Winograd's tiles are 36 / 16 = 2.25 times
    "which must be zero for kernels like these",            # one tile of the search spills
    "nine tenths of cuBLAS",                                # the recorded share is written from the file
    "10× less accurate",                                    # the recorded ratios are written from the file
    "lose little to a hand-written one",                    # the generated max pooling is several times faster
    "about 26 µs at 4 TB/s",                                # an H200 figure beside an H100 file
    "can shorten the step by at most what it saves",        # the op's step is slower than PyTorch's
    "reaches little over half of the GPU's memory bandwidth",  # each GPU's share is written from its file
]


@pytest.mark.parametrize("statement", CONTRADICTED)
def test_no_page_repeats_a_statement_its_figures_contradicted(statement):
    for path in sorted(BOOK.glob("*.md")):
        folded = re.sub(r"\s+", " ", path.read_text())
        assert statement not in folded, f"{path.name} says {statement!r}, which the recorded figures contradict"


#: Phrases of the prose with a figure in them that is no measurement of this book's kernels: (page, phrase, why).
#: Every other number with a unit of time, bandwidth, rate or share, or a ratio, in the prose of a page must come
#: from a results file through book/prose.py (shown with {glue:md}), where the GPU it was measured on is named.
NOT_MEASURED = [
    ("attention", "about half. Only the tiles", "the share of a causal mask's tiles: geometry"),
    ("capsules", "raw pixels gets about 95 %", "an accuracy known of the data set, not of this book's runs"),
    ("capsules", "push the accuracy past 90 %", "what a longer run of the page's own cell reaches, for the reader to try"),
    ("cuda_from_python", "takes 0.3 ms is called on NumPy arrays", "a question's given"),
    ("cuda_from_python", "floats takes 0.30 ms. How many bytes", "a question's given"),
    ("cuda_from_python", "805 MB / 0.30 ms ≈ 2.7 TB/s", "the answer to that question, from its given"),
    ("gemm_bf16", "About half a BF16 unit", "a rounding error in units of the format"),
    ("gemm_bf16_hopper", "the last one about half full, about 3 % of the", "tile-count arithmetic"),
    ("large_margin_softmax_fast", "about half a gigabyte of traffic", "the bytes the cell above computes"),
    ("sums", "speed points from 35 % to 85 % of the", "the exercise's grading bands"),
]

_NUMBER = r"(?<![\w.,])\d[\d,]*(?:\.\d+)?"
#: A figure as prose quotes a measurement: a time, a bandwidth, a rate, a share, a ratio, or one in words.
MEASURED_FIGURE = re.compile(
    _NUMBER + r"\s*(?:µs|ms|GB/s|TB/s|GFLOP/s|TFLOP/s)(?!\w)"
    r"|" + _NUMBER + r"\s*%(?!\s*\d)"                                    # a share, not a remainder (13 % 4)
    r"|" + _NUMBER + r"×|" + _NUMBER + r"\s?(?:×|x) (?:faster|slower|the speed|as fast)"
    r"|\b(?:about|nearly|roughly|some|only|over|under|almost|little over) (?:half|a third|a quarter|two thirds|"
    r"three quarters|nine tenths|twice|three times|four times|ten times)\b", re.I)


def hand_written_figures(markdown: str) -> list[tuple[str, str]]:
    """The measured-looking figures a page's prose states itself (outside code cells, glue roles, inline code and
    formulas): each figure and the words around it."""
    text = prose_of(markdown)
    for pattern in (r"\{glue:md\}`[^`]*`", r"`[^`\n]*`", r"\$\$.*?\$\$", r"\$[^$\n]*\$"):
        text = re.sub(pattern, "", text, flags=re.S)
    text = re.sub(r"\s+", " ", text)
    return [(m.group(0), text[max(0, m.start() - 60):m.end() + 30]) for m in MEASURED_FIGURE.finditer(text)]


def test_the_figure_finder_finds_figures_and_leaves_remainders_and_sizes_alone():
    found = hand_written_figures("It runs at 2,810 GB/s, 1.4× faster, about nine tenths of it, 95 % of cuBLAS.\n"
                                 "A 28 × 28 map, 13 % 4 = 1, `3 ms` in code, {glue:md}`phrase` and $2.5×$.")
    assert [figure for figure, _ in found] == ["2,810 GB/s", "1.4×", "about nine tenths", "95 %"]


@pytest.mark.parametrize("path", sorted(BOOK.glob("*.md")), ids=lambda p: p.stem)
def test_prose_states_no_measured_figure_by_hand(path):
    allowed = [phrase for page, phrase, _ in NOT_MEASURED if page == path.stem]
    by_hand = [words for _, words in hand_written_figures(path.read_text()) if not any(a in words for a in allowed)]
    assert not by_hand, (f"{path.name} states figures by hand; write them from the results file through "
                         f"book/prose.py (glue_phrase, with the GPU named), or list a figure that is no measurement "
                         f"in NOT_MEASURED with the reason:\n  " + "\n  ".join(by_hand))


def test_every_not_measured_phrase_is_still_on_its_page():
    for page, phrase, _ in NOT_MEASURED:
        assert phrase in re.sub(r"\s+", " ", chapter(page)), f"{page}.md no longer says {phrase!r}: drop it from the list"


_COUNT_WORDS = "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
#: "`x.cu` has four versions", "all four versions": a count of a file's versions, which only book/ladders.py may write.
HAND_COUNTED = re.compile(rf"\b(?:has|have|with) (?:{_COUNT_WORDS}|\d+) versions\b|\b[Aa]ll (?:{_COUNT_WORDS}) versions\b")


def test_the_count_finder_finds_a_written_count():
    assert HAND_COUNTED.findall("`kernels/reduction.cu` has three versions. All four versions agree.") == [
        "has three versions", "All four versions"]
    assert HAND_COUNTED.findall("{glue:md}`reduction_versions`: All three sit left of the ridge.") == []


def test_counts_of_versions_are_written_from_the_records():
    """"`x.cu` has four versions" comes from the records (book/ladders.py, shown with {glue:md}), never from a
    writer's count, which a new version would make wrong."""
    for path in sorted(BOOK.glob("*.md")):
        text = re.sub(r"\s+", " ", prose_of(path.read_text()))
        assert not HAND_COUNTED.findall(text), f"{path.name} counts versions by hand: {HAND_COUNTED.findall(text)}"


#: Kernels the prose names as using warp shuffles: (page, words naming them, the topic's file).
SHUFFLES_CLAIMED = [
    ("sums", "the fused softmax of the large-margin softmax chapter", "lsoftmax"),
    ("sums", "the perceptron chapter's column sums fold their lanes", "perceptron"),
]


@pytest.mark.parametrize("page, words, topic", SHUFFLES_CLAIMED)
def test_the_kernels_named_for_warp_shuffles_use_them(page, words, topic):
    assert words in re.sub(r"\s+", " ", chapter(page)), f"{page}.md no longer says {words!r}"
    assert "__shfl" in read_source(topic), f"{page}.md says {words!r}, but {topic}.cu uses no warp shuffle"


def test_prose_names_no_single_gpu_as_the_device_of_the_figures():
    """A GPU model in the prose appears only beside another (a statement about both); the
    device the figures were measured on comes from the results file."""
    models = r"\b(?:H100|H200|A100|V100|L40S?|RTX \w+)\b"
    for path in sorted(BOOK.glob("*.md")):
        for paragraph in re.split(r"\n\s*\n", prose_of(path.read_text())):
            found = re.findall(models, paragraph)
            if len(set(found)) == 1 and "RTX" not in found[0]:
                pytest.fail(f"{path.name} names only the {found[0]} in: {paragraph.strip()[:200]!r}")


def test_the_book_names_no_solution_path():
    for path in sorted(BOOK.glob("*.md")):
        assert "solutions/" not in prose_of(path.read_text()), f"{path.name} names the solutions folder"


# --- the built pages carry the phrases ---------------------------------------------------------

@pytest.mark.skipif(not (BUILT / "cuda_from_python.html").exists(),
                    reason="the book is not built here (`make book`)")
def test_built_chapter_shows_the_recorded_device_and_figures():
    from bs4 import BeautifulSoup

    data = recorded("cuda_from_python")
    html = (BUILT / "cuda_from_python.html").read_text()
    text = BeautifulSoup(html, "html.parser").get_text(" ")
    text = re.sub(r"\s+", " ", text).replace("\u2019", "'")  # the page's typographic apostrophes
    assert f"measured on an {data['device']['name']}" in text
    assert re.sub(r"`", "", prose.bandwidth_roof(data))[:60] in text
    assert "{glue" not in text, "a glue role was left unrendered"
    sums = re.sub(r"\s+", " ", BeautifulSoup((BUILT / "sums.html").read_text(), "html.parser").get_text(" "))
    sums = sums.replace("\u2019", "'")
    assert re.sub(r"`", "", prose.sum_against_library(data))[:60] in sums


@pytest.mark.skipif(not (BUILT / "lenet.html").exists(), reason="the book is not built here (`make book`)")
def test_built_lenet_page_shows_the_recorded_full_run():
    """Built on the emulator, the LeNet page reports the full run `make bench` recorded, not its own short one."""
    from bs4 import BeautifulSoup

    run = recorded("cnn")["lenet"]
    text = re.sub(r"\s+", " ", BeautifulSoup((BUILT / "lenet.html").read_text(), "html.parser").get_text(" "))
    assert (f"{run['test_accuracy'][-1]:.1%} test accuracy on the {run['test_samples']} test images "
            f"after {run['epochs']} epochs, {run['step_ms_wall']:.1f} ms per training step") in text


@pytest.mark.skipif(not (BUILT / "cnn_forward_speed.html").exists(), reason="the book is not built here (`make book`)")
def test_built_kernels_page_shows_its_glued_phrases():
    from bs4 import BeautifulSoup

    text = re.sub(r"\s+", " ", BeautifulSoup((BUILT / "cnn_forward_speed.html").read_text(), "html.parser").get_text(" "))
    text = text.replace("\u2019", "'")  # the page's typographic apostrophes
    assert re.sub(r"`", "", prose.small_layer_versions(recorded("cnn"))) in text
    assert "{glue" not in text, "a glue role was left unrendered"


def test_attention_phrases_follow_the_goals_and_say_when_nothing_was_measured():
    def goals(ratio_full, ratio_causal):
        return {"device": {"name": "GPU X"}, "summary": {"goals": [
            {"goal": "forward_vs_sdpa", "head_dim": 64, "causal": False, "ratio": ratio_full, "target": 0.9,
             "met": ratio_full >= 0.9},
            {"goal": "forward_vs_sdpa", "head_dim": 64, "causal": True, "ratio": ratio_causal, "target": 0.9,
             "met": ratio_causal >= 0.9}]}}

    text = prose.attention_goal(goals(0.95, 0.8), "forward_vs_sdpa")
    assert "on the GPU X at N = 4096" in text and "0.95 of the speed of SDPA's flash kernel (d = 64)" in text
    assert "0.80 of the speed of SDPA's flash kernel (d = 64, causal)" in text and "met in 1 of the 2 cases" in text
    assert prose.attention_goal(goals(1.1, 0.9), "forward_vs_sdpa").endswith("is met in every case")
    assert "not measured yet" in prose.attention_goal(None, "forward_vs_sdpa")
    assert "not measured yet" in prose.attention_goal(goals(1.0, 1.0), "backward_vs_sdpa")
    both = prose.attention_goal(goals(1.0, 1.0), "forward_vs_sdpa", "backward_vs_sdpa")
    assert both.startswith("on the GPU X at N = 4096, the BF16 forward") and "backward" not in both
    assert "not measured yet" in prose.attention_training_step({"results": []})
    rows = [{"group": "training_step", "kind": kind, "median_ms": ms, "batch": 4, "seq": 2048, "heads": 16, "dim": 1024}
            for kind, ms in (("kernel", 30.0), ("peer", 27.0))]
    step = prose.attention_training_step({"results": rows, "summary": {"training_step_losses_agree": True},
                                          "device": {"name": "GPU X"}})
    assert "30.00 ms per step with `dlk::attention`, 27.00 ms with SDPA" in step and "90% of the speed of" in step
    assert "16 heads of 64" in step and "with the same first loss" in step


def test_attention_profile_and_bound_phrases_state_the_recorded_figures():
    def profile(step, **figures):
        return {"step": step, **figures}

    data = {"device": {"name": "GPU X"}, "summary": {
        "bf16_matmul_gflops": 800e3,
        "goals": [{"goal": "fused_vs_unfused_float", "head_dim": 128, "causal": False, "ratio": 5.0, "target": 10.0,
                   "met": False},
                  {"goal": "fused_vs_unfused_float", "head_dim": 64, "causal": False, "ratio": 11.0, "target": 10.0,
                   "met": True}]},
        "profiles": [profile("version 4, d = 64", tensor_pipe_percent=47.7, issue_slots_percent=47.5),
                     profile("SDPA flash forward, d = 64", tensor_pipe_percent=48.0, issue_slots_percent=52.9),
                     profile("version 3 (float), d = 128", fma_pipe_percent=42.9, shared_bank_conflicts=1234567.0)],
        "results": [{"name": "v4 fused bf16", "group": "forward", "seq": 4096, "head_dim": 64, "causal": False,
                     "gflops": 300e3, "median_ms": 1.0},
                    {"name": "v1 unfused float32", "group": "forward", "seq": 4096, "head_dim": 128, "causal": False,
                     "median_ms": 100.0},
                    {"name": "v3 fused float32", "group": "forward", "seq": 4096, "head_dim": 128, "causal": False,
                     "median_ms": 20.0, "roof_ms": 8.0}]}
    text = prose.attention_profiles(data, attention_bench.PROFILED_V4, attention_bench.PROFILED_SDPA_FORWARD)
    assert text.startswith("on the GPU X at N = 4096 without the mask, at d = 64, tensor pipe busy: 48 % of cycles "
                           "for version 4, 48 % of cycles for SDPA's flash kernel; issue slots used: 48 % for version 4, "
                           "53 % for SDPA's flash kernel")
    assert "d = 128" not in text, "a head dimension without figures is left out"
    assert "not measured yet" in prose.attention_profiles({"profiles": []}, attention_bench.PROFILED_V4,
                                                          attention_bench.PROFILED_SDPA_FORWARD)
    share = prose.attention_tensor_core_share(data)
    assert "300 TFLOP/s at d = 64, 38% of the 800 TFLOP/s" in share and "GPU X" in share
    assert "not measured yet" in prose.attention_tensor_core_share({"summary": {}, "results": []})
    limits = prose.attention_float_limits(data)
    assert "at d = 128, FMA pipe busy 43 % of cycles, 1,234,567 shared-memory bank conflicts" in limits
    assert "version 1 takes 100.0 ms and version 3's FP32 roof is 8.00 ms" in limits and "12.5 times" in limits
    assert "At d = 64" not in limits, "a goal that is met needs no bound"
    assert "not measured yet" in prose.attention_float_limits(None)


def test_attention_tiling_phrases_follow_the_kernels_configuration():
    from kernels.attention import attention_bf16

    g = attention_bf16.geometry(64)
    text = prose.attention_forward_tiling((64,))
    assert f"a block of {g['warps']} warps owns {g['rows']} query rows" in text
    assert f"per key tile of {g['keys']} keys" in text
    assert f"{16 * g['m_tiles']} × {g['keys']} scores with {2 * g['m_tiles'] * 4 * g['keys'] // 16} `mma`" in text
    b = attention_bf16.geometry(128)
    assert prose.attention_backward_tiling((128,)) == (f"at d = 128 a block of {b['backward_warps']} warps owns "
                                                       f"{b['tile']} keys, 16 per warp, and walks query tiles of "
                                                       f"{b['queries']}")


# --- a page quotes the GPU of the files it reads --------------------------------------------------

def _recorded_devices() -> dict[str, set[str]]:
    """Every device name in the results files: the untagged files' (what the pages read) and all of them."""
    results = ROOT / "benchmarks" / "results"
    untagged, every = set(), set()
    for path in results.glob("*.json"):
        device = json.loads(path.read_text()).get("device")
        name = device.get("name") if isinstance(device, dict) else None
        if not name:
            continue
        every.add(name)
        if not any(path.stem.endswith(f"_{tag}") for tag in ("h200", "two_gpus")):
            untagged.add(name)
    return {"untagged": untagged, "every": every}


#: Pages that set several GPUs' runs side by side on purpose, each run labelled with its GPU.
COMPARES_RUNS = {"sgemm": "the tile search, a panel per recorded run", "scoreboard": "every run of every benchmark"}


@pytest.mark.parametrize("page", sorted(p.stem for p in BOOK.glob("*.md")))
def test_built_page_quotes_only_the_gpu_of_the_files_it_reads(page):
    html = BUILT / f"{page}.html"
    if not html.exists():
        pytest.skip("the book is not built here (`make book`)")
    if page in COMPARES_RUNS:
        pytest.skip(f"{page} compares runs on purpose: {COMPARES_RUNS[page]}")
    from bs4 import BeautifulSoup

    devices = _recorded_devices()
    text = re.sub(r"\s+", " ", BeautifulSoup(html.read_text(), "html.parser").get_text(" "))
    named = {name for name in devices["every"] if name in text}
    assert named <= devices["untagged"], (f"{page}.html names {sorted(named - devices['untagged'])}, whose figures "
                                          f"are in no file the page reads ({sorted(devices['untagged'])})")
