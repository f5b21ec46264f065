"""Sentences of the book that state what the recorded figures show, written from the figures.

A chapter's prose sits beside plots and tables read from ``benchmarks/results/*.json``;
when ``make bench`` records new figures (another GPU, another driver, a faster kernel)
a hand-written "about the same speed" or "on an H100" can turn false without anyone
noticing. Each function here takes a results file's dictionary (``SpeedFigures.data``)
and returns the sentence that the figures support; :func:`glue_phrase` hands it to the
page, where the prose shows it with ``{glue:md}`name```.  The rows, groups and layers a
sentence reads are named by the constants of the benchmark that writes them.
"""

from __future__ import annotations

from benchmarks import attention, capsules, cnn, conv_as_gemm, cuda_from_python, perceptrons_mlp, profiles
from benchmarks import sgemm_tensor_cores as tensor_cores
from book.speed_figures import SpeedFigures
from kernels.attention import attention_bf16

# Within this fraction, two speeds are "about the same": timings of one kernel vary by
# a few per cent between runs.
SAME_SPEED = 0.05


def glue_phrase(name: str, text: str) -> str:
    """Make ``text`` (markdown) available to the page as ``{glue:md}`name```; returns it.

    Run as a plain script (``book/run_chapter.py``, no myst-nb) there is no page to
    hand it to, and the text is only returned.
    """
    try:
        from IPython.display import Markdown
        from myst_nb import glue
    except ImportError:
        return text
    glue(name, Markdown(text), display=False)
    return text


# --- the device ------------------------------------------------------------------------------

def device_name(data: dict | None) -> str:
    return str((data or {}).get("device", {}).get("name", "the GPU of these figures"))


def device_memory(data: dict | None) -> str:
    """The device's memory as the driver reports it, e.g. "140 GiB"."""
    memory = (data or {}).get("device", {}).get("memory_bytes")
    return f"{memory / 2**30:,.0f} GiB" if memory else "tens of GiB"


def dram_bandwidth_gbs(data: dict | None) -> float | None:
    """The memory's theoretical bandwidth from the clock and bus width the driver reports.

    HBM transfers twice per clock: GB/s = 2 x clock (MHz) x bus width (bits) / 8 / 1000.
    """
    device = (data or {}).get("device", {})
    clock, bits = device.get("memory_clock_mhz"), device.get("memory_bus_bits")
    if not clock or not bits:
        return None
    return 2 * clock * 1e6 * bits / 8 / 1e9


# --- comparing two speeds ---------------------------------------------------------------------

def relative_speed(ours: float, theirs: float) -> str:
    """How fast ``ours`` is next to ``theirs`` (both rates, higher is faster), in words."""
    ratio = ours / theirs
    if abs(ratio - 1) <= SAME_SPEED:
        return "about the same speed as"
    if ratio > 1:
        return f"{ratio:.2g}× the speed of"
    return f"{ratio:.0%} of the speed of"


def _best(rows: list[dict], group: str, kind: str) -> dict | None:
    chosen = [r for r in rows if r["group"] == group and r["kind"] == kind and r.get("gbs")]
    return max(chosen, key=lambda r: r["gbs"], default=None)


# --- chapter 1: CUDA from Python -------------------------------------------------------------

def elementwise_against_library(data: dict, groups=cuda_from_python.ELEMENTWISE) -> str:
    """The elementwise kernels' best against the library's best, group by group."""
    rows = data.get("results", [])
    parts = []
    for group in groups:
        ours, peer = _best(rows, group, "kernel"), _best(rows, group, "peer")
        if ours and peer:
            parts.append(f"`{group}` runs at {relative_speed(ours['gbs'], peer['gbs'])} `{peer['name']}` "
                         f"({ours['gbs']:,.0f} against {peer['gbs']:,.0f} GB/s)")
    return "; ".join(parts)


def bandwidth_roof(data: dict) -> str:
    """Which roof the percentages use, and whether something measured went past it."""
    copy_gbs = data["peaks"]["bandwidth_gbs"]
    fastest = max((r for r in data.get("results", []) if r["kind"] == "peer" and r.get("gbs")),
                  key=lambda r: r["gbs"], default=None)
    dram = dram_bandwidth_gbs(data)
    text = (f"The 100 % line is our `{cuda_from_python.PEAK_COPY}`'s bandwidth, {copy_gbs:,.0f} GB/s: "
            f"a measured floor for what the card can do, not its ceiling.")
    if fastest and fastest["gbs"] > copy_gbs * (1 + SAME_SPEED / 5):
        text += (f" `{fastest['name']}` moved {fastest['gbs']:,.0f} GB/s, "
                 f"{fastest['gbs'] / copy_gbs:.0%} of it, so a better copy exists.")
    if dram:
        text += (f" The memory's theoretical bandwidth, from the clock and bus width the driver reports "
                 f"for the {device_name(data)}, is {dram:,.0f} GB/s; no kernel reaches it.")
    return text


