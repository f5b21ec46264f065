"""The book's scoreboard: per chapter, our fastest kernel of each comparison against its peer.

Every comparison a chapter makes with a library (cuBLAS, cuDNN, PyTorch) is one entry of
:data:`COMPARISONS`: which results file (and which part of it) holds the rows, which group,
layer and names are the kernels and which the peer, each named by the constants of the benchmark
that writes the file (its :class:`~benchmarks.common.Contract`).  :func:`scoreboard` resolves each entry
against ``benchmarks/results/`` (read by :meth:`SpeedFigures.every_run`, the one loader) into a
:class:`Score`: the fastest timed, correct kernel row, the fastest peer row measured in the same
run (same file, same part of it, same group and layer), the ratio peer time / our time (above 1:
ours is faster) and how close our kernel comes to the physical limit of the GPU it ran on.
A benchmark run on more than one kind of GPU has a file per GPU (``<file>.json`` and tagged
files such as ``<file>_h200.json``, see ``benchmarks/common.py``): a comparison then has a score
per GPU, each from one file.  An entry whose file or rows are missing becomes a "not measured"
score, never a missing line::

    from book import scoreboard
    scores = scoreboard.scoreboard()
    display(HTML(scoreboard.html_table(scores)))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import capsules, cnn, index_notation
from benchmarks import conv_as_gemm as gemm, cuda_from_python as basics, large_margin_softmax as lsm
from benchmarks import perceptrons_mlp as mlp, sgemm_bf16 as bf16, sgemm_tensor_cores as tensor_cores
from book.chapters import chapter
from book.speed_figures import SpeedFigures
from kernels.tools.roofline import Peaks, achieved

#: A filter on the rows: a field's value, or a tuple of the values allowed.
Filter = dict


@dataclass(frozen=True)
class Comparison:
    """One comparison a chapter makes: the rows of one run that are ours and the rows that are the peer's."""

    chapter: str  # its name in book.chapters
    label: str  # what is compared, in a few words
    results: str  # benchmarks/results/<results>.json
    groups: tuple[str, ...]  # the rows' "group"
    layer: str | None = None  # the rows' "layer", where the file measures several
    kernels: Filter = field(default_factory=dict)  # more fields the kernel rows must have
    peers: Filter = field(default_factory=dict)  # more fields the peer rows must have
    #: Keep only the rows at the largest value of this field (a sweep's largest size).
    largest: str | None = None
    #: A part of the file measured in a run of its own, with its own device and date (see SECTIONS).
    section: str | None = None
    #: The shape, formatted from the file's, its summary's and the chosen rows' fields.
    shape: str = ""

    def __post_init__(self):
        # A bare string would match its own substrings ("forward" in "forward_fused" is no group of it).
        if isinstance(self.groups, str) or not self.groups:
            raise TypeError(f"groups must be a non-empty tuple of group names, not {self.groups!r}")

    @property
    def source(self) -> str:
        return f"{self.results}.json" + (f", {self.section}" if self.section else "")


@dataclass(frozen=True)
class Score:
    """A line of the scoreboard; ``kernel`` is None where the comparison was not measured."""

    chapter: str  # "3. Convolutional networks"
    label: str  # what is compared, in a few words
    what: str  # the label, with the shape where measured
    source: str  # the results file (and part) its figures come from: cnn.json, cnn_h200.json
    kernel: str | None = None
    kernel_ms: float | None = None
    peer: str | None = None
    peer_ms: float | None = None
    percent_of_limit: float | None = None  # of the roof that bounds our kernel
    roof: str | None = None  # "bandwidth" or "FP32"
    gpu: str | None = None
    date: str | None = None
    missing: str | None = None  # why it was not measured

    @property
    def measured(self) -> bool:
        return self.missing is None

    @property
    def ratio(self) -> float | None:
        """The peer's time over ours: above 1, our kernel is the faster."""
        return self.peer_ms / self.kernel_ms if self.measured else None

    @property
    def gpu_short(self) -> str:
        """The GPU's model, as a column names it: "H100" for "NVIDIA H100 80GB HBM3"."""
        return short_gpu_name(self.gpu) if self.gpu else ""


