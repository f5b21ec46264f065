"""The warm-up puzzles (chapter 0, page ``puzzles``): eleven short kernels before the first chapter's exercises.

Each puzzle fixes its launch (the grid and the block follow from the sizes, as the page says: there are no
launch keys on its ``%%cuda`` line), so that the student's thread map and the expected one, drawn by
``check()`` on the puzzle's ``thread_map`` shape, are of the same launch.  The ``*_spec`` functions are the
NumPy specifications the page prints.  Hidden sizes include 1, sizes that are no multiple of the block,
and, where the puzzle's grid is smaller than its data, sizes that need more than one pass; every puzzle
draws one more size per student from the grading secret.  Inputs have a non-zero mean, so a kernel
writing zeros or the mean fails.

Puzzles score correctness only: they are too small for a time to mean anything (``speed_points=0``), and
none is a rung of the book's ladders.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernels.runtime.versions import LaunchConfig, launch_1d

from ..exercise import Exercise, FormulaMistake, Reduction, reducing, varied
from ._parts import shapes

F32_EPS = float(np.finfo(np.float32).eps)
#: Threads per block of the puzzles that use several blocks (small, so that a picture shows several blocks).
BLOCK = 8
#: The most blocks the grid of ``blocks`` has: more data than threads from 33 elements on.
BLOCKS_GRID = 4
#: The 2-D puzzles' one block: BLOCK_2D x BLOCK_2D threads, at most that many rows and columns.
BLOCK_2D = 8
#: The widest filter of ``conv1d`` (odd widths up to this).
MAX_FILTER = 7


def _n(shape) -> int:
    return int(shape["n"])


def _ceil(a: int, b: int) -> int:
    return max(1, -(-a // b))


def _whole_warps(n: int) -> int:
    return 32 * _ceil(n, 32)


def _one_block_of_n(shape, launch) -> LaunchConfig:
    return launch_1d(1, _n(shape))


def _one_block_of_warps(shape, launch) -> LaunchConfig:
    return launch_1d(1, _whole_warps(_n(shape)))


def _blocks_for(count: Callable[[dict], int]) -> Callable[[dict, dict], LaunchConfig]:
    """Blocks of BLOCK threads, enough for one thread per ``count(shape)`` items."""

    def config(shape, launch) -> LaunchConfig:
        return launch_1d(_ceil(count(shape), BLOCK), BLOCK)

    return config


def _one_block_2d(shape, launch) -> LaunchConfig:
    return LaunchConfig((1, 1, 1), (BLOCK_2D, BLOCK_2D, 1))


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _sizes(low: int, high: int, avoid: int = 1):
    """A per-student size drawn from [low, high), no multiple of ``avoid``."""

    def draw(rng: np.random.Generator, launch: dict) -> list[dict]:
        while True:
            n = int(rng.integers(low, high))
            if avoid <= 1 or n % avoid:
                return [{"n": n}]

    return draw


def _matrix_sizes(rng: np.random.Generator, launch: dict) -> list[dict]:
    rows, cols = (int(v) for v in rng.integers(1, BLOCK_2D + 1, size=2))
    return [{"rows": rows, "cols": cols}]


def _elements(shape) -> float:
    return float(np.prod([v for v in shape.values()]))


def _one_vector(spec: Callable, scale: Callable | None = None, with_n: bool = True, mean: float = 1.0,
                spread: float = 0.5) -> dict:
    """The inputs, reference and error scale of a puzzle on one vector ``a`` (and its length ``n``): out = spec(a),
    its rounding on the scale ``scale(a)`` (default |spec(a)|), ``a`` drawn around ``mean``."""
    scale = scale or (lambda a: np.abs(spec(a)))
    return {"make_inputs": lambda shape, rng: {"a": varied(rng, _n(shape), mean, spread=spread), "out": None,
                                               **({"n": _n(shape)} if with_n else {})},
            "reference": lambda inputs: {"out": spec(_f64(inputs["a"]))},
            "error_scale": lambda inputs: {"out": scale(_f64(inputs["a"]))}}


def _puzzle(**fields) -> Exercise:
    """A puzzle: correctness points only, no launch keys, the map drawn by check(), small and quick."""
    points = fields.pop("points", 1.0)
    return Exercise(launch_keys=(), correctness_points=points, speed_points=0.0, reference_kernel=None,
                    flops=fields.pop("flops", _elements), bytes_moved=fields.pop("bytes_moved", lambda s: 8 * _elements(s)),
                    visible_time_limit_s=120.0, **fields)


# ------------------------------------------------------------------ 1. map


def map_spec(a):
    return 2 * a + 1


MAP = _puzzle(
    name="map",
    title="Map: one thread per element",
    signature="map(const float* a, float* out)",
    **_one_vector(map_spec, scale=lambda a: 2 * np.abs(a) + 1, with_n=False),
    visible_shapes=({"n": 8}, {"n": 30}),
    hidden_shapes=({"n": 1}, {"n": 5}, {"n": 97}, {"n": 512}),
    secret_shapes=_sizes(33, 1000),
    launch_config=_one_block_of_n,
    thread_map={"n": 8},
    description="out[i] = 2 a[i] + 1; one block of exactly n threads, thread i for element i.",
)

# ------------------------------------------------------------------ 2. zip


def zip_spec(a, b):
    return a * b


ZIP = _puzzle(
    name="zip",
    title="Zip: two inputs, one output",
    signature="zip(const float* a, const float* b, float* out)",
    make_inputs=lambda shape, rng: {"a": varied(rng, _n(shape), 1.0), "b": varied(rng, _n(shape), -2.0), "out": None},
    reference=lambda inputs: {"out": zip_spec(_f64(inputs["a"]), _f64(inputs["b"]))},
    error_scale=lambda inputs: {"out": np.abs(_f64(inputs["a"]) * _f64(inputs["b"]))},
    visible_shapes=({"n": 8}, {"n": 30}),
    hidden_shapes=({"n": 1}, {"n": 5}, {"n": 97}, {"n": 512}),
    secret_shapes=_sizes(33, 1000),
    launch_config=_one_block_of_n,
    thread_map={"n": 8},
    description="out[i] = a[i] b[i]; one block of exactly n threads.",
    formula_mistakes=(FormulaMistake(
        "a read for b", "with a read where b belongs, a[i] * a[i]: b never reaches the result -- is b read, and "
        "multiplied where it belongs?", lambda inputs: {"out": zip_spec(_f64(inputs["a"]), _f64(inputs["a"]))}),),
)

# ------------------------------------------------------------------ 3. guard


def guard_spec(a):
    return a * a


GUARD = _puzzle(
    name="guard",
    title="Guard: more threads than elements",
    signature="guard(const float* a, float* out, int n)",
    **_one_vector(guard_spec),
    visible_shapes=({"n": 5}, {"n": 40}),
    hidden_shapes=({"n": 1}, {"n": 31}, {"n": 33}, {"n": 64}, {"n": 1000}),
    secret_shapes=_sizes(65, 1000, 32),
    launch_config=_one_block_of_warps,
    thread_map={"n": 10},
    description="out[i] = a[i] squared; one block of n threads rounded up to whole warps of 32.",
)

# ------------------------------------------------------------------ 4. map_2d


def map_2d_spec(a):
    return a + 1


def _matrix(shape, rng, mean=1.0):
    return varied(rng, (int(shape["rows"]), int(shape["cols"])), mean)


MATRIX_VISIBLE = shapes("rows cols", [(3, 5), (8, 8)])
MATRIX_HIDDEN = shapes("rows cols", [(1, 1), (2, 7), (7, 2), (8, 3), (5, 8)])

MAP_2D = _puzzle(
    name="map_2d",
    title="Map in two dimensions",
    signature="map_2d(const float* a, float* out, int rows, int cols)",
    make_inputs=lambda shape, rng: {"a": _matrix(shape, rng), "out": None, "rows": int(shape["rows"]),
                                    "cols": int(shape["cols"])},
    reference=lambda inputs: {"out": map_2d_spec(_f64(inputs["a"]))},
    error_scale=lambda inputs: {"out": np.abs(_f64(inputs["a"])) + 1},
    visible_shapes=MATRIX_VISIBLE,
    hidden_shapes=MATRIX_HIDDEN,
    secret_shapes=_matrix_sizes,
    launch_config=_one_block_2d,
    thread_map={"rows": 3, "cols": 5},
    description="out[r][c] = a[r][c] + 1 for a rows-by-cols matrix (row-major, at most 8 x 8); one block of 8 x 8 "
                "threads, threadIdx.x along a row, threadIdx.y down a column.",
)

# ------------------------------------------------------------------ 5. broadcast


def broadcast_spec(col, row):
    return col[:, None] * row[None, :]


BROADCAST = _puzzle(
    name="broadcast",
    title="Broadcast: a column times a row",
    signature="broadcast(const float* col, const float* row, float* out, int rows, int cols)",
    make_inputs=lambda shape, rng: {"col": varied(rng, int(shape["rows"]), 1.0), "row": varied(rng, int(shape["cols"]), -1.0),
                                    "out": None, "rows": int(shape["rows"]), "cols": int(shape["cols"])},
    reference=lambda inputs: {"out": broadcast_spec(_f64(inputs["col"]), _f64(inputs["row"]))},
    error_scale=lambda inputs: {"out": np.abs(broadcast_spec(_f64(inputs["col"]), _f64(inputs["row"])))},
    visible_shapes=shapes("rows cols", [(4, 6), (8, 8)]),
    hidden_shapes=MATRIX_HIDDEN,
    secret_shapes=_matrix_sizes,
    launch_config=_one_block_2d,
    thread_map={"rows": 4, "cols": 6},
    description="out[r][c] = col[r] row[c] (an outer product), out rows-by-cols, at most 8 x 8; one block of 8 x 8 "
                "threads.",
    formula_mistakes=(FormulaMistake(
        "sum for product", "with col[r] + row[c], the sum where the product col[r] * row[c] is asked for: is the "
        "operator between them *?", lambda inputs: {"out": _f64(inputs["col"])[:, None] + _f64(inputs["row"])[None, :]}),),
)

# ------------------------------------------------------------------ 6. blocks


def blocks_spec(a):
    return a / 2


def _blocks_grid(shape, launch) -> LaunchConfig:
    return launch_1d(min(_ceil(_n(shape), BLOCK), BLOCKS_GRID), BLOCK)


BLOCKS = _puzzle(
    name="blocks",
    title="Blocks, and a grid smaller than the data",
    signature="blocks(const float* a, float* out, int n)",
    **_one_vector(blocks_spec),
    visible_shapes=({"n": 20}, {"n": 45}),
    hidden_shapes=({"n": 1}, {"n": 8}, {"n": 32}, {"n": 33}, {"n": 200}),
    secret_shapes=_sizes(40, 300, BLOCK),
    launch_config=_blocks_grid,
    thread_map={"n": 45},
    description=f"out[i] = a[i] / 2 with blocks of {BLOCK} threads and at most {BLOCKS_GRID} blocks: from "
                f"{BLOCK * BLOCKS_GRID + 1} elements on, a thread handles more than one (a grid-stride loop).",
)

# ------------------------------------------------------------------ 7. shared_reverse


def shared_reverse_spec(a, chunk=8):
    chunks = [a[start:start + chunk] for start in range(0, len(a), chunk)]
    return np.concatenate([part[::-1] for part in chunks])


SHARED_REVERSE = _puzzle(
    name="shared_reverse",
    title="Shared memory: reverse each block's chunk",
    signature="shared_reverse(const float* a, float* out, int n)",
    **_one_vector(lambda a: shared_reverse_spec(a, BLOCK)),
    visible_shapes=({"n": 16}, {"n": 13}),
    hidden_shapes=({"n": 1}, {"n": 7}, {"n": 8}, {"n": 30}, {"n": 100}),
    secret_shapes=_sizes(40, 300, BLOCK),
    launch_config=_blocks_for(_n),
    thread_map={"n": 13},
    points=2.0,
    description=f"Blocks of {BLOCK} threads, one per element: each block reverses its chunk of {BLOCK} elements "
                f"(the last chunk holds the n % {BLOCK} left over, if any) through shared memory.",
)

# ------------------------------------------------------------------ 8. pooling


def pooling_spec(a, step: int = 2):
    """out[j] = the largest of a[step j .. step j + 2] (those that exist), j < ceil(n / 2); ``step`` 2 is the puzzle's."""
    windows = [a[step * j:step * j + 3] for j in range((len(a) + 1) // 2)]
    return np.array([window.max() for window in windows])


POOLING = _puzzle(
    name="pooling",
    reductions=reducing("a", 0, kind="max"),
    title="Pooling: overlapping windows",
    signature="pooling(const float* a, float* out, int n)",
    # mostly negative values: a largest value that starts at 0 is wrong
    **_one_vector(pooling_spec, scale=lambda a: pooling_spec(np.abs(a)), mean=-1.0, spread=1.0),
    visible_shapes=({"n": 16}, {"n": 13}),
    hidden_shapes=({"n": 1}, {"n": 2}, {"n": 3}, {"n": 17}, {"n": 100}),
    secret_shapes=_sizes(40, 300, 2),
    launch_config=_blocks_for(lambda shape: (_n(shape) + 1) // 2),
    formula_mistakes=(FormulaMistake(
        "windows one apart", "with windows one element apart: window j starts at a[j], where a[2j] belongs (the "
        "windows of 3 move by 2, overlapping by one).",
        lambda inputs: {"out": pooling_spec(_f64(inputs["a"]), step=1)}),),
    thread_map={"n": 13},
    points=2.0,
    description=f"out[j] = the largest of a[2j], a[2j+1], a[2j+2] (those that exist), for j < ceil(n / 2): windows "
                f"of 3 that move by 2; blocks of {BLOCK} threads, one per output.",
)

# ------------------------------------------------------------------ 9. dot


def dot_spec(a, b):
    return np.array([np.sum(a * b)])


def _dot_scale(inputs):
    # a float32 sum in any order stays within about eps * sqrt(n) of sum |a b|
    terms = np.abs(_f64(inputs["a"]) * _f64(inputs["b"]))
    factor = 1.0 + 0.5 * F32_EPS * np.sqrt(max(1, terms.size)) / 1e-5
    return {"out": np.array([terms.sum() * factor])}


DOT = _puzzle(
    name="dot",
    reductions=(Reduction((("a", (0,)), ("b", (0,)))),),
    title="Dot product: a block's sum and one atomic",
    signature="dot(const float* a, const float* b, float* out, int n)",
    zeroed=("out",),
    make_inputs=lambda shape, rng: {"a": varied(rng, _n(shape), 1.0), "b": varied(rng, _n(shape), 0.5), "out": None,
                                    "n": _n(shape)},
    reference=lambda inputs: {"out": dot_spec(_f64(inputs["a"]), _f64(inputs["b"]))},
    error_scale=_dot_scale,
    visible_shapes=({"n": 16}, {"n": 21}),
    hidden_shapes=({"n": 1}, {"n": 8}, {"n": 9}, {"n": 100}, {"n": 333}),
    secret_shapes=_sizes(40, 300, BLOCK),
    launch_config=_blocks_for(_n),
    thread_map={"n": 21},
    points=2.0,
    description=f"out[0] = sum of a[i] b[i] (out[0] is 0 before the launch); blocks of {BLOCK} threads, one per "
                f"element: each block adds its products in shared memory, then adds its sum to out[0] with "
                f"atomicAdd.",
)

# ------------------------------------------------------------------ 10. conv1d


def conv1d_spec(a, w, r: int | None = None):
    """out[i] = sum over j of w[j] a[i + j - r], a being 0 outside it; ``r`` None: k / 2, the centred filter."""
    r = len(w) // 2 if r is None else r
    padded = np.concatenate([np.zeros(r), a, np.zeros(len(w))])
    return np.array([np.dot(w, padded[i:i + len(w)]) for i in range(len(a))])


def _conv_inputs(shape, rng):
    n, k = _n(shape), int(shape["k"])
    return {"a": varied(rng, n, 1.0), "w": varied(rng, k, 0.5), "out": None, "n": n, "k": k}


def _conv_secret(rng: np.random.Generator, launch: dict) -> list[dict]:
    (size,) = _sizes(40, 300, BLOCK)(rng, launch)
    return [{**size, "k": int(rng.choice([3, 5, 7]))}]


CONV1D = _puzzle(
    name="conv1d",
    reductions=reducing("w", 0),
    title="1-D convolution: a centred filter",
    signature="conv1d(const float* a, const float* w, float* out, int n, int k)",
    make_inputs=_conv_inputs,
    reference=lambda inputs: {"out": conv1d_spec(_f64(inputs["a"]), _f64(inputs["w"]))},
    error_scale=lambda inputs: {"out": conv1d_spec(np.abs(_f64(inputs["a"])), np.abs(_f64(inputs["w"])))},
    formula_mistakes=(FormulaMistake(
        "filter not centred", "with the filter not centred: out[i] = sum over j of w[j] a[i + j], where "
        "a[i + j - k/2] belongs -- does the window (the tile of the block) start k/2 elements before the output's "
        "element?", lambda inputs: {"out": conv1d_spec(_f64(inputs["a"]), _f64(inputs["w"]), r=0)}),),
    visible_shapes=shapes("n k", [(16, 3), (13, 5)]),
    hidden_shapes=shapes("n k", [(1, 3), (8, 1), (9, 7), (30, 3), (100, 5)]),
    secret_shapes=_conv_secret,
    launch_config=_blocks_for(_n),
    thread_map={"n": 12, "k": 3},
    points=2.0,
    description=f"out[i] = sum over j < k of w[j] a[i + j - k/2], a being 0 outside 0..n-1 (k odd, at most "
                f"{MAX_FILTER}); blocks of {BLOCK} threads, one per output.",
    flops=lambda shape: 2.0 * _n(shape) * int(shape["k"]),
)

# ------------------------------------------------------------------ 11. prefix_sum


def prefix_sum_spec(a):
    return np.cumsum(a)


PREFIX_SUM = _puzzle(
    name="prefix_sum",
    reductions=reducing("a", 0),
    title="Prefix sum in one block",
    signature="prefix_sum(const float* a, float* out, int n)",
    **_one_vector(prefix_sum_spec, scale=lambda a: prefix_sum_spec(np.abs(a))),
    visible_shapes=({"n": 13}, {"n": 32}),
    hidden_shapes=({"n": 1}, {"n": 31}, {"n": 33}, {"n": 100}, {"n": 1000}),
    secret_shapes=_sizes(65, 1000, 32),
    launch_config=_one_block_of_warps,
    thread_map={"n": 13},
    points=2.0,
    rtol=1e-4,  # a running sum added one by one in float32 is ~n eps off in the worst case; float16 is ~1e-3 off
    description="out[i] = a[0] + ... + a[i], n at most 1024, in one block of n threads rounded up to whole warps "
                "of 32 (threads past n still take part in every barrier).",
)

EXERCISES = [MAP, ZIP, GUARD, MAP_2D, BROADCAST, BLOCKS, SHARED_REVERSE, POOLING, DOT, CONV1D, PREFIX_SUM]