def sum_against_library(data: dict) -> str:
    """Where the block-level sums stand against one pass over x and against the libraries."""
    rows = data.get("results", [])
    ours = [r for r in rows if r["group"] == cuda_from_python.REDUCE_SUM and r["kind"] == "kernel"
            and r["name"] != cuda_from_python.SUM_ATOMIC]
    peers = sorted((r for r in rows if r["group"] == cuda_from_python.REDUCE_SUM and r["kind"] == "peer"),
                   key=lambda r: -r["gbs"])
    if not ours or not peers:
        return ""
    best, best_peer = max(ours, key=lambda r: r["gbs"]), peers[0]
    ours_text = ", ".join(f"`{r['name']}` {r['percent_of_peak_bandwidth']:.0f} %" for r in ours)
    peer_text = " and ".join(f"`{r['name']}` {r['percent_of_peak_bandwidth']:.0f} %" for r in peers)
    if best["gbs"] >= best_peer["gbs"] * (1 - SAME_SPEED):
        verdict = f"so the fastest of ours, `{best['name']}`, reads `x` at least about as fast as the libraries do"
    else:
        verdict = (f"so ours are not yet limited by reading `x`: the fastest library sum is "
                   f"{best_peer['gbs'] / best['gbs']:.2g}× as fast as `{best['name']}`")
    return (f"Of the copy bandwidth, the block-level sums reach {ours_text}; "
            f"the libraries' sums {peer_text}; {verdict}")


# --- chapter 2: perceptrons -------------------------------------------------------------------

def tree_sum_against_library(data: dict, kernel: str = perceptrons_mlp.SUM_TREE, label: str = "the tree") -> str:
    """A gradient sum at the largest minibatch: share of bandwidth, and the library.

    Empty when the results hold no row of ``kernel`` (recorded before that version existed).
    """
    rows = [r for r in data.get("results", []) if r["group"] == perceptrons_mlp.GRADIENT_SUM_SWEEP]
    if not rows:
        return ""
    big = max(r["n"] for r in rows)
    ours = next((r for r in rows if r["name"] == kernel and r["n"] == big), None)
    if ours is None:
        return ""
    peer = next((r for r in rows if r["kind"] == "peer" and r["n"] == big), None)
    text = (f"at n = {big:,} rows {label} reads the matrix at {ours['percent_of_peak_bandwidth']:.0f} % "
            f"of the copy bandwidth")
    if peer:
        ratio = ours["median_ms"] / peer["median_ms"]
        if abs(ratio - 1) <= SAME_SPEED:
            text += f", about as fast as `{peer['name']}`"
        elif ratio > 1:
            text += f", and `{peer['name']}` is {ratio:.2g}× faster"
        else:
            text += f", {1 / ratio:.2g}× faster than `{peer['name']}`"
    return text


# --- chapter 4: convolutional layers ----------------------------------------------------------

def _layer_times(data: dict, group: str, layer: str) -> dict[str, float]:
    """Median µs of each timed row of one group and layer."""
    return {r["name"]: r["median_ms"] * 1e3 for r in data.get("results", [])
            if r["group"] == group and r.get("layer") == layer and r.get("median_ms")}


def small_layer_versions(data: dict, layer_name: str = cnn.LENET_C3, versions=(cnn.CONSTANT, cnn.TILED)) -> str:
    """Each version's speed relative to the naive kernel on one layer, e.g. "0.72× and 0.80×"."""
    t = _layer_times(data, cnn.FORWARD, layer_name)
    if not t:
        return ""
    parts = [f"`{v}` runs at {t[cnn.NAIVE] / t[v]:.2f}× the naive kernel's speed" for v in versions
             if v in t and cnn.NAIVE in t]
    return f"on {layer_name} " + " and ".join(parts)


def _layers(data: dict, group: str) -> list[str]:
    return list(dict.fromkeys(r["layer"] for r in data.get("results", []) if r["group"] == group and "layer" in r))