def short_gpu_name(name: str) -> str:
    words = [w for w in name.split() if w.upper() not in ("NVIDIA", "TESLA", "GEFORCE")]
    return words[0] if words else name


# --- which rows are compared ---------------------------------------------------------------------

CNN_LAYERS = cnn.LAYER_NAMES
GEMM_CONV_LAYERS = gemm.LAYER_NAMES
#: The SGEMM shapes of other chapters' layers that the GEMM chapter measures apart (section sgemm_shapes).
SGEMM_SHAPES = gemm.SHAPE_LABELS
INDEX_NOTATION_WORKLOADS = index_notation.WORKLOADS

COMPARISONS: tuple[Comparison, ...] = (
    # 1. CUDA from Python: one pass over memory each, against torch and CuPy doing the same.
    Comparison("cuda_from_python", "vector add", basics.NAME, (basics.VECTOR_ADD,), shape="n = {n:,}"),
    Comparison("cuda_from_python", "SAXPY", basics.NAME, (basics.SAXPY,), shape="n = {n:,}"),
    Comparison("cuda_from_python", "device copy", basics.NAME, (basics.COPY,), shape="n = {n:,}"),
    Comparison("cuda_from_python", "sum", basics.NAME, (basics.REDUCE_SUM,), shape="n = {n:,}"),
    # 2. Perceptrons and MLPs.
    Comparison("perceptrons_mlp", "perceptron forward", mlp.NAME, (mlp.PERCEPTRON,),
               kernels={"name": mlp.PERCEPTRON_FORWARD}, shape="{n:,} × {d}"),
    Comparison("perceptrons_mlp", "gradient sum over a minibatch", mlp.NAME, (mlp.GRADIENT_SUM_SWEEP,),
               largest="n", shape="{n:,} × {k}"),
    *(Comparison("perceptrons_mlp", f"dense layer {what}, {size} size", mlp.NAME, (group,),
                 kernels={"name": ours}, peers={"name": peer}, shape="{n:,} × {in} → {out}")
      for group, size in ((mlp.FC_DIGITS, "digits"), (mlp.FC_LARGE, "large"))
      for what, (ours, peer) in mlp.DENSE_PRODUCTS.items()),
    Comparison("perceptrons_mlp", "softmax + cross-entropy", mlp.NAME, (mlp.SOFTMAX,),
               kernels={"name": mlp.CROSS_ENTROPY}, peers={"name": mlp.TORCH_CROSS_ENTROPY}, shape="{n:,} × {c}"),
    Comparison("perceptrons_mlp", "ReLU", mlp.NAME, (mlp.SOFTMAX,), kernels={"name": mlp.RELU},
               peers={"name": mlp.TORCH_RELU}, shape="{n:,} × {c}"),
    # The whole training step of the digits network, host minibatch to host loss, against PyTorch's.
    Comparison("perceptrons_mlp", "MLP training step", mlp.NAME, (mlp.TRAINING_STEP,),
               shape="{layers} network, batch {batch}"),
    # 3. Convolutional networks: the forward versions against cuDNN's convolution; the fused layer
    # (convolution, bias, ReLU, pooling) against PyTorch's chain of calls; each gradient against autograd.
    *(Comparison("cnn", f"conv forward {layer}", cnn.NAME, (cnn.FORWARD,), layer=layer, shape="batch {N}")
      for layer in CNN_LAYERS),
    *(Comparison("cnn", f"conv+bias+ReLU+pool {layer}", cnn.NAME, (cnn.FORWARD_FUSED,), layer=layer,
                 shape="batch {N}") for layer in CNN_LAYERS[:2]),
    # The weight gradient's kernels include those that compute the bias gradient too; they are set
    # against PyTorch's weight gradient alone, which does less (the chapter counts them so as well).
    *(Comparison("cnn", f"conv backward {gradient} {layer}", cnn.BACKWARD_NAME, (cnn.BACKWARD,), layer=layer,
                 kernels={"gradient": cnn.counted_for(gradient)}, peers={"gradient": gradient}, shape="batch {N}")
      for layer in CNN_LAYERS for gradient in cnn.GRADIENTS),
    # 4. Convolution as matrix multiplication.
    Comparison("conv_as_gemm", "SGEMM", gemm.NAME, (gemm.SGEMM, gemm.SGEMM_SEARCH), shape="{M} × {N} × {K}"),
    Comparison("conv_as_gemm", "SGEMM at 8192³", gemm.NAME, (gemm.SGEMM_TWICE,), shape="{M} × {N} × {K}"),
    Comparison("conv_as_gemm", "im2col", gemm.NAME, (gemm.IM2COL,), layer=GEMM_CONV_LAYERS[0],
               shape="{layer}, batch {batch}"),
    *(Comparison("conv_as_gemm", f"conv forward {layer}", gemm.NAME, (gemm.CONV,), layer=layer, shape="batch {N}")
      for layer in GEMM_CONV_LAYERS),
    *(Comparison("conv_as_gemm", f"tensor-core SGEMM (3xTF32) {n}³ vs FP32", tensor_cores.NAME, (tensor_cores.square(n),),
                 kernels={"name": (tensor_cores.V11, tensor_cores.V10)}, peers={"name": tensor_cores.CUBLAS_FP32}, shape="{M} × {N} × {K}")
      for n in (4096, 8192)),
    *(Comparison("conv_as_gemm", f"SGEMM {label.split(',')[0]}", gemm.NAME, (label,), section=gemm.SGEMM_SHAPES,
                 shape="{M} × {N} × {K}") for label in SGEMM_SHAPES),
    *(Comparison("conv_as_gemm", f"BF16 GEMM, {group}", bf16.NAME, (group,),
                 kernels={"kernel": bf16.WARP_SPECIALIZED}, peers={"name": bf16.CUBLAS},
                 shape="{batch} × {M} × {N} × {K}")
      for group in (bf16.square(4096), bf16.square(8192), bf16.MLP_DOWN, bf16.QK_128)),
    Comparison("conv_as_gemm", "BF16 GEMM + bias + GELU", bf16.NAME, (bf16.FUSED_GROUP,),
               kernels={"kernel": bf16.FUSED}, peers={"name": bf16.GELU_EPILOGUE}, shape="{M} × {N} × {K}"),
    # 5. Capsules.  einsum's own result is a strided view: the copy (.contiguous()) makes it the
    # contiguous array our kernels write; the view alone is listed too, as the chapter does.
    Comparison("capsules", "capsule prediction", capsules.NAME, (capsules.FORWARD,), peers={"name": capsules.EINSUM},
               shape="batch {batch}, {in_caps}×{in_dim} → {out_caps}×{out_dim}"),
    Comparison("capsules", "capsule prediction vs einsum's view", capsules.NAME, (capsules.FORWARD,),
               peers={"name": capsules.EINSUM_VIEW}, shape="batch {batch}, {in_caps}×{in_dim} → {out_caps}×{out_dim}"),
    Comparison("capsules", "capsule input gradient", capsules.NAME, (capsules.GRAD_INPUT,), shape="batch {batch}"),
    Comparison("capsules", "capsule weight gradient", capsules.NAME, (capsules.GRAD_WEIGHT,), shape="batch {batch}"),
    Comparison("capsules", "capsule backward (both)", capsules.NAME, (capsules.BACKWARD,), shape="batch {batch}"),
    Comparison("capsules", "capsule training step", capsules.NAME, (capsules.TRAINING_STEP,), shape="batch {batch}"),
    # 6. Large-margin softmax: the whole layer, and its three GEMMs, at 10 and 10,000 classes.
    *(Comparison("large_margin_softmax", f"L-Softmax layer, {classes:,} classes", lsm.NAME,
                 (lsm.layer_group(classes),), shape="batch {batch}, dim {dim}")
      for classes in lsm.CLASSES),
    *(Comparison("large_margin_softmax", f"L-Softmax's 3 GEMMs, {classes:,} classes", lsm.NAME,
                 (lsm.gemm_group(classes),), kernels={"name": lsm.OUR_GEMMS},
                 shape="batch {batch}, dim {dim}") for classes in lsm.CLASSES),
    # 7. Index notation: the kernels the compiler generates (not the hand-written ones of other
    # chapters measured beside them) against the library.
    *(Comparison("index_notation", f"generated {workload}", index_notation.NAME, (workload,),
                 kernels={"source": index_notation.GENERATED}) for workload in INDEX_NOTATION_WORKLOADS),
)


