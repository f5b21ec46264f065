"""What the BF16 GEMM page (``book/gemm_bf16.md``) computes and draws: the number formats, the error of a dot
product as it grows, a model of the pipelines of versions 14 and 15, and the recorded ladder.

The formats and errors are NumPy (with ml_dtypes' BF16 and FP8 types) and run anywhere; the timings and the
profiler's counters come from ``benchmarks/results/sgemm_bf16.json`` (``benchmarks/sgemm_bf16.py``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from benchmarks import sgemm_bf16
from book.gemm_figures import draw_timelines

#: The formats the page compares: name -> NumPy dtype.
FORMATS = {
    "float32": np.dtype(np.float32),
    "TF32 (tensor cores)": None,   # no storage type: float32's exponent, 10 mantissa bits
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "FP8 e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "FP8 e5m2": np.dtype(ml_dtypes.float8_e5m2),
}


def format_table() -> list[dict]:
    """Bits, range and precision of each format: exponent and mantissa bits, the largest value, the smallest
    normal one, and the unit roundoff (half the gap above 1: the relative error of rounding to nearest)."""
    rows = []
    for name, dtype in FORMATS.items():
        if dtype is None:
            info = np.finfo(np.float32)
            rows.append({"format": name, "bits": 19, "exponent": 8, "mantissa": 10, "max": float(info.max),
                         "min_normal": float(info.tiny), "roundoff": 2.0 ** -11})
            continue
        info = ml_dtypes.finfo(dtype) if dtype.name.startswith(("bfloat", "float8")) else np.finfo(dtype)
        rows.append({"format": name, "bits": dtype.itemsize * 8, "exponent": int(info.nexp),
                     "mantissa": int(info.nmant), "max": float(info.max), "min_normal": float(info.tiny),
                     "roundoff": float(info.eps) / 2})
    return rows


def _round(x: np.ndarray, dtype) -> np.ndarray:
    return x.astype(dtype).astype(np.float64)


def dot_errors(lengths=(16, 64, 256, 1024, 4096, 16384), trials: int = 48, seed: int = 0) -> list[dict]:
    """The error |s - s64| of dot products s of length K, median over ``trials`` pairs of N(0, 1) vectors (whose
    dot product is about sqrt(K) in size), against the float64 dot product of the inputs as given:

    * ``bf16_inputs``: inputs rounded to BF16, products and sums exact (what rounding the inputs alone costs);
    * ``bf16_float_sums``: inputs rounded to BF16, products summed in float, as the tensor cores and every
      version of the ladder do;
    * ``bf16_bf16_sums``: the same, but every partial sum rounded to BF16 (summing in the input format);
    * ``fp8_float_sums``: inputs rounded to FP8 e4m3 (after scaling by 1, they lie well inside its range),
      summed in float."""
    rng = np.random.default_rng(seed)
    bf16, fp8 = FORMATS["bfloat16"], FORMATS["FP8 e4m3"]
    rows = []
    for K in lengths:
        x, y = rng.standard_normal((trials, K)), rng.standard_normal((trials, K))
        exact = np.sum(x * y, axis=1)
        xb, yb = _round(x, bf16), _round(y, bf16)
        products = (xb * yb).astype(np.float32)  # exact: 8-bit mantissas multiply into 16 bits
        float_sum = np.zeros(trials, np.float32)
        bf16_sum = np.zeros(trials, np.float32)
        for k in range(K):
            float_sum = float_sum + products[:, k]
            bf16_sum = (bf16_sum + products[:, k]).astype(bf16).astype(np.float32)
        x8, y8 = _round(x, fp8), _round(y, fp8)
        fp8_sum = np.sum((x8 * y8).astype(np.float32), axis=1, dtype=np.float32)

        def error(s):
            return float(np.median(np.abs(np.asarray(s, np.float64) - exact)))

        rows.append({"K": K, "bf16_inputs": error(np.sum(xb * yb, axis=1)), "bf16_float_sums": error(float_sum),
                     "bf16_bf16_sums": error(bf16_sum), "fp8_float_sums": error(fp8_sum)})
    return rows


# ------------------------------------------------------------------------------------------------ pipelines

def pipeline_events(specialized: bool, stages: int = 3, k_tiles: int = 6, tiles: int = 2, load: float = 2.5,
                    products: float = 1.0, epilogue: float = 1.5) -> list[tuple[str, float, float, str]]:
    """A model of one block's timeline, in units of one k-tile's products: ``(lane, start, end, kind)`` with
    lanes "TMA", "wait", "wgmma", "epilogue" and kinds "load s" (a copy into stage s), "wait" (a warpgroup
    waits on a full mbarrier), "k-tile", "store".

    Version 14 (``specialized=False``): the block computes one tile; thread 0, which also multiplies, refills a
    stage only when the k-tile before has been multiplied, and the next tile's block starts from empty stages
    after this one has stored C.  Version 15: a producer refills each stage as soon as the consumers release it,
    across tiles, so the next tile's k-tiles are loaded while C is written (and C's TMA store overlaps the next
    products).  A model, not a measurement: loads take ``load`` and a k-tile's products ``products``."""
    events = []
    now = 0.0
    ready = {}
    slot_free = [0.0] * stages
    if specialized:
        issued = 0
        total = k_tiles * tiles
        tensor_free = 0.0
        for i in range(total):
            s = i % stages
            start = max(slot_free[s], events[-1][1] if i and events and events[-1][0] == "TMA" else 0.0)
            start = max(start, 0.1 * issued)
            issued += 1
            ready[i] = start + load
            events.append(("TMA", start, start + load, f"load {s}"))
            # the consumers multiply k-tile i once it has landed and the tensor cores are free
            begin = max(ready[i], tensor_free)
            if begin > tensor_free:
                events.append(("wait", tensor_free, begin, "wait"))
            tensor_free = begin + products
            events.append(("wgmma", begin, tensor_free, "k-tile"))
            slot_free[s] = tensor_free
            if i % k_tiles == k_tiles - 1:   # the tile's last k-tile: write C, the next products go on
                events.append(("epilogue", tensor_free, tensor_free + 0.4 * epilogue, "store"))
                tensor_free += 0.4 * epilogue
        return sorted(events, key=lambda e: (e[0], e[1]))
    for tile in range(tiles):
        tensor_free = now
        for i in range(min(stages - 1, k_tiles)):
            ready[i] = now + 0.1 * i + load
            events.append(("TMA", now + 0.1 * i, ready[i], f"load {i % stages}"))
        for kt in range(k_tiles):
            begin = max(ready[kt], tensor_free)
            if begin > tensor_free:
                events.append(("wait", tensor_free, begin, "wait"))
            tensor_free = begin + products
            events.append(("wgmma", begin, tensor_free, "k-tile"))
            nxt = kt + stages - 1
            if nxt < k_tiles:   # thread 0 refills the stage of k-tile kt - 1 once kt - 1 is multiplied
                issue = begin if kt == 0 else max(begin, tensor_free - products)
                ready[nxt] = issue + load
                events.append(("TMA", issue, ready[nxt], f"load {nxt % stages}"))
        events.append(("epilogue", tensor_free, tensor_free + epilogue, "store"))
        now = tensor_free + epilogue
    return sorted(events, key=lambda e: (e[0], e[1]))