def direct_against_register_tiled(gemm_data: dict, cnn_data: dict) -> str:
    """The direct convolution the GEMM benchmark compares with, and the faster one it leaves out."""
    layers = _layers(gemm_data, conv_as_gemm.CONV)
    if not layers:
        return ""
    rows = _layer_times(gemm_data, conv_as_gemm.CONV, layers[0])
    direct = next((name for name in rows if name.startswith(conv_as_gemm.DIRECT)), None)
    implicit = min((us for name, us in rows.items() if name.startswith(conv_as_gemm.IMPLICIT_GEMM)), default=None)
    if direct is None or implicit is None:
        return ""
    text = (f"The direct convolution in this comparison is the previous chapter's `tiled_multimap` "
            f"(shared-memory tiles; each thread keeps one pixel of several output maps in registers), "
            f"{rows[direct] / implicit:.1f}× slower than implicit GEMM")
    if cnn.LARGE_LAYER in _layers(cnn_data, cnn.FORWARD):
        t = _layer_times(cnn_data, cnn.FORWARD, cnn.LARGE_LAYER)
        if cnn.REGISTER_TILED in t and cnn.TILED_MULTIMAP in t:
            text += (f"; that chapter's `{cnn.REGISTER_TILED}` version, which also gives each thread several pixels, "
                     f"is {t[cnn.TILED_MULTIMAP] / t[cnn.REGISTER_TILED]:.1f}× faster than `{cnn.TILED_MULTIMAP}` "
                     f"on the same layer in its own benchmark, and still {t[cnn.REGISTER_TILED] / implicit:.1f}× "
                     f"slower than implicit GEMM")
    return text


def winograd_against_cudnn(gemm_data: dict) -> str:
    """Winograd's best time on each 3x3 layer beside cuDNN's best and implicit GEMM's, e.g. "on the 56 × 56
    layer 522 µs against cuDNN's 714 µs (1.4× its speed) and implicit GEMM's 827 µs"."""
    parts = []
    winograd, cudnn, implicit_gemm = conv_as_gemm.WINOGRAD, conv_as_gemm.CUDNN, conv_as_gemm.IMPLICIT_GEMM
    for layer in _layers(gemm_data, conv_as_gemm.CONV):
        rows = [r for r in gemm_data.get("results", []) if r["group"] == conv_as_gemm.CONV and r.get("layer") == layer
                and r.get("median_ms") and (r["kind"] == "peer" or r.get("correct"))]
        best = {kind: min((r["median_ms"] * 1e3 for r in rows if r["name"].startswith(kind)), default=None)
                for kind in (winograd, cudnn, implicit_gemm)}
        if best[winograd] is None or best[cudnn] is None:
            continue
        size = layer.split()[1].replace("x", " × ") if len(layer.split()) > 1 else layer
        text = (f"on the {size} layer {best[winograd]:,.0f} µs against cuDNN's {best[cudnn]:,.0f} µs "
                f"({relative_speed(1 / best[winograd], 1 / best[cudnn])} cuDNN)")
        if best[implicit_gemm] is not None:
            text += f" and implicit GEMM's {best[implicit_gemm]:,.0f} µs"
        parts.append(text)
    return "; ".join(parts)


# --- chapter 6: capsules ----------------------------------------------------------------------

def _capsule_ms(data: dict) -> dict[str, float]:
    return {r["name"]: r["median_ms"] for r in data.get("results", []) if r.get("median_ms")}


def capsule_step(data: dict, before: str, after: str) -> str:
    """How many times faster ``after`` runs than ``before``, e.g. "2.9×"."""
    t = _capsule_ms(data)
    if before not in t or after not in t:
        return "(not measured)"
    return f"{t[before] / t[after]:.1f}×"


def capsule_backward_against_torch(data: dict) -> str:
    """Each backward kernel's speed next to PyTorch's autograd doing the same gradient."""
    t = _capsule_ms(data)
    pairs = zip(capsules.BACKWARD_PAIRS, ("the input gradient", "the weight gradient", "both at once"))
    parts = [f"for {what}, `{ours.split(' ')[0]}` runs at {relative_speed(1 / t[ours], 1 / t[peer])} "
             f"PyTorch's autograd ({t[ours] * 1e3:,.0f} against {t[peer] * 1e3:,.0f} µs)"
             for (ours, peer), what in pairs if ours in t and peer in t]
    return "; ".join(parts)