# --- the parts of a file that keep their own layout ----------------------------------------------

def _sgemm_shape_rows(section: dict) -> list[dict]:
    """Section ``sgemm_shapes`` of conv_as_gemm.json (one entry a shape, each kernel a key) as rows."""
    rows = []
    names = {"warptile": ("version 7 warptile", "kernel"), "splitk": ("version 8 (planned split-K)", "kernel"),
             "cublas": ("cuBLAS", "peer")}
    for shape in section.get("shapes", []):
        for key, (name, kind) in names.items():
            timed = shape.get(key) or {}
            row = {"name": name, "group": shape["label"], "kind": kind, "flops": shape.get("flops"),
                   **{k: shape[k] for k in ("M", "N", "K") if k in shape}}
            if timed.get("median_us"):
                row["median_ms"] = timed["median_us"] / 1e3
            if "correct" in timed:
                row["correct"] = timed["correct"]
            rows.append(row)
    return rows


#: Parts of a results file measured in runs of their own: how to read each as rows.
SECTIONS = {"sgemm_shapes": _sgemm_shape_rows}


# --- resolving the comparisons -------------------------------------------------------------------

@dataclass(frozen=True)
class _Run:
    """The rows of one run: a whole results file, or one of its SECTIONS."""

    rows: list
    gpu: str
    date: str
    peaks: dict | None
    fields: dict  # scalars of the file and its summary, for the shapes
    source: str  # the file (and part): "cnn_h200.json", "conv_as_gemm.json, sgemm_shapes"
    missing: str | None = None  # why the file holds no such run (the part this comparison reads is not there)


