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

from benchmarks import attention, capsules, cnn, conv_as_gemm, cuda_from_python, index_notation, perceptrons_mlp, profiles
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
    """The physical limit of the recorded run: the memory's peak by its specification, the fastest copy measured
    (the book's and the libraries'), and the yardstick the tables' percentages use."""
    copy_gbs = data["peaks"]["bandwidth_gbs"]
    rows = [r for r in data.get("results", []) if r.get("gbs")]
    copies = [r for r in rows if r["group"] == cuda_from_python.COPY]
    ours = max((r for r in copies if r["kind"] == "kernel"), key=lambda r: r["gbs"], default=None)
    library = max((r for r in copies if r["kind"] == "peer"), key=lambda r: r["gbs"], default=None)
    fastest = max(rows, key=lambda r: r["gbs"], default=None)
    dram = dram_bandwidth_gbs(data)
    device = data.get("device", {})
    text = ""
    if dram:
        text += (f"On the {device_name(data)} the memory's peak, by its specification, is {dram:,.0f} GB/s: two "
                 f"transfers per clock of {device['memory_clock_mhz']:,.0f} MHz on a {device['memory_bus_bits']:,}-bit "
                 f"bus. ")
    measured = []
    if ours:
        measured.append(f"the book's fastest copy, `{ours['name']}`, moved {ours['gbs']:,.0f} GB/s"
                        + (f" ({ours['gbs'] / dram:.0%} of the peak)" if dram else ""))
    if library:
        measured.append(f"`{library['name']}` {library['gbs']:,.0f} GB/s"
                        + (f" ({library['gbs'] / dram:.0%})" if dram else ""))
    if measured:
        text += "In the same run " + " and ".join(measured) + ". "
    if fastest and fastest not in (ours, library) and fastest["gbs"] > max(r["gbs"] for r in copies):
        text += (f"Faster than any copy was `{fastest['name']}` ({fastest['group']}), {fastest['gbs']:,.0f} GB/s. ")
    text += (f"The 100 % line of the tables below is `{cuda_from_python.PEAK_COPY}`'s {copy_gbs:,.0f} GB/s: a "
             f"yardstick measured in the same run, not the ceiling")
    beyond = [r for r in rows if r["gbs"] > copy_gbs * (1 + SAME_SPEED / 5)]
    if beyond:
        text += f"; {len(beyond)} of the rows go past it, up to {max(r['gbs'] for r in beyond) / copy_gbs:.0%}"
    return text + "."


def versions_recorded(data: dict, kernels_by_group: dict[str, list[str]]) -> str:
    """Whether the recorded run has a row for every kernel the records list, group by group: empty when it has,
    else a sentence naming the kernels it lacks (written after the run) and the command that measures them."""
    names = {(r["group"], r["name"]) for r in (data or {}).get("results", []) if r.get("gbs")}
    missing = [kernel for group, kernels in kernels_by_group.items() for kernel in kernels if (group, kernel) not in names]
    if not missing:
        return "Every version of this page is in the recorded run."
    listed = " and ".join(f"`{k}`" for k in missing)
    return (f"The recorded run has no row for {listed}, written after it was measured: the tables below show only "
            f"the versions it measured, and say nothing yet about {'this one' if len(missing) == 1 else 'these'}.")


