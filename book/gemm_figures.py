"""The GEMM and convolution pages' pictures: one figure per SGEMM step, the roofline of every version, the
pipelines that feed the multiply-adds, split-K, implicit GEMM's gather and Winograd's transforms.

The geometry comes from :mod:`book.tile_geometry` (the SGEMM ladder's tiles) and :mod:`book.gemm_geometry`
(split-K's slices, the gather, the transforms), which apply the kernels' own formulas and sizes; the speeds come
from a results file through :class:`book.speed_figures.SpeedFigures`.  Each function draws one figure, sized
for the page's column (at most about 8.5 inches wide), and returns it with what it drew.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from book.figures import FONT_SIZE, SLICE_COLOUR, THREAD1_COLOUR, draw_roofs, draw_sgemm_tiling, plot_roofline
from book.gemm_geometry import Gather, SplitK, WinogradTile, roofline_points, winograd_matrices
from book.speed_figures import SpeedFigures
from book.tile_geometry import sgemm_tiling
from kernels.gemm import sgemm
from kernels.runtime.versions import versions

# --------------------------------------------------------------------------- one figure per SGEMM step


def sgemm_step_facts(name: str) -> dict:
    """What a step's figure states beside its tile, from its tiling: sizes, and loads against multiply-adds."""
    t = sgemm_tiling(name)
    tm, tn = t.thread_tile
    return {"step": t.step, "name": name, "tile": (t.block_m, t.block_n), "k_step": t.k_step, "threads": t.threads,
            "warps": t.threads // 32, "thread_tile": (tm, tn), "loads_per_k": tm + tn, "fmas_per_k": tm * tn,
            "shared": t.shared,
            # a value of A brought into the block serves every column of the tile, a value of B every row
            "uses_of_a": t.block_n if t.shared else 1, "uses_of_b": t.block_m if t.shared else 1}


def draw_sgemm_step(name: str):
    """One step of the SGEMM ladder at the column's width: the block's tile of C by warp, threads 0 and 1, the
    slices of A and B per k-step (:func:`book.figures.draw_sgemm_tiling`), and beside it what a thread loads and
    computes per k."""
    facts = sgemm_step_facts(name)
    fig, (ax, side) = plt.subplots(1, 2, figsize=(7.2, 3.3), gridspec_kw={"width_ratios": [1.0, 1.05]})
    tiling = sgemm_tiling(name)
    draw_sgemm_tiling(ax, tiling, title=" ")
    side.set_axis_off()
    tm, tn = facts["thread_tile"]
    where = "shared memory" if facts["shared"] else "global memory (through the caches)"
    lines = [f"block: {facts['tile'][0]} × {facts['tile'][1]} of C, {facts['threads']} threads ({facts['warps']} warps)",
             f"thread: {tm} × {tn} result{'s' if tm * tn > 1 else ''}",
             f"per k: {facts['loads_per_k']} loads from {where}",
             f"        for {facts['fmas_per_k']} multiply-add{'s' if tm * tn > 1 else ''} "
             f"({facts['fmas_per_k'] / facts['loads_per_k']:.2g} per load)"]
    if facts["shared"]:
        lines.append(f"a value of A in shared memory serves {facts['uses_of_a']} columns,")
        lines.append(f"a value of B {facts['uses_of_b']} rows ({facts['k_step']} k per barrier)")
    else:
        lines.append("every operand is a load of its own: no reuse in the block")
    side.text(0.0, 0.98, "\n".join(lines), va="top", ha="left", fontsize=FONT_SIZE, transform=side.transAxes,
              linespacing=1.5)
    palette = plt.get_cmap("Pastel1")
    handles = [Patch(facecolor=palette(0), label="warp 0"), Patch(facecolor=palette(1), label="warp 1, 2, … (one colour each)"),
               Patch(facecolor="black", label="thread 0's results, and\nthe rows of A / columns of B it reads"),
               Patch(facecolor=THREAD1_COLOUR, label="thread 1's results"),
               Patch(facecolor=SLICE_COLOUR, edgecolor="tab:blue", label="slices of A and B per k-step")]
    side.legend(handles=handles, loc="lower left", fontsize=FONT_SIZE - 0.5, frameon=False, borderaxespad=0)
    fig.suptitle(f"step {facts['step']}, {name}: one block of C = A B, drawn to the tile's scale",
                 fontsize=FONT_SIZE + 1.5, x=0.02, ha="left")
    fig.tight_layout()
    return fig, facts