def training_step_against_torch(data: dict) -> str:
    """LeNet-5's whole training step with the book's kernels next to the same step in PyTorch (``cnn_training_step``),
    with the number of launches the step made, as recorded."""
    ours = next(r for r in data["results"] if r["kind"] == "kernel")
    launches = ours["launches"]
    peer = next(r for r in data["results"] if r["kind"] == "peer")
    agree = "the same" if ours.get("correct") else "a different"
    return (f"{ours['median_ms']:.2f} ms per step with the book's kernels, {peer['median_ms']:.2f} ms with PyTorch: "
            f"the book's step runs at {relative_speed(1 / ours['median_ms'], 1 / peer['median_ms'])} PyTorch's "
            f"(median of {ours['samples']} steps each, {ours['layer']}), with {agree} loss on the first step "
            f"({ours['first_step_loss']:.6f} and {peer['first_step_loss']:.6f}). Its {launches} launches take "
            f"{ours['median_ms'] * 1e3 / launches:,.0f} µs of wall time each on average")


# --- large-margin softmax ---------------------------------------------------------------------

def warptile_against_cublas(gemm_data: dict) -> str:
    """The GEMM chapter's fastest kernel next to cuBLAS, at the size and on the device recorded."""
    ladder = [r for r in (gemm_data or {}).get("results", []) if r["group"] == conv_as_gemm.SGEMM and r.get("gflops")]
    rates = {r["name"]: r["gflops"] for r in ladder}
    ours, cublas = rates.get(conv_as_gemm.WARPTILE), rates.get(conv_as_gemm.CUBLAS)
    if ours is None or cublas is None:
        return "(the GEMM chapter's figures have not been recorded yet)"
    size = ladder[0]
    return (f"the GEMM chapter's kernel runs at {relative_speed(ours, cublas)} cuBLAS "
            f"({ours / 1e3:,.1f} against {cublas / 1e3:,.1f} TFLOP/s at "
            f"{size['M']} × {size['N']} × {size['K']} on the {device_name(gemm_data)})")


def recorded(name: str) -> dict | None:
    """The results file ``benchmarks/results/<name>.json`` as recorded (the untagged file, never measured now),
    or None."""
    return SpeedFigures.recorded(name).data


# --- the GEMM chapter: skinny products -----------------------------------------------------------

def splitk_against_cublas(gemm_data: dict, labels: tuple[str, ...] | None = None) -> str:
    """Version 8 (plan) next to version 7 and cuBLAS at the recorded shapes (the GEMM chapter's results,
    section ``sgemm_shapes``) whose label is one of ``labels`` (None: every recorded shape)."""
    parts = []
    for s in (gemm_data or {}).get(conv_as_gemm.SGEMM_SHAPES, {}).get("shapes", []):
        if labels is not None and s["label"] not in labels:
            continue
        v7, v8, peer = s["warptile"], s["splitk"], s["cublas"]
        if "median_us" not in v8 or "median_us" not in v7:
            continue
        parts.append(f"{s['M']} × {s['N']} × {s['K']}: {v7['median_us']:,.0f} µs → {v8['median_us']:,.1f} µs "
                     f"against cuBLAS's {peer['median_us']:,.1f} µs ({relative_speed(1 / v8['median_us'], 1 / peer['median_us'])} cuBLAS)")
    if not parts:
        return "(no GPU figures have been recorded yet)"
    section = (gemm_data or {}).get(conv_as_gemm.SGEMM_SHAPES, {})
    where = device_name(section if "device" in section else gemm_data)
    return f"on the {where}, version 7 → version 8: " + "; ".join(parts)


def dense_layer_on_gemm(data: dict, group: str = perceptrons_mlp.FC_LARGE) -> str:
    """The MLP chapter's dense-layer products on the GEMM chapter's kernels against cuBLAS, in one sentence."""
    rows = {r["name"]: r for r in (data or {}).get("results", []) if r.get("group") == group}
    pairs = zip(perceptrons_mlp.GEMM_PRODUCTS, ("the forward product", "the input gradient", "the weight gradient"))
    parts = []
    for (ours, peer), what in pairs:
        if ours in rows and peer in rows:
            a, b = rows[ours]["median_ms"] * 1e3, rows[peer]["median_ms"] * 1e3
            parts.append(f"{what} {a:,.0f} µs against cuBLAS's {b:,.0f} µs ({b / a:.0%} of its speed)")
    if not parts:
        return "(no GPU figures for the dense layer on the GEMM have been recorded yet)"
    r = next(iter(rows.values()))
    return f"at {r['n']} × {r['in']} → {r['out']} on the {device_name(data)}: " + "; ".join(parts)