def block_size_sweep(data: dict) -> str:
    """What the block-size sweep of version 1 shows: the fastest block size, and the small blocks whose time is
    the number of blocks times a constant (so the blocks, not the bytes, set the time)."""
    sweep = sorted(data.get(cuda_from_python.BLOCK_SWEEP) or [], key=lambda r: r["block"])
    if not sweep:
        return "(the block-size sweep has not been recorded yet)"
    best = max(sweep, key=lambda r: r["gbs"])
    ns = [(r["block"], r["median_ms"] * 1e6 / r["blocks"], r) for r in sweep]
    first = ns[0][1]
    alike = []
    for block, per_block, r in ns:
        if abs(per_block / first - 1) > SAME_SPEED:
            break
        alike.append((block, per_block, r))
    sms = data.get("device", {}).get("multiprocessors")
    text = (f"On the {device_name(data)}, blocks of {best['block']} threads are the fastest, {best['gbs']:,.0f} GB/s")
    if len(alike) >= 2:
        sizes = ", ".join(str(b) for b, _, _ in alike[:-1]) + f" and {alike[-1][0]}"
        mean = sum(p for _, p, _ in alike) / len(alike)
        text += (f". With blocks of {sizes} threads the time is the number of blocks times the same "
                 f"{mean:.2f} ns")
        if sms:
            text += f" (a block every {mean * sms:,.0f} ns on each of its {sms} SMs)"
        text += (", whatever a block holds: " + ", ".join(f"{r['gbs']:,.0f} GB/s at {b}" for b, _, r in alike))
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


def bias_gradient_bandwidth(data: dict | None, layer: str = cnn.LARGE_LAYER) -> str:
    """The bias gradient's versions 6 and 12 on ``layer`` as shares of the copy bandwidth measured in the same
    run, e.g. "on the NVIDIA H100 80GB HBM3, versions 6 and 12 read at these shares of the copy bandwidth measured
    in the same run: `bias_split S=auto` at 56 % (1,599 GB/s) and `bias_planes S=auto` at 72 % (2,043 GB/s)"."""
    rows = [r for r in _backward_timed(data) if r.get("layer") == layer and r.get("gradient") == cnn.BIAS
            and r["kind"] == "kernel"]
    found = [next((r for r in rows if r["name"] == f"{prefix} S=auto"), None)
             for prefix in (cnn.BIAS_SPLIT, cnn.BIAS_PLANES)]
    if not all(found):
        return BACKWARD_NOT_MEASURED
    parts = [f"`{r['name']}` at {r['percent_of_peak_bandwidth']:.0f} % ({r['gbs']:,.0f} GB/s)" for r in found]
    return (f"on the {device_name(data)}, versions 6 and 12 read at these shares of the copy bandwidth measured in "
            f"the same run: " + " and ".join(parts))


def filter_banks_in_constant_memory(layers, capacity_floats: int) -> str:
    """Which filter banks of ``layers`` ((name, input maps, output maps, K), as ``kernels.models.lenet.CONV_LAYERS``)
    fit ``capacity_floats`` of constant memory, e.g. "C1's 150 and C3's 2,400 floats fit; C5's 48,000 do not"."""
    sizes = [(name, c * m * k * k) for name, c, m, k in layers]
    fit = [f"{name}'s {n:,}" for name, n in sizes if n <= capacity_floats]
    over = [f"{name}'s {n:,}" for name, n in sizes if n > capacity_floats]
    text = " and ".join(fit) + " floats fit" if fit else "none fits"
    if over:
        text += "; " + " and ".join(over) + " do not"
    return text


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


def fp32_peak(data: dict | None) -> str:
    """The FP32 peak the run measured (chains of fused multiply-adds), with its device."""
    peak = (data or {}).get("peaks", {}).get("fp32_gflops")
    if not peak:
        return "(the FP32 peak has not been recorded yet)"
    return f"the FP32 peak measured on the {device_name(data)}, {peak / 1e3:,.1f} TFLOP/s of fused multiply-adds"


def speedup_between(data: dict | None, group: str, before: str, after: str) -> str:
    """How many times faster the row ``after`` of ``group`` ran than ``before``, e.g. "11.8×"."""
    ms = {r["name"]: r["median_ms"] for r in (data or {}).get("results", []) if r["group"] == group and r.get("median_ms")}
    if before not in ms or after not in ms:
        return "(not recorded yet)"
    return f"{ms[before] / ms[after]:.1f}×"