def _run(comparison: Comparison, figures: SpeedFigures) -> _Run:
    """The run a comparison reads in one of its benchmark's recorded files (``missing`` says why there is none)."""
    data = figures.data
    source = figures.path.name + (f", {comparison.section}" if comparison.section else "")
    fields = {k: v for k, v in data.items() if isinstance(v, (int, float, str))}
    summary = figures.summary()
    fields.update({k: v for k, v in summary.items() if isinstance(v, (int, float, str))})
    fields.update(summary.get("shape", {}) if isinstance(summary.get("shape"), dict) else {})
    if comparison.section is None:
        return _Run(figures.rows(), figures.device_name, figures.date, figures.section("peaks"), fields, source)
    if comparison.section not in SECTIONS:
        raise ValueError(f"section {comparison.section!r} of {comparison.results}.json: the scoreboard reads "
                         f"only the sections {sorted(SECTIONS)}")
    section = figures.section(comparison.section)
    if not section:
        return _Run([], figures.device_name, figures.date, None, fields, source,
                    missing=f"no {comparison.section} in {figures.path.name}")
    # A section's device and date are its own; where it names none, it was measured with the file.
    device = section.get("device", data.get("device", {}))
    return _Run(SECTIONS[comparison.section](section), str(device.get("name", figures.device_name)),
                str(section.get("date", data.get("date", "")))[:10], section.get("peaks"), fields, source)