# --- chapter 4: the backward kernels ----------------------------------------------------------

BACKWARD_NOT_MEASURED = ("(the backward kernels have not been measured yet: "
                         "`python -m benchmarks.cnn --only backward` on a GPU records them)")


def _backward_timed(data: dict | None) -> list[dict]:
    return [r for r in (data or {}).get("results", []) if r["group"] == cnn.BACKWARD and r.get("median_ms")]


def backward_against_torch(data: dict | None) -> str:
    """For each layer and gradient, the fastest correct kernel next to PyTorch's gradient, from ``summary["goal"]``."""
    goals = (data or {}).get("summary", {}).get("goal", [])
    if not goals:
        return BACKWARD_NOT_MEASURED
    parts = [f"{g['gradient']} gradient of {g['layer']}: `{g['best']}` at "
             f"{relative_speed(1 / g['best_ms'], 1 / g['torch_ms'])} PyTorch "
             f"({g['best_ms'] * 1e3:,.1f} against {g['torch_ms'] * 1e3:,.1f} µs)" for g in goals]
    met = sum(g["met"] for g in goals)
    verdict = (f"PyTorch is matched or beaten in all {len(goals)} cases" if met == len(goals) else
               f"PyTorch is matched or beaten in {met} of the {len(goals)} cases")
    return f"{verdict}. The fastest of each: " + "; ".join(parts)


def backward_new_against_old(data: dict | None) -> str:
    """For each layer and gradient, the teaching version's time and the fastest newer version's."""
    rows = _backward_timed(data)
    if not rows:
        return BACKWARD_NOT_MEASURED
    parts = []
    for layer in dict.fromkeys(r["layer"] for r in rows):
        here = [r for r in rows if r["layer"] == layer and r["kind"] == "kernel" and r.get("correct", True)]
        for gradient, old_name in cnn.BACKWARD_BASELINES.items():
            old = next((r for r in here if r["name"] == old_name), None)
            new = [r for r in here if r.get("gradient") in cnn.counted_for(gradient)
                   and r["name"] not in cnn.BACKWARD_TEACHING_ROWS]
            if old is None or not new:
                continue
            best = min(new, key=lambda r: r["median_ms"])
            change = old["median_ms"] / best["median_ms"]
            how = (f"{change:.1f}× faster" if change > 1 + SAME_SPEED else
                   f"{1 / change:.1f}× slower" if change < 1 - SAME_SPEED else "about as fast")
            also = " (the bias computed too)" if best.get("gradient") == cnn.WEIGHT_AND_BIAS else ""
            parts.append(f"{layer}, {gradient}: `{old_name}` {old['median_ms'] * 1e3:,.1f} µs, "
                         f"`{best['name']}`{also} {best['median_ms'] * 1e3:,.1f} µs, {how}")
    return "; ".join(parts) if parts else BACKWARD_NOT_MEASURED


def _figure(rows: list[dict], step: str, key: str) -> float | None:
    return next((r[key] for r in rows if r["step"] == step and key in r), None)


def profiled_side_by_side(rows: list[dict], pairs) -> str | None:
    """A sentence of the profiler's recorded figures (rows of ``benchmarks/results/profiles.json``), one clause
    per ``(key, what, format, (step, name), (step, name))`` whose two figures were recorded; None when none
    was.  It states numbers, not directions, so that it stays true whatever a later run records."""
    said = []
    for key, what, fmt, (step_a, name_a), (step_b, name_b) in pairs:
        a, b = _figure(rows, step_a, key), _figure(rows, step_b, key)
        if a is not None and b is not None:
            said.append(f"{what}: {fmt.format(a)} for {name_a}, {fmt.format(b)} for {name_b}")
    return "; ".join(said) if said else None


#: What the SGEMM chapter's sentence compares: coalescing, shared-memory layouts, and where time goes.
_NAIVE, _WARPTILE = (profiles.SGEMM_NAIVE, "the naive kernel"), (profiles.SGEMM_WARPTILE, "warp tiling")
SGEMM_PROFILE_PAIRS = (
    ("sectors_per_load_request", "sectors per global load", "{:.1f}", _NAIVE,
     (profiles.SGEMM_COALESCED, "the coalesced one")),
    ("shared_load_bank_conflicts", "bank conflicts of shared-memory loads", "{:,.0f}",
     (profiles.SGEMM_VECTORIZED, "the transposed, vectorised tiles"), _WARPTILE),
    ("sm_percent", "SM throughput", "{:.0f} % of peak", _NAIVE, _WARPTILE),
)