def draw_pipelines(**model):
    """Version 14's and version 15's modelled timelines, one above the other (drawn as the SGEMM pipelines are)."""
    panels = [("version 14: one thread loads between its own products", pipeline_events(False, **model)),
              ("version 15: a producer warpgroup loads ahead, across tiles", pipeline_events(True, **model))]
    fig = draw_timelines(panels, {"TMA": "TMA copies", "wait": "mbarrier waits", "wgmma": "wgmma groups",
                                  "epilogue": "store C"}, "wgmma", "k-tile",
                         "time, in units of one k-tile's products (a model: loads take 2.5 units, stages colour the "
                         "copies)", width=8.5, busy="tensor cores busy")
    return fig


# ------------------------------------------------------------------------------------------------ recorded figures

def ladder(rows: list[dict], group: str) -> list[dict]:
    """The group's rows of the four plain versions, in ladder order, then its peers."""
    ours = sorted((r for r in rows if r["group"] == group and r.get("kernel") in sgemm_bf16.LADDER and "median_ms" in r),
                  key=lambda r: sgemm_bf16.LADDER.index(r["kernel"]))
    return ours + [r for r in rows if r["group"] == group and r["kind"] == "peer" and "median_ms" in r]


def best_against_cublas(data: dict) -> str | None:
    """A sentence of the fastest version's share of cuBLAS's speed in every group, from the results file, e.g.
    "version 15 runs at 101 % of cuBLAS BF16's speed at 8192³ (793 against 783 TFLOP/s), ..."."""
    rows = data.get("results", [])
    parts = []
    for group in dict.fromkeys(r["group"] for r in rows if r["group"] not in sgemm_bf16.SEARCH_GROUPS):
        ours = [r for r in rows if r["group"] == group and r["kind"] == "kernel" and "percent_of_cublas" in r
                and r.get("percent_of_cublas")]
        peer = next((r for r in rows if r["group"] == group and r["name"] == sgemm_bf16.CUBLAS and "gflops" in r), None)
        if not ours or peer is None:
            continue
        best = max(ours, key=lambda r: r["percent_of_cublas"])
        number = best["name"].split(":")[0]
        parts.append(f"{number} at {best['percent_of_cublas']:.0f} % of cuBLAS BF16 on {group.replace('square ', '')}"
                     f"{'³' if group.startswith('square') else ''} ({best['gflops'] / 1e3:.0f} against "
                     f"{peer['gflops'] / 1e3:.0f} TFLOP/s)")
    return "; ".join(parts) or None