def _matches(row: dict, wanted: Filter) -> bool:
    for key, value in wanted.items():
        allowed = value if isinstance(value, tuple) else (value,)
        if row.get(key) not in allowed:
            return False
    return True


def _timed(row: dict) -> bool:
    """Timed, and not marked wrong: a kernel that gives wrong results has no place on the board."""
    return bool(row.get("median_ms")) and row["median_ms"] > 0 and row.get("correct") is not False \
        and row.get("within_tolerance") is not False


def _candidates(comparison: Comparison, rows: list[dict], kind: str, wanted: Filter) -> list[dict]:
    chosen = [r for r in rows if r["group"] in comparison.groups and r["kind"] == kind
              and (comparison.layer is None or r.get("layer") == comparison.layer) and _matches(r, wanted)]
    if comparison.largest:
        sized = [r for r in rows if r["group"] in comparison.groups and comparison.largest in r]
        if sized:
            top = max(r[comparison.largest] for r in sized)
            chosen = [r for r in chosen if r.get(comparison.largest) == top]
    return [r for r in chosen if _timed(r)]


def limit(row: dict, peaks: dict | None) -> tuple[float | None, str | None]:
    """How close ``row`` came to the roof that bounds it (per cent) and which roof: the row's own
    figure where its benchmark computed one, else computed from its bytes, flops and the run's peaks;
    (None, None) where there is neither."""

    if row.get("percent_of_limit") is not None and row.get("bound") in ("memory", "compute"):
        return float(row["percent_of_limit"]), "bandwidth" if row["bound"] == "memory" else "FP32"
    nbytes, flops = float(row.get("bytes") or 0), float(row.get("flops") or 0)
    if peaks and peaks.get("bandwidth_gbs") and peaks.get("fp32_gflops") and (nbytes or flops):
        a = achieved(nbytes, flops, row["median_ms"] / 1e3,
                     Peaks(bandwidth_gbs=float(peaks["bandwidth_gbs"]), fp32_gflops=float(peaks["fp32_gflops"])))
        return a.percent_of_limit, "bandwidth" if a.bound == "memory" else "FP32"
    if row.get("percent_of_peak_bandwidth") is not None and not flops:
        return float(row["percent_of_peak_bandwidth"]), "bandwidth"
    return None, None


def _shape(comparison: Comparison, fields: dict) -> str:
    try:
        return comparison.shape.format(**fields)
    except (KeyError, ValueError, IndexError):
        return ""  # a file without the fields this shape names: the label alone


def _score(comparison: Comparison, title: str, figures: SpeedFigures) -> Score:
    """The comparison's score from one results file."""
    run = _run(comparison, figures)
    if run.missing:
        return Score(title, comparison.label, comparison.label, run.source, gpu=run.gpu, date=run.date,
                     missing=run.missing)
    kernels = _candidates(comparison, run.rows, "kernel", comparison.kernels)
    peers = _candidates(comparison, run.rows, "peer", comparison.peers)
    if not kernels or not peers:
        return Score(title, comparison.label, comparison.label, run.source, gpu=run.gpu, date=run.date,
                     missing=f"no timed {'kernel' if not kernels else 'peer'} rows in {run.source}")
    ours = min(kernels, key=lambda r: r["median_ms"])
    peer = min(peers, key=lambda r: r["median_ms"])
    shape = _shape(comparison, {**run.fields, **peer, **ours})
    percent, roof = limit(ours, run.peaks)
    return Score(title, comparison.label, f"{comparison.label}, {shape}" if shape else comparison.label,
                 run.source,
                 kernel=ours["name"], kernel_ms=ours["median_ms"], peer=peer["name"], peer_ms=peer["median_ms"],
                 percent_of_limit=percent, roof=roof, gpu=run.gpu, date=run.date)