#: What the GEMM chapter's sentence on the limits at 4096³ compares: each of our fastest kernels beside
#: the cuBLAS kernel it is measured against, and version 10 beside version 11.
_V7, _V10, _V11 = (tensor_cores.V7, "version 7"), (tensor_cores.V10, "version 10"), (tensor_cores.V11, "version 11")
_CUBLAS_FP32 = (tensor_cores.CUBLAS_FP32, "cuBLAS FP32")
LIMIT_PROFILE_PAIRS = (
    ("fma_pipe_percent", "FMA pipe busy", "{:.0f} % of cycles", _V7, _CUBLAS_FP32),
    ("issue_slots_percent", "issue slots used", "{:.0f} %", _V7, _CUBLAS_FP32),
    ("tensor_pipe_percent", "tensor pipe busy", "{:.0f} % of cycles", _V10, _V11),
    ("barrier_stall_percent", "warps waiting at a barrier", "{:.0f} % of the time", _V10, _V11),
    ("tensor_pipe_percent", "tensor pipe busy", "{:.0f} % of cycles", _V11,
     (tensor_cores.CUBLAS_TF32, "cuBLAS TF32 (one product where version 11 makes three)")),
)


def tensor_cores_against_fp32(data: dict) -> str | None:
    """Versions 11 and 10 beside cuBLAS FP32 at each recorded size, from ``sgemm_tensor_cores.json``, e.g.
    "at 4096³ version 11 takes 1.22 ms, 2.2× the speed of cuBLAS FP32 (2.66 ms), and version 10 1.79 ms";
    None when nothing was recorded."""
    rows = [r for r in data.get("results", []) if r.get("median_ms")]
    parts = []
    for n in data.get(tensor_cores.MEASURED_SIZES, []):
        ms = {r["name"]: r["median_ms"] for r in rows if r["group"] == tensor_cores.square(n)}
        v11, v10, fp32 = (ms.get(name) for name in (tensor_cores.V11, tensor_cores.V10, tensor_cores.CUBLAS_FP32))
        if v11 is None or fp32 is None:
            continue
        text = f"at {n}³ version 11 takes {v11:.3g} ms, {relative_speed(1 / v11, 1 / fp32)} cuBLAS FP32 ({fp32:.3g} ms)"
        if v10 is not None:
            text += f", and version 10 {v10:.3g} ms"
        parts.append(text)
    return "; ".join(parts) or None


#: What the convolution chapter's sentence compares on C3.
_BASIC, _TILED = (profiles.C3_NAIVE, "the basic kernel"), (profiles.C3_TILED, "the tiled one")
C3_PROFILE_PAIRS = (
    ("achieved_occupancy_percent", "achieved occupancy", "{:.0f} %", _BASIC, _TILED),
    ("global_load_requests", "global load requests", "{:,.0f}", _BASIC, _TILED),
    ("shared_bank_conflicts", "shared-memory bank conflicts", "{:,.0f}", _BASIC, _TILED),
)


# --- attention ----------------------------------------------------------------------------------

ATTENTION_NOT_MEASURED = ("(not measured yet: `python -m benchmarks.attention` on a GPU records the figures in "
                          "`benchmarks/results/attention.json`)")
#: What each of the attention chapter's goals compares (``summary["goals"]`` of attention.json).
ATTENTION_GOALS = {
    attention.FORWARD_VS_SDPA: "the BF16 forward (version 4) runs at {ratio} of the speed of SDPA's flash kernel",
    attention.BACKWARD_VS_SDPA: "the BF16 backward runs at {ratio} of the speed of SDPA's flash kernel",
    attention.FUSED_VS_UNFUSED_FLOAT: "the fused float forward (version 3) is {ratio} times as fast as the unfused version 1",
    attention.FLOAT_TIMES_BOUND: "the fused float forward takes {ratio} times its own bound (the FP32 roof or the memory floor)",
}