def sgemm_best_share(gemm_data: dict | None) -> str:
    """The FP32 ladder's best step as a share of cuBLAS's speed, with the device, e.g. "95 % of cuBLAS's speed on
    the NVIDIA H100 80GB HBM3"."""
    shares = [r["percent_of_cublas"] for r in (gemm_data or {}).get("results", [])
              if r["group"] == conv_as_gemm.SGEMM and r["kind"] == "kernel" and r.get("percent_of_cublas")]
    if not shares:
        return "(a share of cuBLAS's speed not recorded yet)"
    return f"{max(shares):.0f} % of cuBLAS's speed on the {device_name(gemm_data)}"


def sgemm_ladder_span(gemm_data: dict) -> str:
    """The FP32 ladder's first and last step as shares of cuBLAS's speed, e.g. "from 0.97 % of cuBLAS's speed
    (the naive kernel) to 95 % (warp tiling) at 4096³ on the NVIDIA H100 80GB HBM3"."""
    ladder = [r for r in (gemm_data or {}).get("results", []) if r["group"] == conv_as_gemm.SGEMM
              and r["kind"] == "kernel" and r.get("percent_of_cublas")]
    if len(ladder) < 2:
        return "(the GEMM chapter's figures have not been recorded yet)"
    first, last = ladder[0], max(ladder, key=lambda r: r["percent_of_cublas"])
    return (f"from {first['percent_of_cublas']:.2g} % of cuBLAS's speed (`{first['name']}`) to "
            f"{last['percent_of_cublas']:.0f} % (`{last['name']}`) at {last['M']}³ on the {device_name(gemm_data)}")


def cudnn_kernels(gemm_data: dict, layer: str) -> str:
    """The GPU kernels cuDNN ran for ``layer`` in its default setting, by their short names, e.g.
    "`flip_filter`, `fft2d_r2c_32x32` (twice) and `sm80_xmma_gemm_cf32cf32_…`"."""
    peer = next((r for r in (gemm_data or {}).get("results", []) if r["group"] == conv_as_gemm.CONV
                 and r["kind"] == "peer" and r.get("layer") == layer and r.get("kernels")), None)
    if peer is None:
        return "(cuDNN's kernels have not been recorded yet)"
    names = []
    for kernel in peer["kernels"]:
        short = kernel.split("(")[0].replace("void ", "").split("<")[0]
        short = short if len(short) <= 40 else short[:short.index("_", 20)] + "_…"
        names.append(short)
    counted = [(n, names.count(n)) for n in dict.fromkeys(names)]
    words = [f"`{n}`" + (f" ({in_words_count(k)})" if k > 1 else "") for n, k in counted]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def in_words_count(k: int) -> str:
    return {2: "twice", 3: "three times"}.get(k, f"{k} times")


def partial_sums_accuracy(tensor_data: dict) -> str:
    """Version 10 without its float partial sums next to version 10 and cuBLAS FP32, largest errors at the
    search size, e.g. "4.6e-06, 36× version 10's largest error (1.3e-07) and 11× cuBLAS FP32's (4.2e-07)"."""
    data = tensor_data or {}
    rows = {(r["group"], r["name"]): r for r in data.get("results", []) if r.get("max_error") is not None}
    group = tensor_cores.square(tensor_cores.SEARCH_SIZE)
    without = rows.get((tensor_cores.NO_PARTIAL_SUMS, tensor_cores.V10_NO_PARTIAL_SUMS))
    v10, fp32 = rows.get((group, tensor_cores.V10)), rows.get((group, tensor_cores.CUBLAS_FP32))
    if not (without and v10 and fp32):
        return "(the tensor-core errors have not been recorded yet)"
    e, e10, e32 = without["max_error"], v10["max_error"], fp32["max_error"]
    return (f"at K = {tensor_cores.SEARCH_SIZE} on the {device_name(data)} its largest error is {e:.1e}: "
            f"{e / e10:.0f}× version 10's with the partial sums ({e10:.1e}) and {e / e32:.0f}× cuBLAS FP32's "
            f"({e32:.1e})")