# --------------------------------------------------------------------------- rooflines


_PEERS = {"cublas": "cuBLAS", "cudnn": "cuDNN"}


def sgemm_roofline(figures: SpeedFigures, group: str):
    """Every step of the SGEMM ladder and its peer (``group`` of the results) under the roofline of the run's
    measured peaks; a step is labelled with its number in the ladder."""
    ladder = versions(sgemm.KERNELS)

    def label(r):
        return f"{ladder[r['name']].number}. {r['name']}" if r["name"] in ladder else _PEERS.get(r["name"], r["name"])

    points = roofline_points(figures.rows(group), figures.peaks(), label)
    fig, ax = plt.subplots(figsize=(7.5, 5.6))
    size = figures.rows(group)[0]["M"]
    plot_roofline(figures.peaks(), points, ax=ax,
                  title=f"SGEMM {size}³: every step under the roofline ({figures.label})")
    ax.get_legend().remove()  # below the axes: at one intensity the points stand in a column, the key beside none
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8, frameon=False,
               title="intensity: the product's least traffic, 4(MK + KN + MN) bytes", title_fontsize=8)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig, points


_METHOD_COLOURS = plt.get_cmap("tab10").colors
_LAYER_MARKERS = "osD^vP*X"


def conv_roofline(figures: SpeedFigures, group: str, method, title: str):
    """Every version of a convolution benchmark (``group`` of the results) on every layer under the roofline of
    the run's peaks: a colour per method (``method(row)``, the best configuration of each), a marker per layer."""
    layers = figures.layers(group)
    points = {layer: roofline_points(figures.rows(group, layer=layer), figures.peaks(), method) for layer in layers}
    methods = list(dict.fromkeys(m for layer in layers for m in points[layer]))
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    draw_roofs(ax, figures.peaks(), [a.intensity for p in points.values() for a in p.values()],
               title=f"{title} ({figures.label})")
    for li, layer in enumerate(layers):
        for m, a in points[layer].items():
            ax.plot(a.intensity, a.gflops, _LAYER_MARKERS[li % len(_LAYER_MARKERS)], markersize=8,
                    color=_METHOD_COLOURS[methods.index(m) % 10], markeredgecolor="black", markeredgewidth=0.5)
    by_method = [Line2D([], [], ls="", marker="s", markersize=8, color=_METHOD_COLOURS[i % 10], label=m)
                 for i, m in enumerate(methods)]
    by_layer = [Line2D([], [], ls="", marker=_LAYER_MARKERS[i % len(_LAYER_MARKERS)], color="grey", label=layer)
                for i, layer in enumerate(layers)]
    fig.legend(handles=by_method, loc="lower left", bbox_to_anchor=(0.02, 0.0), ncol=2, fontsize=8, frameon=False,
               title="version (colour)", title_fontsize=8)
    fig.legend(handles=by_layer, loc="lower right", bbox_to_anchor=(0.98, 0.0), ncol=1, fontsize=8, frameon=False,
               title="layer (marker)", title_fontsize=8)
    rows = max(-(-len(by_method) // 2), len(by_layer)) + 1
    fig.tight_layout(rect=(0, 0.037 * rows, 1, 1))
    return fig, points


# --------------------------------------------------------------------------- pipelines


#: The schedules of the k-loop that :func:`pipeline_events` models, in the order the book teaches them.
SCHEDULES = {
    "one buffer": "versions 3-6: load, barrier, multiply, barrier",
    "two buffers": "version 7: the next k-tile in flight, in registers",
    "cp.async": "cp.async into 3 stages (sgemm_cp_async, version 10)",
    "TMA": "TMA and mbarriers (version 11): no block-wide barrier",
}


def pipeline_events(schedule: str, k_tiles: int = 6, load: float = 2.5, stages: int = 3, sync: float = 0.25,
                    issue: float = 0.2) -> list[tuple[str, float, float, str]]:
    """A model of one block's k-loop under ``schedule`` (a key of :data:`SCHEDULES`), in units of one k-tile's
    multiply-adds: ``(lane, start, end, kind)`` with lanes "copies", "wait", "math" and kinds "load s" (a copy into
    buffer or stage s, in flight for ``load``), "wait" (operands not there yet), "sync" (a block-wide barrier,
    ``sync`` long), "issue" (threads issuing loads or stores of a k-tile, ``issue`` long) and "k-tile".

    A model, not a measurement: it shows where each schedule waits, not how long a GPU takes."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    events, now = [], 0.0

    def math(kt_start):
        events.append(("math", kt_start, kt_start + 1.0, "k-tile"))
        return kt_start + 1.0

    def wait(until, kind="wait"):
        nonlocal now
        if until > now:
            events.append(("wait", now, until, kind))
            now = until

    if schedule == "one buffer":
        for kt in range(k_tiles):
            events.append(("math", now, now + issue, "issue"))
            events.append(("copies", now + issue, now + issue + load, "load 0"))
            wait(now + issue + load)
            wait(now + sync, "sync")
            now = math(now)
            wait(now + sync, "sync")
        return events
    if schedule == "two buffers":
        events.append(("copies", now, now + load, "load 0"))
        wait(load)
        events.append(("math", now, now + issue, "issue"))  # registers to shared memory
        now += issue
        wait(now + sync, "sync")
        for kt in range(k_tiles):
            ready = None
            if kt + 1 < k_tiles:  # the next k-tile's loads, into registers, before the multiply
                events.append(("math", now, now + issue / 2, "issue"))
                now += issue / 2
                ready = now + load
                events.append(("copies", now, ready, f"load {(kt + 1) % 2}"))
            now = math(now)
            if ready is not None:
                wait(ready)
                events.append(("math", now, now + issue / 2, "issue"))  # registers to the other buffer
                now += issue / 2
                wait(now + sync, "sync")  # one barrier per k-tile
        return events
    ready = {}
    for kt in range(min(stages - 1, k_tiles)):  # the prologue: stages - 1 k-tiles in flight
        start = now + (issue if schedule == "cp.async" else 0.05) * kt
        ready[kt] = start + load
        events.append(("copies", start, ready[kt], f"load {kt % stages}"))
    if schedule == "cp.async":
        events.append(("math", now, now + issue * (stages - 1), "issue"))
        now += issue * (stages - 1)
    for kt in range(k_tiles):
        wait(ready[kt])  # cp.async.wait_group, or the stage's full mbarrier
        if schedule == "cp.async":
            wait(now + sync, "sync")  # the copies of every thread have landed: a barrier
        nxt = kt + stages - 1
        if nxt < k_tiles:  # refill the stage that k-tile kt - 1 used, read by now
            if schedule == "cp.async":
                events.append(("math", now, now + issue, "issue"))
                now += issue
            ready[nxt] = now + load
            events.append(("copies", now, ready[nxt], f"load {nxt % stages}"))
        now = math(now)
    return events


_STAGE_COLOURS = ("tab:blue", "tab:green", "tab:purple", "tab:olive")
_KIND_STYLES = {"wait": dict(color="lightgrey", hatch="//"), "sync": dict(color="dimgrey", hatch="xx"),
                "issue": dict(color="#9ecae1"), "k-tile": dict(color="tab:red"), "store": dict(color="tab:orange")}


def draw_timelines(panels, lanes: dict[str, str], busy_lane: str, busy_kind: str, xlabel: str, width: float = 8.0,
                   busy: str = "busy"):
    """Modelled timelines, one panel each: ``panels`` is a list of ``(title, events)`` with events
    ``(lane, start, end, kind)``; ``lanes`` names the rows (top to bottom).  Copies ("load s") take their stage's
    colour, two rows a lane so that overlapping copies show; a panel's title says how long ``busy_lane``'s
    ``busy_kind`` events keep it ``busy`` ("tensor cores busy")."""
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 1.0 + 0.42 * len(lanes) * len(panels)), sharex=True,
                             squeeze=False)
    order = list(lanes)
    for ax, (title, events) in zip(axes[:, 0], panels):
        for lane, start, end, kind in events:
            y = order.index(lane)
            if kind.startswith("load"):
                stage = int(kind.split()[1])
                ax.barh(y + 0.18 * (stage % 2) - 0.09, end - start, left=start, height=0.36,
                        color=_STAGE_COLOURS[stage % len(_STAGE_COLOURS)], edgecolor="black", linewidth=0.4)
            else:
                ax.barh(y, end - start, left=start, height=0.6, edgecolor="black", linewidth=0.4, **_KIND_STYLES[kind])
        busy_time = sum(e - s for lane, s, e, kind in events if lane == busy_lane and kind == busy_kind)
        span = max(e for _, _, e, _ in events)
        ax.set_yticks(range(len(order)), [lanes[lane] for lane in order], fontsize=8)
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.set_title(f"{title}: {busy} {100 * busy_time / span:.0f}% of the time", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(xlabel, fontsize=8)
    fig.tight_layout()
    return fig


def draw_sgemm_pipelines(schedules=tuple(SCHEDULES), **model):
    """:func:`pipeline_events` of each schedule, one above the other, with a key of what the bars are."""
    panels = [(SCHEDULES[s], pipeline_events(s, **model)) for s in schedules]
    load = model.get("load", 2.5)
    fig = draw_timelines(panels, {"copies": "copies in flight", "wait": "waiting", "math": "multiply-adds"},
                         "math", "k-tile",
                         f"time, in units of one k-tile's multiply-adds (a model: a k-tile's copy is in flight "
                         f"{load:g} units)")
    handles = [Patch(facecolor="tab:red", label="multiply-adds of a k-tile"),
               Patch(facecolor="#9ecae1", label="threads issuing loads / stores"),
               Patch(facecolor="lightgrey", hatch="//", label="waiting for operands"),
               Patch(facecolor="dimgrey", hatch="xx", label="__syncthreads"),
               *(Patch(facecolor=_STAGE_COLOURS[s], label=f"copy into buffer / stage {s}") for s in range(3))]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return fig, panels


# --------------------------------------------------------------------------- split-K


def draw_splitk(schedule: SplitK, sms: int, gpu: str):
    """Version 8's schedule of one product: K cut into slices (a colour each) across A's columns and B's rows,
    each slice's partial product of C written by its own blocks (``blockIdx.z``), and the second kernel adding
    the slices in order into C.  Not to scale: the labels give the sizes."""
    s = schedule
    colours = plt.get_cmap("viridis")(np.linspace(0.1, 0.9, s.splits))
    fig, ax = plt.subplots(figsize=(8.4, 4.4))
    hA, wA, xB, wB = 5.0, 6.0, 7.0, 1.0  # A: M x K at (0, 0); B: K x N at (xB, 0), its rows from the top
    for z, (k0, k1) in enumerate(s.slices):
        x0, x1 = wA * k0 / s.K, wA * k1 / s.K
        ax.add_patch(Rectangle((x0, 0), x1 - x0, hA, facecolor=colours[z], edgecolor="white", linewidth=0.8))
        y0, y1 = hA * (1 - k1 / s.K), hA * (1 - k0 / s.K)
        ax.add_patch(Rectangle((xB, y0), wB, y1 - y0, facecolor=colours[z], edgecolor="white", linewidth=0.8))
    for x, w in ((0, wA), (xB, wB)):
        ax.add_patch(Rectangle((x, 0), w, hA, fill=False, edgecolor="black"))
    rows = max(0.12, hA * s.block_m / s.M)  # block (0, 0, 0): the first row tile, slice 0
    ax.add_patch(Rectangle((0, hA - rows), wA * (s.slices[0][1] - s.slices[0][0]) / s.K, rows, fill=False,
                           edgecolor="red", linewidth=2, zorder=4))
    ax.text(wA / 2, hA + 0.2, f"A: {s.M:,} × {s.K:,}\nK cut at multiples of WT_BK = {s.k_step}", ha="center",
            va="bottom", fontsize=FONT_SIZE)
    ax.text(xB + wB / 2, hA + 0.2, f"B:\n{s.K:,} × {s.N}", ha="center", va="bottom", fontsize=FONT_SIZE)
    shown = [f"slice {z}: k = {k0} … {k1 - 1}" for z, (k0, k1) in enumerate(s.slices)]
    if len(shown) > 4:
        shown = shown[:3] + ["…", shown[-1]]
    ax.text(wA / 2, -0.3, "\n".join(shown), ha="center", va="top", fontsize=FONT_SIZE)
    px, pw, ph, py, step = 10.6, 1.3, 3.6, 0.5, 0.16  # the partial products, stacked
    for z in reversed(range(s.splits)):
        ax.add_patch(Rectangle((px + step * z, py + step * z), pw, ph, facecolor=colours[z], edgecolor="black",
                               linewidth=0.6))
    ax.add_patch(Rectangle((px, py + ph - max(0.12, ph * s.block_m / s.M)), pw, max(0.12, ph * s.block_m / s.M),
                           fill=False, edgecolor="red", linewidth=2, zorder=4))
    top = py + ph + step * s.splits
    ax.text(px + (pw + step * s.splits) / 2, top + 0.2, f"{s.splits} partial products\n{s.M:,} × {s.N} each",
            ha="center", va="bottom", fontsize=FONT_SIZE)
    ax.add_patch(FancyArrowPatch((xB + wB + 0.2, hA / 2), (px - 0.2, hA / 2), arrowstyle="->", mutation_scale=14))
    ax.text((xB + wB + px) / 2, hA / 2 - 0.2, "sgemm_splitk:\nslice z in\nblockIdx.z = z", ha="center", va="top",
            fontsize=FONT_SIZE - 0.5)
    cx = px + pw + step * s.splits + 2.2
    ax.add_patch(FancyArrowPatch((cx - 2.0, py + ph / 2), (cx - 0.2, py + ph / 2), arrowstyle="->", mutation_scale=14))
    ax.text(cx - 1.1, py + ph / 2 - 0.2, "sgemm_\nsplitk_sum", ha="center", va="top", fontsize=FONT_SIZE - 0.5)
    ax.add_patch(Rectangle((cx, py), pw, ph, facecolor="#dddddd", edgecolor="black"))
    ax.text(cx + pw / 2, py + ph + 0.2, "C = Σ partial[z],\nz = 0, 1, … in order", ha="center", va="bottom",
            fontsize=FONT_SIZE)
    gx, gy, gz = s.grid
    ax.text(px - 0.3, -0.3, f"grid ({gx}, {gy}, {gz}): {gx * gy} tiles of {s.block_m} × {s.block_n},\n"
            f"× {gz} slices = {gx * gy * gz} blocks for the {sms}\nmultiprocessors of the {gpu}\n"
            f"red: what block (0, 0, 0) computes", ha="left", va="top", fontsize=FONT_SIZE)
    ax.set_xlim(-0.3, cx + pw + 0.5)
    ax.set_ylim(-2.6, hA + 1.5)
    ax.set_axis_off()
    ax.set_title(f"split-K of a {s.M:,} × {s.N} × {s.K:,} product as sgemm_plan cuts it (not to scale)",
                 fontsize=FONT_SIZE + 1.5)
    fig.tight_layout()
    return fig, schedule


# --------------------------------------------------------------------------- implicit GEMM's gather


def draw_implicit_gather(gather: Gather, column: int = 9):
    """One row of implicit GEMM's virtual unrolled matrix: above, the block's k-tile of it (the row in colour,
    a colour per lane); below, the input maps of channel c with the pixel each column reads, labelled with the
    column, and the taps that fall into the padding hatched; ``column``'s receptive field outlined in red."""
    N, C, H, W, K, pad, stride, H_out, W_out = gather.shape
    c, i, j = gather.tap
    BN = gather.source.size
    fig = plt.figure(figsize=(8.4, 6.2))
    top = fig.add_axes((0.08, 0.75, 0.9, 0.11))
    cmap = plt.get_cmap("hsv")
    strip = np.ones((16 if gather.tile_row < 16 else gather.tile_row + 1, BN, 4)) * 0.93
    strip[..., 3] = 1
    for q in range(BN):
        strip[gather.tile_row, q] = cmap(gather.lane[q] / 32) if gather.source[q] >= 0 else (0.55, 0.55, 0.55, 1)
    top.imshow(strip, aspect="auto", interpolation="nearest", extent=(gather.first_column - 0.5,
                                                                        gather.first_column + BN - 0.5, strip.shape[0] - 0.5, -0.5))
    top.set_xlabel("column of the unrolled matrix: output pixel over the batch, n·H_out·W_out + h·W_out + w", fontsize=8)
    top.set_ylabel("row in\nthe k-tile", fontsize=8)
    top.tick_params(labelsize=8)
    top.set_title(f"row k = {gather.row} (tap c = {c}, i = {i}, j = {j}) of the unrolled matrix, in block "
                  f"{gather.first_column // BN}'s k-tile of {strip.shape[0]} rows: gathered by warp {gather.warp};\n"
                  f"column q by lane q mod 32 (a colour per lane; grey: a tap in the padding, stored as 0)",
                  fontsize=8.5, loc="left")
    maps = min(N, 2)
    for n in range(maps):
        ax = fig.add_axes((0.05 + 0.47 * n, 0.01, 0.44, 0.55))
        ax.add_patch(Rectangle((-pad, -pad), W + 2 * pad, H + 2 * pad, facecolor="white", edgecolor="grey",
                               linestyle="--"))
        ax.add_patch(Rectangle((0, 0), W, H, facecolor="#f4f4f4", edgecolor="black"))
        for q, src in enumerate(gather.source):
            col = gather.first_column + q
            if col // (H_out * W_out) != n:
                continue
            p = col % (H_out * W_out)
            h, w = (p // W_out) * stride - pad + i, (p % W_out) * stride - pad + j
            if src >= 0:
                ax.add_patch(Rectangle((w, h), 1, 1, facecolor=cmap(gather.lane[q] / 32), alpha=0.55,
                                       edgecolor="white"))
            else:
                ax.add_patch(Rectangle((w, h), 1, 1, fill=False, hatch="xx", edgecolor="grey", linewidth=0))
            ax.text(w + 0.5, h + 0.5, str(col), ha="center", va="center", fontsize=6.5)
        if gather.first_column <= column < gather.first_column + BN and column // (H_out * W_out) == n:
            p = column % (H_out * W_out)
            h0, w0 = (p // W_out) * stride - pad, (p % W_out) * stride - pad
            ax.add_patch(Rectangle((w0, h0), K, K, fill=False, edgecolor="red", linewidth=2))
        ax.set_xlim(-pad - 0.3, W + pad + 0.3)
        ax.set_ylim(H + pad + 0.3, -pad - 0.3)
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(f"X[{n}, {c}]: {H} × {W}, padding {pad} (dashed)", fontsize=9)
    fig.text(0.5, 0.615, f"each number: the column that reads that pixel for row {gather.row}; hatched: taps in the "
             f"padding;\nred: the {K} × {K} window of column {column} in this map (its rows c·{K * K} … c·{K * K} + {K * K - 1})",
             ha="center", va="bottom", fontsize=8.5)
    fig.suptitle(f"implicit GEMM's gather: N = {N}, C = {C}, {H} × {W}, {K} × {K} filters, padding {pad}, "
                 f"stride {stride}", fontsize=10, y=0.99)
    return fig, gather


# --------------------------------------------------------------------------- Winograd


def _matrix(ax, values, title: str, numbers: bool = True, cmap="RdBu_r"):
    values = np.asarray(values, float)
    scale = 1.8 * (np.abs(values).max() or 1)  # pale colours: the numbers stay legible on them
    ax.imshow(values, cmap=cmap, vmin=-scale, vmax=scale)
    if numbers:
        for (r, c), v in np.ndenumerate(values):
            ax.text(c, r, f"{v:.0f}", ha="center", va="center", fontsize=7)
    ax.set_xticks([]); ax.set_yticks([])
    ax.set_title(title, fontsize=8.5)


def draw_winograd(tile: WinogradTile):
    """Winograd's transforms on one tile with the kernels' matrices: the input patch d and the filter g, their
    transforms V = Bᵀ d B and U = G g Gᵀ, the element-wise product M = U ⊙ V (the only multiplications that grow
    with the channels), and Y = Aᵀ M A, beside the direct correlation's count."""
    BT, G, AT = winograd_matrices()
    t = tile
    n, r, m = BT.shape[0], G.shape[1], AT.shape[0]
    fig = plt.figure(figsize=(8.6, 4.6))
    boxes = {"d": (0.02, 0.52), "V": (0.30, 0.52), "g": (0.06, 0.08), "U": (0.30, 0.08), "M": (0.54, 0.30),
             "Y": (0.80, 0.36)}
    size = {"d": 0.18, "V": 0.19, "g": 0.12, "U": 0.19, "M": 0.19, "Y": 0.15}
    axes = {k: fig.add_axes((x, y, size[k], size[k] * 8.6 / 4.6)) for k, (x, y) in boxes.items()}
    _matrix(axes["d"], t.d, f"input patch d: {n} × {n}")
    _matrix(axes["V"], t.V, f"V = Bᵀ d B: {n} × {n}")
    _matrix(axes["g"], t.g, f"filter g: {r} × {r}")
    _matrix(axes["U"], t.U, f"U = G g Gᵀ: {n} × {n}", numbers=False)  # fractions: colours only
    _matrix(axes["M"], t.M, f"M = U ⊙ V: {n} × {n}\n{t.multiplications} multiplications", numbers=False)
    _matrix(axes["Y"], t.Y, f"Y = Aᵀ M A: {m} × {m}")

    def arrow(a, b, text):
        fa, fb = axes[a].get_position(), axes[b].get_position()
        start = (fa.x1 + 0.005, (fa.y0 + fa.y1) / 2)
        end = (fb.x0 - 0.005, (fb.y0 + fb.y1) / 2)
        fig.add_artist(FancyArrowPatch(start, end, transform=fig.transFigure, arrowstyle="->", mutation_scale=12))
        fig.text((start[0] + end[0]) / 2, max(start[1], end[1]) + 0.03, text, ha="center", va="bottom", fontsize=8)

    arrow("d", "V", f"Bᵀ: {n} × {n}\nadditions")
    arrow("g", "U", f"G: {n} × {r}\nonce per filter")
    arrow("V", "M", "⊙")
    arrow("U", "M", "⊙")
    arrow("M", "Y", f"Aᵀ: {m} × {n}\nadditions")
    fig.text(0.80, 0.31, f"= the direct correlation\nof d with g: {m}·{m}·{r * r} =\n"
             f"{t.direct_multiplications} multiplications,\n{t.direct_multiplications / t.multiplications:g} times "
             f"as many", ha="left", va="top", fontsize=8.5)
    fig.suptitle(f"Winograd's F({m} × {m}, {r} × {r}) on one tile, with the kernels' matrices "
                 f"(kernels/conv/conv2d_gemm.py)", fontsize=10, y=0.98)
    return fig, tile