def attention_goal(data: dict | None, *goals: str) -> str:
    """The attention chapter's goals at the sequence length they are set at, per head dimension and mask: each
    recorded ratio, the target and how many of the cases meet it (one clause per goal)."""
    clauses = []
    for goal in goals:
        found = [g for g in (data or {}).get("summary", {}).get("goals", []) if g["goal"] == goal]
        if not found:
            continue
        parts = [ATTENTION_GOALS[goal].format(ratio=f"{g['ratio']:.2f}") + f" (d = {g['head_dim']}"
                 + (", causal)" if g["causal"] else ")") for g in found]
        met = sum(bool(g["met"]) for g in found)
        verdict = "met in every case" if met == len(found) else f"met in {met} of the {len(found)} cases"
        clauses.append("; ".join(parts) + f": the goal, {found[0]['target']}, is {verdict}")
    if not clauses:
        return ATTENTION_NOT_MEASURED
    return f"on the {device_name(data)} at N = 4096, " + ". Also, ".join(clauses)


def attention_training_step(data: dict | None) -> str:
    """The transformer block's training step with the op against the same step with SDPA."""
    rows = [r for r in (data or {}).get("results", []) if r.get("group") == attention.TRAINING_STEP and r.get("median_ms")]
    ours = next((r for r in rows if r["kind"] == "kernel"), None)
    peer = next((r for r in rows if r["kind"] == "peer"), None)
    if ours is None or peer is None:
        return ATTENTION_NOT_MEASURED
    agree = (data.get("summary", {}).get("training_step_losses_agree"))
    return (f"{ours['median_ms']:.2f} ms per step with `dlk::attention`, {peer['median_ms']:.2f} ms with SDPA "
            f"(batch {ours['batch']}, N = {ours['seq']}, {ours['heads']} heads of {ours['dim'] // ours['heads']}, BF16, "
            f"on the {device_name(data)}): the step with the book's kernels runs at "
            f"{relative_speed(1 / ours['median_ms'], 1 / peer['median_ms'])} the step with SDPA, with "
            f"{'the same' if agree else 'a different'} first loss")