def tf32_headroom(tensor_data: dict | None) -> str:
    """cuBLAS TF32 against cuBLAS FP32 at the search size, and what three TF32 products at that speed would allow,
    e.g. "cuBLAS TF32 ran 7.7× as fast as cuBLAS FP32 at 4096³ on the NVIDIA H100 80GB HBM3, so three TF32
    products at its speed would allow 2.6×"."""
    data = tensor_data or {}
    group = tensor_cores.square(tensor_cores.SEARCH_SIZE)
    ms = {r["name"]: r["median_ms"] for r in data.get("results", []) if r["group"] == group and r.get("median_ms")}
    if tensor_cores.CUBLAS_TF32 not in ms or tensor_cores.CUBLAS_FP32 not in ms:
        return "(cuBLAS's TF32 and FP32 timings have not been recorded yet)"
    ratio = ms[tensor_cores.CUBLAS_FP32] / ms[tensor_cores.CUBLAS_TF32]
    return (f"cuBLAS TF32 ran {ratio:.1f}× as fast as cuBLAS FP32 at {tensor_cores.SEARCH_SIZE}³ on the "
            f"{device_name(data)}, so three TF32 products at its speed would allow {ratio / 3:.1f}×")


def v11_error_against_fp32(tensor_data: dict | None) -> str:
    """Version 11's largest error beside cuBLAS FP32's at each recorded size, e.g. "1.3e-07 against 4.2e-07 at
    4096³"."""
    data = tensor_data or {}
    errors = {(r["group"], r["name"]): r["max_error"] for r in data.get("results", []) if r.get("max_error")}
    parts = [f"{errors[(tensor_cores.square(n), tensor_cores.V11)]:.1e} against "
             f"{errors[(tensor_cores.square(n), tensor_cores.CUBLAS_FP32)]:.1e} at {n}³"
             for n in data.get(tensor_cores.MEASURED_SIZES, [])
             if (tensor_cores.square(n), tensor_cores.V11) in errors
             and (tensor_cores.square(n), tensor_cores.CUBLAS_FP32) in errors]
    return "; ".join(parts) or "(the errors have not been recorded yet)"


def tensor_cores_summary(tensor_data: dict) -> str:
    """Versions 11 and 10 as multiples of cuBLAS FP32's speed at the largest recorded sizes, e.g. "version 11
    at 2.2× cuBLAS FP32's speed at 4096³ and 8192³, version 10 at 1.5× and 1.6×"."""
    data = tensor_data or {}
    sizes = [n for n in data.get(tensor_cores.MEASURED_SIZES, []) if n >= tensor_cores.SEARCH_SIZE]
    ms = {(r["group"], r["name"]): r["median_ms"] for r in data.get("results", []) if r.get("median_ms")}
    parts = []
    for name in (tensor_cores.V11, tensor_cores.V10):
        label = name.split(":")[0]  # "version 11: 3xTF32, wgmma fed by TMA" -> "version 11"
        ratios = [ms[(tensor_cores.square(n), tensor_cores.CUBLAS_FP32)] / ms[(tensor_cores.square(n), name)]
                  for n in sizes if (tensor_cores.square(n), name) in ms
                  and (tensor_cores.square(n), tensor_cores.CUBLAS_FP32) in ms]
        if ratios:
            parts.append(f"{label} at " + " and ".join(f"{x:.1f}×" for x in ratios))
    if not parts:
        return "(the tensor-core timings have not been recorded yet)"
    where = " and ".join(f"{n}³" for n in sizes)
    return "; ".join(parts) + f" cuBLAS FP32's speed at {where} (on the {device_name(data)})"


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


def capsule_floor(data: dict | None) -> str:
    """The forward kernel's memory floor as recorded: its bytes over the copy bandwidth of the same run."""
    summary, peaks = (data or {}).get("summary", {}), (data or {}).get("peaks", {})
    if "forward_floor_us" not in summary or "bandwidth_gbs" not in peaks:
        return "(not recorded yet)"
    return (f"{summary['forward_bytes'] / 1e6:,.0f} MB at the {peaks['bandwidth_gbs']:,.0f} GB/s our copy moved on the "
            f"{device_name(data)}: {summary['forward_floor_us']:.1f} µs")