def tensor_pipe_phrase(profiles: list[dict]) -> str | None:
    """How busy the tensor pipe was in versions 15 and 14 and in cuBLAS's kernel, from the recorded counters, e.g.
    "version 15 keeps the tensor pipe busy 94 % of the cycles at 4096³, version 14 83 % and cuBLAS 95 %"."""
    busy = {r["name"]: r["tensor_pipe_percent"] for r in profiles if "tensor_pipe_percent" in r}
    v15, v14, cublas = (busy.get(k) for k in (sgemm_bf16.WARP_SPECIALIZED, sgemm_bf16.WGMMA_TMA,
                                               sgemm_bf16.CUBLAS_PROFILED))
    if None in (v15, v14, cublas):
        return None
    return (f"version 15 keeps the tensor pipe busy {v15:.0f} % of the cycles at 4096³, version 14 {v14:.0f} % and "
            f"cuBLAS {cublas:.0f} %")


#: The profiler's columns of the page's table: the row's key, the heading, and how a value is written.
PROFILE_COLUMNS = (
    ("step", "kernel at 4096³", str),
    ("duration_us", "µs (profiled)", "{:,.1f}".format),
    ("tensor_pipe_percent", "tensor pipe busy, % of cycles", "{:.0f}".format),
    ("issue_slots_percent", "issue slots used, %", "{:.0f}".format),
    ("barrier_stall_percent", "warps waiting at a barrier, %", "{:.0f}".format),
    ("long_scoreboard_stall_percent", "waiting for memory (long scoreboard), %", "{:.0f}".format),
    ("wait_stall_percent", "fixed-latency waits, %", "{:.0f}".format),
    ("l2_percent", "L2 throughput, % of peak", "{:.0f}".format),
    ("shared_bank_conflicts", "shared-memory bank conflicts", "{:,.0f}".format),
)


def small_product_rows(data: dict, planned_now) -> list[dict]:
    """The recorded sweep of version 15's configurations on small products (``benchmarks/sgemm_bf16_small.py``):
    per shape, cuBLAS and each configuration with its time and share of cuBLAS, the one ``planned_now(shape)``
    picks today marked ``planned`` (the record's own mark is what was planned when it was measured)."""
    rows = []
    for r in data.get("results") or []:
        row = {"shape": r["group"], "configuration": r["name"], "µs": 1e3 * r["median_ms"],
               "% of cuBLAS": r.get("percent_of_cublas"), "planned": False}
        if r.get("kind") == "kernel" and r.get("config") is not None:
            shape = {k: r[k] for k in ("batch", "M", "N", "K") if k in r}
            row["planned"] = r["config"] == planned_now(shape)
        rows.append(row)
    return rows


def small_product_phrase(rows: list[dict]) -> str:
    """"at 1024³ the planned configuration reaches 83.9 % of cuBLAS (the best of the N tried) ..." per square."""
    parts = []
    for shape in dict.fromkeys(r["shape"] for r in rows if r["shape"].startswith("square")):
        timed = [r for r in rows if r["shape"] == shape and r["% of cuBLAS"] is not None]
        planned = next((r for r in timed if r["planned"]), None)
        if planned is None or not timed:
            continue
        best = max(timed, key=lambda r: r["% of cuBLAS"])
        side = "the fastest" if best is planned else f"the fastest, {best['configuration']}, {best['% of cuBLAS']:.1f} %"
        parts.append(f"at {shape.split()[-1]}³ the planned {planned['configuration']} reaches "
                     f"{planned['% of cuBLAS']:.1f} % of cuBLAS ({side} of {len(timed)} configurations)")
    return "; ".join(parts)