def attention_forward_tiling(head_dims=(64, 128)) -> str:
    """How version 4 tiles the work in its configuration of each head dimension (attention_bf16.DEFAULT_CONFIGS)."""
    parts = []
    for d in head_dims:
        g = attention_bf16.geometry(d)
        per_warp = 16 * g["m_tiles"]
        mma = 2 * g["m_tiles"] * (d // 16) * (g["keys"] // 16)     # per warp and key tile, for each product
        q = ("keeps its rows' Q fragments in registers for the whole walk" if g["q_in_registers"] else
             f"reads its Q fragments from shared memory at every tile (its {g['m_tiles']} tiles of 16 rows share "
             f"every fragment of K and V it loads)")
        parts.append(f"at d = {d} a block of {g['warps']} warps owns {g['rows']} query rows, {per_warp} per warp, "
                     f"and each warp {q}; per key tile of {g['keys']} keys a warp computes its {per_warp} × "
                     f"{g['keys']} scores with {mma} `mma`, runs the online softmax on the accumulators, and "
                     f"multiplies by V with {mma} more")
    return "; ".join(parts)


def attention_backward_tiling(head_dims=(64, 128)) -> str:
    """How the BF16 backward tiles its work in the configuration of each head dimension."""
    return "; ".join(f"at d = {d} a block of {g['backward_warps']} warps owns {g['tile']} keys, 16 per warp, and "
                     f"walks query tiles of {g['queries']}"
                     for d, g in ((d, attention_bf16.geometry(d)) for d in head_dims))


def _attention_profile_pairs(keys, ours: str, peer: str):
    return [(key, what, fmt, (ours, ours.split(",")[0]), (peer, "SDPA's flash kernel")) for key, what, fmt in keys]


#: The profiler's figures the attention chapter states, for the BF16 kernels beside SDPA's.
ATTENTION_PROFILE_KEYS = (
    ("tensor_pipe_percent", "tensor pipe busy", "{:.0f} % of cycles"),
    ("issue_slots_percent", "issue slots used", "{:.0f} %"),
    ("wait_stall_percent", "warps waiting on a fixed-latency result", "{:.0f} % of their time"),
    ("short_scoreboard_stall_percent", "waiting on shared memory or the exponential unit", "{:.0f} %"),
)


def attention_profiles(data: dict | None, ours: dict[int, str], peer: dict[int, str], head_dims=(64, 128)) -> str:
    """Nsight Compute's figures (``attention.PROFILES`` of attention.json, N = 4096, no mask) of one of our kernels
    beside SDPA's, per head dimension; ``ours`` and ``peer`` are the profiled steps by head dimension
    (``attention.PROFILED_V4``, ``attention.PROFILED_SDPA_FORWARD``...)."""
    rows = (data or {}).get(attention.PROFILES, [])
    parts = []
    for d in head_dims:
        said = profiled_side_by_side(rows, _attention_profile_pairs(ATTENTION_PROFILE_KEYS, ours[d], peer[d]))
        if said:
            parts.append(f"at d = {d}, {said}")
    if not parts:
        return ATTENTION_NOT_MEASURED
    return f"on the {device_name(data)} at N = 4096 without the mask, " + "; ".join(parts)


def attention_tensor_core_share(data: dict | None, head_dims=(64, 128)) -> str:
    """Version 4's rate at N = 4096 without the mask against a large BF16 matrix product's on the same card."""
    gemm = (data or {}).get("summary", {}).get("bf16_matmul_gflops")
    rates = [(d, next((r["gflops"] for r in (data or {}).get("results", []) if r["name"] == attention.V4
                       and r["group"] == attention.FORWARD and r.get("seq") == 4096 and r.get("head_dim") == d
                       and not r.get("causal") and r.get("gflops")), None)) for d in head_dims]
    rates = [(d, rate) for d, rate in rates if rate]
    if not gemm or not rates:
        return ATTENTION_NOT_MEASURED
    return ("at N = 4096 without the mask version 4 runs at "
            + " and ".join(f"{rate / 1e3:,.0f} TFLOP/s at d = {d}" for d, rate in rates) + ", "
            + " and ".join(f"{rate / gemm:.0%}" for _, rate in rates)
            + f" of the {gemm / 1e3:,.0f} TFLOP/s a large BF16 matrix product (`torch.matmul`, cuBLAS on `wgmma`) "
              f"reaches on the {device_name(data)}")


#: Version 3's limits: how busy its FP32 units are, and what its warps wait for.
FLOAT_PROFILE_KEYS = (
    ("fma_pipe_percent", "FMA pipe busy {} % of cycles", "{:.0f}"),
    ("issue_slots_percent", "{} % of the issue slots used", "{:.0f}"),
    ("short_scoreboard_stall_percent", "warps waiting on shared memory {} % of their time", "{:.0f}"),
    ("shared_bank_conflicts", "{} shared-memory bank conflicts", "{:,.0f}"),
    ("achieved_occupancy_percent", "{} % of the warp slots occupied", "{:.0f}"),
)


def attention_float_limits(data: dict | None, head_dims=(64, 128)) -> str:
    """What bounds version 3: Nsight Compute's figures of it, and, where the fused-against-unfused goal is missed,
    the most any float kernel of its arithmetic could gain on version 1 (version 1's time over version 3's roof)."""
    rows = (data or {}).get(attention.PROFILES, [])
    parts = []
    for d in head_dims:
        figures = [text.format(fmt.format(value)) for key, text, fmt in FLOAT_PROFILE_KEYS
                   if (value := _figure(rows, attention.PROFILED_V3[d], key)) is not None]
        if figures:
            parts.append(f"at d = {d}, " + ", ".join(figures))
    said = ("Nsight Compute's figures of version 3 at N = 4096 without the mask: " + "; ".join(parts) + ". ") if parts else ""
    results = (data or {}).get("results", [])
    for goal in (data or {}).get("summary", {}).get("goals", []):
        if goal["goal"] != attention.FUSED_VS_UNFUSED_FLOAT or goal["met"]:
            continue

        def row(name, goal=goal):
            return next((r for r in results if r["name"] == name and r["group"] == attention.FORWARD
                         and r.get("seq") == 4096 and r.get("head_dim") == goal["head_dim"]
                         and r.get("causal") == goal["causal"] and r.get("median_ms")), None)

        v1, v3 = row(attention.V1), row(attention.V3)
        if v1 and v3:
            said += (f"At d = {goal['head_dim']}{', causal' if goal['causal'] else ''}, version 1 takes "
                     f"{v1['median_ms']:.1f} ms and version 3's FP32 roof is {v3['roof_ms']:.2f} ms: no float kernel "
                     f"doing its arithmetic could be more than {v1['median_ms'] / v3['roof_ms']:.1f} times as fast "
                     f"as version 1 (the goal asks for {goal['target']:g}). ")
    return said.strip() or ATTENTION_NOT_MEASURED
