"""What the GEMM chapter's exercises (both of its assignments) declare alike.

* inputs with a non-zero mean, varied magnitudes and no exact zeros;
* the launch keys of a kernel that computes C tile by tile (``tile_m``, ``tile_n``, ``block_x``, ``block_y``,
  ``shared``) and that launch, over a number of layers (the samples of a convolution, a batch of products);
* shapes drawn per student that are a multiple of neither the student's tiles nor 32;
* probes that name what an output full of NaN or a wrong factor hides: an input read where the exercise says it
  is not (C where beta is 0, a bias the epilogue does not add), alpha applied to beta C too;
* the epilogue left out, the mistake a product with alpha and beta shows when it is the chapter's plain A B.
"""

from __future__ import annotations

import numpy as np

from kernels.gemm.sgemm import TILE
from kernels.runtime.versions import LaunchConfig

from ..exercise import FormulaMistake, LaunchKey, ceil_div, varied as _varied
from ._parts import SHARED


def varied(rng: np.random.Generator, shape, mean: float) -> np.ndarray:
    return _varied(rng, shape, mean, spread=0.6)  # no exact zeros


def mnk(shape) -> tuple[int, int, int]:
    return int(shape["M"]), int(shape["N"]), int(shape["K"])


def tile_keys(tile_m: int = TILE, tile_n: int = TILE, threads: int | None = None) -> tuple[LaunchKey, ...]:
    """``tile_m`` x ``tile_n`` of C per block; ``block_x`` x ``block_y`` threads: by default one per element
    of the tile (``threads`` None), or ``threads`` along x (a kernel whose threads each compute several)."""
    if threads is None:
        block_x = LaunchKey("block_x", 1, 1024, default=lambda shape, launch: launch["tile_n"],
                            help="threads per block along x; default tile_n")
        block_y = LaunchKey("block_y", 1, 1024, default=lambda shape, launch: launch["tile_m"],
                            help="threads per block along y; default tile_m")
    else:
        block_x = LaunchKey("block_x", 1, 1024, default=threads, help=f"threads per block along x; default {threads}")
        block_y = LaunchKey("block_y", 1, 1024, default=1, help="threads per block along y; default 1")
    return (LaunchKey("tile_m", 1, 1024, default=tile_m, help=f"rows of C per block; default {tile_m}"),
            LaunchKey("tile_n", 1, 1024, default=tile_n, help=f"columns of C per block; default {tile_n}"),
            block_x, block_y, SHARED)


def tiled_launch(rows: int, columns: int, layers: int, launch) -> LaunchConfig:
    """Blocks of block_x x block_y threads over tiles of tile_m rows and tile_n columns, ``layers`` deep."""
    return LaunchConfig(grid=(ceil_div(columns, launch["tile_n"]), ceil_div(rows, launch["tile_m"]), layers),
                        block=(launch["block_x"], launch["block_y"], 1), shared=launch["shared"])


def secret_size(rng: np.random.Generator, tile: int, most: int = 3) -> int:
    """A size of one to ``most`` tiles and part of another (a multiple of neither the tile nor 32)."""
    if tile <= 1:
        return int(rng.integers(2, 90))
    return tile * int(rng.integers(1, most + 1)) + int(rng.integers(1, tile))


def secret_mn(rng: np.random.Generator, launch: dict, default: int, most: int = 3) -> tuple[int, int]:
    """M and N of a student's own shape: each past a whole number of the student's tiles (``default`` when the
    launch does not say), at most ``most`` of them."""
    return (secret_size(rng, int(launch.get("tile_m", default)), most),
            secret_size(rng, int(launch.get("tile_n", default)), most))


def nan_reaches(run, inputs: dict, name: str, output: str) -> bool:
    """Whether the NaN in ``inputs[name]`` reach ``output``: the same launch with zeros in their place gives fewer NaN."""
    cleaned = np.where(np.isnan(np.asarray(inputs[name], np.float64)), 0, inputs[name]).astype(inputs[name].dtype)
    with_nan = np.isnan(np.asarray(run(inputs)[output], np.float64))
    without = np.isnan(np.asarray(run({**inputs, name: cleaned})[output], np.float64))
    return bool(np.any(with_nan & ~without))


def not_read(run, inputs: dict, name: str, output: str, because: str) -> str:
    """A hint when the kernel reads input ``name``, which holds NaN where the exercise says it is not read."""
    if not nan_reaches(run, inputs, name, output):
        return ""
    return (f"{because}, the kernel still reads {name} (the grader leaves NaN in it there, as a caller may, and "
            f"0 * NaN is NaN): read {name} only where it is used.")


def alpha_beta_probe(make_inputs, output: str = "C"):
    """The probe of a product with BLAS's epilogue, output = alpha A op(B) + beta C: names a read of C where beta is 0,
    and alpha applied to beta C as well (seen with A all zeros, where the answer is beta C)."""

    def probe(shape, run) -> str:
        inputs = make_inputs(shape, np.random.default_rng(0))
        alpha, beta = float(inputs["alpha"]), float(inputs["beta"])
        if beta == 0:
            return not_read(run, inputs, output, output, "Where beta is 0")
        if alpha in (0.0, 1.0):
            return ""
        got = np.asarray(run({**inputs, "A": np.zeros_like(inputs["A"])})[output], np.float64)
        before = np.asarray(inputs[output], np.float64)
        if np.allclose(got, alpha * beta * before, rtol=1e-2) and not np.allclose(got, beta * before, rtol=1e-2):
            return (f"With A all zeros the result should be beta {output}; the kernel returns alpha beta {output}: alpha "
                    f"scales the product only, {output} = alpha (A B) + beta {output}.")
        return ""

    return probe


def epilogue_left_out(reference, output: str = "C") -> FormulaMistake:
    """The plain product where BLAS's epilogue is asked for: ``reference`` (the exercise's) at alpha 1 and beta 0."""
    return FormulaMistake(
        "epilogue left out", f"with alpha = 1 and beta = 0, the plain product A B stored: alpha does not scale it and "
        f"beta {output} is not added -- is the epilogue, {output} = alpha (A B) + beta {output}, applied before the store?",
        lambda inputs: reference({**inputs, "alpha": np.float32(1.0), "beta": np.float32(0.0)}))