def resolve(comparison: Comparison, results_dir: Path | str | None = None) -> list[Score]:
    """The comparison's scores from ``<results_dir>/<file>.json`` (default: benchmarks/results): one per
    GPU its benchmark was run on (the file and its tagged files), or one "not measured" if there is none."""
    found = chapter(comparison.chapter)
    title = f"{found.number}. {found.title}"
    runs = SpeedFigures.every_run(comparison.results, results_dir)
    if not runs:
        return [Score(title, comparison.label, comparison.label, comparison.source,
                      missing=f"no {comparison.results}.json")]
    return [_score(comparison, title, figures) for figures in runs]


def scoreboard(results_dir: Path | str | None = None,
               comparisons: tuple[Comparison, ...] = COMPARISONS) -> list[Score]:
    """The scores of every comparison, in the book's order; a comparison's GPUs in the order of its files."""
    return [score for c in comparisons for score in resolve(c, results_dir)]


# --- showing it ----------------------------------------------------------------------------------

def _us(ms: float) -> str:
    us = ms * 1e3
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def _percent(score: Score) -> str:
    if score.percent_of_limit is None:
        return ""
    p = score.percent_of_limit
    number = f"{p:.0f}" if p >= 10 else f"{p:.1f}" if p >= 0.1 else "<0.1"
    return f"{number} % {score.roof}"


#: Inline styles: the book's stylesheet right-aligns table cells (numbers); names read better on the left.
_LEFT = ' style="text-align: left"'
_FASTER = ' style="font-weight: bold; background: #e3f0fb"'


def html_table(scores: list[Score]) -> str:
    """The scoreboard as an HTML table; a ratio of 1 or more (ours the faster) in bold on blue with ▲.
    Rows are headed by their chapter; a comparison measured on several GPUs has a row per GPU under
    one "compared" cell.  The dates are in :func:`sources_text`: the table keeps the page's width."""
    from html import escape

    head = "".join(f"<th{_LEFT if left else ''}>{name}</th>" for name, left in (
        ("compared", True), ("GPU", True), ("our fastest kernel", True), ("µs", False), ("peer", True),
        ("µs", False), ("peer ÷ ours", False), ("of the limit", False)))
    body = []
    for i, s in enumerate(scores):
        if i == 0 or s.chapter != scores[i - 1].chapter:
            body.append(f'<tr><th colspan="8"{_LEFT}>{escape(s.chapter)}</th></tr>')
        cells = ""
        if i == 0 or (s.chapter, s.label) != (scores[i - 1].chapter, scores[i - 1].label):
            span = 1
            while i + span < len(scores) and (scores[i + span].chapter, scores[i + span].label) == (s.chapter, s.label):
                span += 1
            what = next((x.what for x in scores[i:i + span] if x.measured), s.what)
            cells += f'<td{_LEFT} rowspan="{span}">{escape(what)}</td>' if span > 1 else f"<td{_LEFT}>{escape(what)}</td>"
        cells += f"<td{_LEFT}>{escape(s.gpu_short)}</td>"
        if not s.measured:
            body.append(f'<tr>{cells}<td colspan="6"{_LEFT}>not measured ({escape(s.missing)})</td></tr>')
            continue
        ratio = (f"<td{_FASTER}>{s.ratio:.2f}×&nbsp;▲</td>" if s.ratio >= 1 else f"<td>{s.ratio:.2f}×</td>")
        body.append(f"<tr>{cells}<td{_LEFT}><code>{escape(s.kernel)}</code></td>"
                    f"<td>{_us(s.kernel_ms)}</td><td{_LEFT}>{escape(s.peer)}</td><td>{_us(s.peer_ms)}</td>{ratio}"
                    f"<td>{_percent(s)}</td></tr>")
    return f'<table style="font-size: 0.8rem"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def sources_text(scores: list[Score]) -> str:
    """Which GPUs and dates the figures come from, file by file, and what that means for comparing rows."""
    runs: dict[tuple[str, str], list[str]] = {}
    for s in scores:
        if s.measured:
            runs.setdefault((s.gpu, s.date), [])
            if s.source not in runs[(s.gpu, s.date)]:
                runs[(s.gpu, s.date)].append(s.source)
    if not runs:
        return "No comparison has been measured yet: `make bench` on a GPU machine records them."
    parts = [f"{gpu} on {date} ({', '.join(f'`{src}`' for src in sources)})"
             for (gpu, date), sources in sorted(runs.items(), key=lambda item: item[0][1], reverse=True)]
    text = "The figures were measured on " + "; ".join(parts) + "."
    if len({gpu for gpu, _ in runs}) > 1:
        text += (" The rows come from more than one GPU, so a ratio is comparable only within its own row "
                 "(its two times were measured in one run on one GPU), not with a row measured on another GPU.")
    missing = sum(not s.measured for s in scores)
    if missing:
        text += f" {missing} comparison{'s are' if missing > 1 else ' is'} not measured yet."
    return text


