"""The attention chapter's pictures and tables, drawn from the kernels' facts (``book/attention_geometry.py``), their
NumPy references (``kernels/attention/attention.py``) and the recorded benchmark (``benchmarks/attention.py``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle

from benchmarks import attention as bench
from book import attention_geometry as geometry
from kernels.attention import attention as fp32
from kernels.attention import attention_bf16

#: The widest a figure is drawn, in inches: 900 pixels at matplotlib's 100 dpi, which the page's column (about 680
#: pixels at 1280 wide) shows at three quarters of its size; tests/test_book_html.py wants at least 70 %.
COLUMN_INCHES = 9.0
#: Memory and bandwidth from the data sheets of the two cards the book's figures come from (SXM, HBM3 / HBM3e).
CARDS = {"H100": {"memory_gb": 80, "bandwidth_tbs": 3.35}, "H200": {"memory_gb": 141, "bandwidth_tbs": 4.8}}
TILE_COLORS = {geometry.SKIPPED: "#f2f2f2", geometry.FULL: "#4c8bd6", geometry.MASKED: "#f0a830"}


def draw_three_products(n: int = 8, d: int = 4, causal: bool = False, seed: int = 0):
    """Q K^T -> S, softmax -> P, P V -> O for one small head, every matrix drawn with its values' colours."""
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((n, d)) for _ in range(3))
    S = fp32.scores_reference(Q, K, causal)
    P, _ = fp32.softmax_rows_reference(S)
    # Two rows, as the products are read: Q K^T -> S, then P V = O.
    panels = [("Q", Q, f"{n} x {d}"), ("K^T", K.T, f"{d} x {n}"), ("S = Q K^T / sqrt(d)", S, f"{n} x {n}"),
              ("P = softmax(S)", P, f"{n} x {n}, rows sum to 1"), ("V", V, f"{n} x {d}"), ("O = P V", P @ V, f"{n} x {d}")]
    fig, axes = plt.subplots(2, 3, figsize=(COLUMN_INCHES, 5.4))
    between = {0: "x", 1: "->", 3: "x", 4: "="}
    for k, (ax, (title, matrix, size)) in enumerate(zip(axes.ravel(), panels)):
        shown = np.where(np.isfinite(matrix), matrix, np.nan)
        ax.imshow(shown, cmap="viridis" if title.startswith("P") else "coolwarm", aspect="equal")
        if causal and title.startswith("S"):
            for i, j in zip(*np.nonzero(~np.isfinite(matrix))):
                ax.text(j, i, "-inf", ha="center", va="center", fontsize=6, color="grey")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(size, fontsize=8)
        ax.set_xticks([]), ax.set_yticks([])
        if k in between:
            ax.annotate(between[k], xy=(1.08, 0.5), xycoords="axes fraction", fontsize=12, va="center")
    fig.suptitle("attention as three products (one head" + (", causal" if causal else "") + ")", fontsize=10)
    fig.tight_layout()
    return fig


def score_matrix_bytes(seq, batch: int, heads: int, element: int) -> np.ndarray:
    """Bytes of the N x N scores of every head of a batch."""
    seq = np.asarray(seq, np.float64)
    return batch * heads * seq * seq * element


