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
import re
from pathlib import Path

import pytest

from benchmarks import attention as attention_bench
from book import prose
from book.speed_figures import SpeedFigures

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


def test_roof_phrase_names_the_yardstick_and_what_beat_it():
    data = recorded("cuda_from_python")
    text = prose.bandwidth_roof(data)
    assert "`copy_grid_stride_float4`" in text and f"{data['peaks']['bandwidth_gbs']:,.0f} GB/s" in text
    fastest_peer = max(r["gbs"] for r in data["results"] if r["kind"] == "peer")
    assert ("so a better copy exists" in text) == (fastest_peer > data["peaks"]["bandwidth_gbs"] * 1.01)
    dram = prose.dram_bandwidth_gbs(data)
    if dram:
        assert dram > fastest_peer, "the theoretical bandwidth must be above anything measured"


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
    ("cuda_from_python", "the sum is limited by reading `x`, like the other", "sum_vs_library"),
    ("cuda_from_python", "the library does the same job at about the same speed", "elementwise_vs_library"),
    ("cuda_from_python", "An H100 SM holds", "device"),
    ("cuda_from_python", "80 GB of HBM on an H100", "device_memory"),
    ("cuda_from_python", "set against the *measured* peak", "bandwidth_roof"),
    ("perceptrons", "it approaches the time it\ntakes just to read the matrix", "tree_vs_library"),
    ("cnn", "four loops over outputs (output map, row, column)", "c3_constant_tiled"),
    ("conv_as_gemm", "which reuses nothing from registers", "direct_vs_gemm"),
    ("conv_as_gemm", "compiler spills some to local memory", "direct_vs_gemm"),
    ("capsules", "Wide\naccesses cut the number of memory instructions by four", "v3_to_v4"),
    ("capsules", "The backward kernels, fast", "backward_vs_torch"),
    ("capsules", "slower on the H200 we measured", "device"),
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
    text = re.sub(r"\s+", " ", text)
    assert f"measured on an {data['device']['name']}" in text
    assert re.sub(r"`", "", prose.sum_against_library(data))[:60] in text
    assert "{glue" not in text, "a glue role was left unrendered"


@pytest.mark.skipif(not (BUILT / "lenet.html").exists(), reason="the book is not built here (`make book`)")
def test_built_lenet_page_shows_the_recorded_full_run():
    """Built on the emulator, the LeNet page reports the full run `make bench` recorded, not its own short one."""
    from bs4 import BeautifulSoup

    run = recorded("cnn")["lenet"]
    text = re.sub(r"\s+", " ", BeautifulSoup((BUILT / "lenet.html").read_text(), "html.parser").get_text(" "))
    assert (f"{run['test_accuracy'][-1]:.1%} test accuracy on the {run['test_samples']} test images "
            f"after {run['epochs']} epochs, {run['step_ms_wall']:.1f} ms per training step") in text


@pytest.mark.skipif(not (BUILT / "cnn.html").exists(), reason="the book is not built here (`make book`)")
def test_built_kernels_page_shows_its_glued_phrases():
    from bs4 import BeautifulSoup

    text = re.sub(r"\s+", " ", BeautifulSoup((BUILT / "cnn.html").read_text(), "html.parser").get_text(" "))
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