def plot_ratios(scores: list[Score]):
    """The ratio of each comparison as a horizontal bar on a log axis, a line at 1 (right of it: ours is
    faster); one panel per GPU, the comparisons in the same rows of each.  Returns the panels' axes."""
    import matplotlib.pyplot as plt

    gpus = list(dict.fromkeys(s.gpu_short for s in scores if s.measured)) or [""]
    compared = list(dict.fromkeys((s.chapter, s.label) for s in scores))
    _, axes = plt.subplots(1, len(gpus), figsize=(7.6 + 2.6 * (len(gpus) - 1), 0.19 * len(compared) + 1.3),
                           sharey=True, squeeze=False)
    measured = [s.ratio for s in scores if s.measured]
    xlim = (min(measured + [1.0]) / 1.6, max(measured + [1.0]) * 2.2)
    for ax, gpu in zip(axes[0], gpus):
        on_gpu = {(s.chapter, s.label): s for s in scores if s.measured and s.gpu_short == gpu}
        _ratio_panel(ax, compared, [on_gpu.get(key) for key in compared], xlim)
        ax.set_title(f"{gpu}: our fastest kernel against its peer" if gpu else
                     "our fastest kernel against its peer", fontsize=9)
    labels = [f"{chapter_title.split('.')[0]}. {label}" for chapter_title, label in compared]
    axes[0][0].set_yticks(range(len(compared)), [x if len(x) <= 50 else x[:49] + "…" for x in labels], fontsize=7)
    axes[0][0].set_ylim(len(compared) - 0.4, -0.6)
    return axes[0]


def _ratio_panel(ax, compared: list[tuple[str, str]], scores: list[Score | None], xlim) -> None:
    """One GPU's bars: ``scores[i]`` is the score of ``compared[i]`` on that GPU, None where not measured."""
    import matplotlib.pyplot as plt

    for i, s in enumerate(scores):
        if s is not None:
            faster = s.ratio >= 1
            # Bars start at 1: the length of a bar says by how many times one side is faster.
            ax.barh(i, s.ratio - 1 if faster else 1 - s.ratio, left=1 if faster else s.ratio, height=0.7,
                    color="#1f6fb2" if faster else "#d9822b")
            ax.text(s.ratio * (1.06 if faster else 1 / 1.06), i, f"{s.ratio:.2f}×", va="center",
                    ha="left" if faster else "right", fontsize=7)
        else:
            ax.text(1.06, i, "not measured", va="center", ha="left", fontsize=7, color="gray")
    for i in range(1, len(compared)):
        if compared[i][0] != compared[i - 1][0]:
            ax.axhline(i - 0.5, color="#ccc", lw=0.6)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(*xlim)
    ax.set_xlabel("peer's time ÷ ours (right of 1: ours is faster)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xticks([t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50) if xlim[0] <= t <= xlim[1]])
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.grid(axis="x", which="major", alpha=0.3)