def plot_score_matrix(seqs=(512, 1024, 2048, 4096, 8192, 16384, 32768), batch: int = 4, heads: int = 16):
    """The scores' bytes against each card's memory, and the time to write them and read them back once."""
    seqs = np.asarray(seqs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(COLUMN_INCHES, 3.6))
    for label, element, style in (("float32", 4, "-o"), ("BF16", 2, "--o")):
        gib = score_matrix_bytes(seqs, batch, heads, element) / 1e9
        left.plot(seqs, gib, style, color="#b03a2e", label=f"S in {label}")
        for card, facts in CARDS.items():
            right.plot(seqs, 2 * gib / facts["bandwidth_tbs"], style, label=f"S in {label}, {card}",
                       color="#b03a2e" if card == "H100" else "#1f6fb2")
    for card, facts in CARDS.items():
        left.axhline(facts["memory_gb"], color="grey", lw=0.8, ls=":")
        left.text(seqs[0], facts["memory_gb"] * 1.15, f"{card}: {facts['memory_gb']} GB", fontsize=8)
    left.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="GB",
             title=f"S for batch {batch} x {heads} heads")
    right.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="ms",
              title="writing S and reading it back, once")
    for ax in (left, right):
        ax.set_xticks(seqs, [str(s) for s in seqs], fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _tile_grid(ax, kinds, title: str, highlight=None, transpose_walk: bool = False):
    cmap = ListedColormap([TILE_COLORS[k] for k in sorted(TILE_COLORS)])
    ax.imshow(kinds, cmap=cmap, vmin=0, vmax=2, aspect="equal")
    rows, cols = kinds.shape
    ax.set_xticks(np.arange(-0.5, cols), minor=True), ax.set_yticks(np.arange(-0.5, rows), minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.set_xticks([]), ax.set_yticks([])
    ax.set_xlabel("key/value tiles", fontsize=8), ax.set_ylabel("query tiles", fontsize=8)
    if highlight is not None:
        line = [(highlight, kt) for kt in range(cols)] if not transpose_walk else [(qt, highlight) for qt in range(rows)]
        steps = [(r, c) for r, c in line if kinds[r, c] != geometry.SKIPPED]
        for step, (r, c) in enumerate(steps):
            ax.text(c, r, str(step + 1), ha="center", va="center", fontsize=7, color="black", weight="bold")
        if steps:
            (r0, c0), (r1, c1) = steps[0], steps[-1]
            ax.add_patch(Rectangle((min(c0, c1) - 0.5, min(r0, r1) - 0.5), abs(c1 - c0) + 1, abs(r1 - r0) + 1,
                                   fill=False, ec="black", lw=1.6))
    ax.set_title(title, fontsize=9)


def draw_tile_walks(n: int = 1000, block: int | None = None):
    """Version 3's blocks over the key/value tiles, full and causal, and version 5's blocks over the query tiles:
    the numbers are the order one block (outlined) visits its tiles in; colour says what happens to a tile."""
    full, causal = geometry.forward_tiles(n, False), geometry.forward_tiles(n, True)
    backward = geometry.backward_tiles(n, True)
    block = causal.shape[0] - 2 if block is None else block
    fig, axes = plt.subplots(1, 3, figsize=(COLUMN_INCHES, 3.8))
    _tile_grid(axes[0], full, f"forward, N = {n}: block {block} walks its row", highlight=block)
    _tile_grid(axes[1], causal, f"forward, causal: {geometry.computed_fraction(causal):.0%} of the tiles",
               highlight=block)
    _tile_grid(axes[2], backward, "backward, causal: key block 2 walks its column", highlight=2, transpose_walk=True)
    fig.legend(handles=[Patch(color=TILE_COLORS[k], label=geometry.KINDS[k]) for k in sorted(TILE_COLORS)],
               loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return fig


def draw_merge_steps(x_a, x_b, values_a, values_b):
    """The online softmax's merge of two parts of a row, step by step: each part's scores and maximum, its
    weights exp(x - m_part) and sum, the rescaling onto the common maximum, and the merged weights beside the
    softmax of the whole row."""
    x_a, x_b = np.asarray(x_a, np.float64), np.asarray(x_b, np.float64)
    (m_a, l_a, _), (m_b, l_b, _) = fp32.softmax_state(x_a, values_a), fp32.softmax_state(x_b, values_b)
    M, L, o = fp32.softmax_merge(fp32.softmax_state(x_a, values_a), fp32.softmax_state(x_b, values_b))
    a, b = np.arange(len(x_a)), len(x_a) + np.arange(len(x_b))
    whole, _ = fp32.softmax_rows_reference(np.concatenate([x_a, x_b])[None])
    fig, axes = plt.subplots(2, 2, figsize=(COLUMN_INCHES, 5.6))
    axes = axes.ravel()
    axes[0].bar(a, x_a, color="#4c8bd6"), axes[0].bar(b, x_b, color="#f0a830")
    axes[0].axhline(m_a, color="#4c8bd6", ls="--", lw=1), axes[0].axhline(m_b, color="#f0a830", ls="--", lw=1)
    axes[0].set_title(f"1. scores; m_a = {m_a:.2f}, m_b = {m_b:.2f}", fontsize=9)
    axes[1].bar(a, np.exp(x_a - m_a), color="#4c8bd6"), axes[1].bar(b, np.exp(x_b - m_b), color="#f0a830")
    axes[1].set_title(f"2. e^(x - m_part): l_a = {l_a:.2f}, l_b = {l_b:.2f}", fontsize=9)
    axes[2].bar(a, np.exp(x_a - m_a) * np.exp(m_a - M), color="#4c8bd6")
    axes[2].bar(b, np.exp(x_b - m_b) * np.exp(m_b - M), color="#f0a830")
    axes[2].set_title(f"3. times e^(m_part - M), M = {M:.2f}:\nl = {l_a:.2f} x {np.exp(m_a - M):.3f} + "
                      f"{l_b:.2f} x {np.exp(m_b - M):.3f} = {L:.2f}", fontsize=9)
    merged = np.concatenate([np.exp(x_a - M), np.exp(x_b - M)]) / L
    axes[3].bar(np.arange(len(merged)), merged, color="#7a7a7a", label="merged / l")
    axes[3].plot(np.arange(len(merged)), whole[0], "k_", ms=14, mew=2, label="softmax of the row")
    axes[3].set_title("4. the merged weights = the softmax", fontsize=9)
    axes[3].legend(fontsize=7)
    for ax in axes:
        ax.set_xticks([])
    fig.tight_layout()
    return fig


def draw_fragment_map():
    """Which lane of a warp holds which element of mma.m16n8k16's A (16 x 16), B (16 x 8) and C (16 x 8), and in
    which register: from the probe kernel (``attention_geometry.fragment_map``)."""
    found = geometry.fragment_map()
    fig, axes = plt.subplots(1, 3, figsize=(COLUMN_INCHES, 5.0), gridspec_kw={"width_ratios": [16, 8, 8]})
    cmap = plt.get_cmap("tab20", 8)
    for ax, op, title in zip(axes, ("A", "B", "C"), ("A = Q (or P)\n16 rows x 16 k", "B = K^T (or V)\n16 k x 8 columns",
                                                     "C = S (or O)\n16 rows x 8 columns, float")):
        lanes, regs = found.lane[op], found.register[op]
        ax.imshow(lanes // 4, cmap=cmap, vmin=0, vmax=7, aspect="equal")   # colour: the lane's group g = lane / 4
        for (r, c), lane in np.ndenumerate(lanes):
            ax.text(c, r, f"{lane}\n{op.lower()}{regs[r, c]}", ha="center", va="center", fontsize=6, linespacing=0.9)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(lanes.shape[1])), ax.set_yticks(range(lanes.shape[0]))
        ax.tick_params(labelsize=6)
    fig.suptitle("each element's lane (colour: the lane's row group g = lane / 4) and register:\n"
                 "a0-a3, b0-b1 (two BF16 each), c0-c3 (a float each)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_speed(rows: list[dict], group: str, head_dim: int, causal: bool, ax=None, title: str = "", legend=True):
    """TFLOP/s against sequence length of every version and peer of a group (rows of attention.json)."""
    ax = ax or plt.gca()
    chosen = [r for r in rows if r["group"] == group and r.get("head_dim") == head_dim and r.get("causal") == causal
              and r.get("gflops")]
    for name in dict.fromkeys(r["name"] for r in chosen):
        line = sorted((r["seq"], r["gflops"] / 1e3) for r in chosen if r["name"] == name)
        kind = next(r["kind"] for r in chosen if r["name"] == name)
        ax.plot(*zip(*line), "--o" if kind == "peer" else "-o", ms=3, label=name)
    seqs = sorted({r["seq"] for r in chosen})
    ax.set(xscale="log", xlabel="sequence length N", ylabel="TFLOP/s", title=title or f"{group}, d = {head_dim}"
           + (", causal" if causal else ""))
    ax.set_xticks(seqs, [f"{n:,}" for n in seqs], fontsize=8)
    ax.minorticks_off()
    if legend:
        ax.legend(fontsize=7)
    return ax

def speed_table(rows: list[dict], group: str, seq: int) -> str:
    """A markdown table of one group's timed rows at one sequence length: time, TFLOP/s, times the bound, and
    the speed against the peer of the same precision."""
    chosen = [r for r in rows if r["group"] == group and r.get("seq") == seq and r.get("median_ms")]
    lines = ["| d | causal | version or peer | ms | TFLOP/s | × its bound | × the peer's speed |", "|---:|---|---|---:|---:|---:|---:|"]
    for r in sorted(chosen, key=lambda r: (r["head_dim"], r["causal"], r["dtype"], r["kind"] != "peer")):
        versus = f"{r['speedup_vs_peer']:.2f}" if r.get("speedup_vs_peer") else ""
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {r['name']} | {r['median_ms']:.3f} | "
                     f"{r['gflops'] / 1e3:.1f} | {r['times_bound']:.2f} | {versus} |")
    return "\n".join(lines)


def plot_speeds(rows: list[dict], group: str, head_dims=(64, 128), label: str = ""):
    """TFLOP/s against N for each head dimension (a row of panels each), without and with the mask; one legend."""
    height = 2.7 * len(head_dims) + 0.8
    fig, axes = plt.subplots(len(head_dims), 2, figsize=(COLUMN_INCHES, height), sharey=True, squeeze=False)
    for row, d in zip(axes, head_dims):
        for ax, causal in zip(row, (False, True)):
            plot_speed(rows, group, d, causal, ax=ax, legend=False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), fontsize=8)
    fig.suptitle(f"{group}: TFLOP/s against sequence length ({label})", fontsize=10)
    fig.tight_layout(rect=(0, 0.3 / height, 1, 1))   # the legend's strip at the bottom
    return fig


def show_speed(figures, group: str, what: str, dtype: str) -> None:
    """Display one group's table at N = 4096 and its TFLOP/s against N, for the rows of one precision of a
    ``SpeedFigures``; or the note that says they were not recorded."""
    from IPython.display import Markdown, display

    rows = [r for r in figures.rows(group) if r.get("dtype") == dtype]
    if not any(r.get("median_ms") for r in rows):
        display(figures.missing(what))
        return
    display(Markdown(f"{what}, {figures.label}:\n\n" + speed_table(rows, group, 4096)))
    plot_speeds(rows, group, head_dims=sorted({r["head_dim"] for r in rows if r.get("head_dim")}), label=figures.label)
    plt.show()


def _tiling(config: dict, group: str) -> str:
    """A tile configuration of attention_bf16.cu in words: the forward or the backward part of it."""
    c = {k: int(v) for k, v in config.items()}
    if group == bench.BACKWARD:
        return f"{16 * c['BF_BWD_WARPS']} keys: {c['BF_BWD_WARPS']} warps, {c['BF_BWD_BQ']}-query tiles"
    m = c.get("BF_M_TILES", 1)
    text = f"{16 * c['BF_WARPS'] * m} rows: {c['BF_WARPS']} warps × {16 * m}, {c['BF_BN']}-key tiles"
    if c.get("BF_MIN_BLOCKS"):
        text += f", {c['BF_MIN_BLOCKS']} blocks per SM"
    if c.get("BF_RESCALE_SKIP", 1):
        text += ", rescale skipped"
    return text


def configurations_table(data: dict | None, group: str) -> str | None:
    """A markdown table of the tile configurations the benchmark timed at N = 4096 (section ``bench.TILINGS`` of
    attention.json) for one pass (``bench.FORWARD`` or ``bench.BACKWARD``), the default of each head dimension
    marked; None when none were recorded."""
    rows = [r for r in (data or {}).get(bench.TILINGS, []) if r["group"] == group and r["kind"] == "kernel"
            and r.get("median_ms") and r.get("config")]
    if not rows:
        return None
    lines = ["| d | causal | tiling | ms | × SDPA's speed |", "|---:|---|---|---:|---:|"]
    shown = set()
    for r in sorted(rows, key=lambda r: (r["head_dim"], r["causal"], r["median_ms"])):
        tiling = (r["head_dim"], r["causal"], _tiling(r["config"], group))
        if tiling in shown:   # configurations that differ only in the other pass's tiling: the fastest time
            continue
        shown.add(tiling)
        default = " (default)" if tiling[2] == _tiling(attention_bf16.default_config(r["head_dim"]), group) else ""
        lines.append(f"| {r['head_dim']} | {'yes' if r['causal'] else 'no'} | {tiling[2]}{default} | "
                     f"{r['median_ms']:.3f} | {r.get('speedup_vs_peer', float('nan')):.2f} |")
    return "\n".join(lines)