def capsule_training_step(data: dict | None) -> str:
    """The capsule layer's training step through the op next to the pure-PyTorch step, as recorded."""
    summary = (data or {}).get("summary", {})
    if "training_step_us" not in summary:
        return "(the training step has not been measured yet)"
    ours, theirs = summary["training_step_us"], summary["training_step_pure_pytorch_us"]
    return (f"on the {device_name(data)} the step through the op takes {ours:,.0f} µs of GPU time and the "
            f"pure-PyTorch step {theirs:,.0f} µs: the op's step runs at {relative_speed(1 / ours, 1 / theirs)} "
            f"the pure-PyTorch one")


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

def bytes_at_copy_bandwidth(data: dict | None, nbytes: float) -> str:
    """How long ``nbytes`` take at the copy bandwidth the run measured, e.g. "58 µs at the 2,829 GB/s our copy moved
    on the NVIDIA H100 80GB HBM3"."""
    bandwidth = (data or {}).get("peaks", {}).get("bandwidth_gbs")
    if not bandwidth:
        return "(the copy bandwidth has not been recorded yet)"
    return (f"{nbytes / (bandwidth * 1e9) * 1e6:,.0f} µs at the {bandwidth:,.0f} GB/s our copy moved on the "
            f"{device_name(data)}")


def lsoftmax_fastest_by_classes(data: dict | None) -> str:
    """Per class count, the fastest version of the layer and the tensor-core version's time, as recorded."""
    per = (data or {}).get("summary", {}).get("per_classes", {})
    parts = []
    for classes, s in per.items():
        us = s.get("layer_us", {})
        if not us:
            continue
        best = s["fastest_version"]
        text = (f"at {int(classes):,} classes the fastest is `{best}`, {us[best]:,.0f} µs a step "
                f"({s['speedup_vs_torch']:.1f}× PyTorch's speed)")
        if "tensor_cores" in us and best != "tensor_cores":
            text += f", and `tensor_cores` takes {us['tensor_cores']:,.0f} µs"
        parts.append(text)
    if not parts:
        return "(the layer has not been measured yet)"
    return f"on the {device_name(data)}, " + "; ".join(parts)


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


# --- index notation ---------------------------------------------------------------------------

def generated_against_handwritten(data: dict | None) -> str:
    """Per workload, the autotuned generated kernel against the fastest hand-written one of the earlier chapters:
    where generation wins and where it loses, with the ratios recorded."""
    rows = [r for r in (data or {}).get("results", []) if r.get("median_ms")]
    wins, losses = [], []
    for workload in index_notation.WORKLOADS:
        here = [r for r in rows if r["group"] == workload]
        generated = next((r for r in here if r["name"] == index_notation.AUTOTUNED), None)
        hand = min((r for r in here if r.get("source") == index_notation.HANDWRITTEN),
                   key=lambda r: r["median_ms"], default=None)
        if generated is None or hand is None:
            continue
        ratio = hand["median_ms"] / generated["median_ms"]
        if ratio >= 1 + SAME_SPEED:
            wins.append(f"{workload} ({ratio:.1f}× the speed of `{hand['name']}`)")
        elif ratio <= 1 - SAME_SPEED:
            losses.append(f"{workload} ({ratio:.0%} of the speed of `{hand['name']}`)")
        else:
            wins.append(f"{workload} (about as fast as `{hand['name']}`)")
    if not wins and not losses:
        return "(the comparison has not been recorded yet)"
    text = f"on the {device_name(data)}, the autotuned generated kernel "
    said = []
    if wins:
        said.append("is at least as fast as the fastest hand-written kernel on " + "; ".join(wins))
    if losses:
        said.append("loses on " + "; ".join(losses))
    return text + ", and ".join(said)


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
