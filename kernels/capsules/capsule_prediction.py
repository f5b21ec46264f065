"""Capsule prediction vectors of ``kernels/capsules/capsule_prediction.cu``: NumPy references and one launcher per version.

Shapes (float32, row-major):

* ``u``: ``(batch, in_caps, in_dim)``, the input capsules;
* ``W``: ``(in_caps, out_caps, out_dim, in_dim)``, one matrix per pair (i, j);
* ``u_hat``: ``(batch, in_caps, out_caps, out_dim)``, with
  ``u_hat[b, i, j] = W[i, j] @ u[b, i]``.

Every launcher takes NumPy arrays or device buffers and returns ``u_hat`` (a
new NumPy array, or ``out`` when given, so that a layer can keep its
activations on the device).

With device buffers and ``sync=False`` a launcher only queues the kernel
(what the benchmarks time).
"""

from __future__ import annotations

import numpy as np

from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic, result_array
from ..runtime.versions import KernelVersion, LaunchConfig, as_launch, kernel_table

TOPIC = "capsule_prediction"
CAPS_BATCH_TILE = 64  # must equal the #define in capsule_prediction.cu
CAPS_OUTS_PER_THREAD = 4  # must equal the #define in capsule_prediction.cu
NAIVE_BLOCK = 256
SHARED_BLOCK = 256
THREADS_PER_BLOCK = 320  # target block size of versions 3 and 4 (10 warps for ROW = 160)

STREAMING_THREADS = 320  # most threads per block of version 5: must equal CAPS_STREAMING_THREADS in the .cu
STREAMING_BATCH_TILE = 16  # samples per piece of work in version 5 (the fastest of those measured)
STREAMING_MAX_SHARED = 48 * 1024  # bytes of input tile per block in version 5


def module(in_dim: int = 8) -> Module:
    """``capsule_prediction.cu`` compiled once per backend and ``in_dim`` (versions 3 and 4 need it at compile time)."""
    return load_topic(TOPIC, defines={"CAPS_IN_DIM": int(in_dim)})


def shapes(u, W) -> tuple[int, int, int, int, int]:
    """``(batch, in_caps, in_dim, out_caps, out_dim)``, checking that ``u`` and ``W`` agree."""
    if len(u.shape) != 3 or len(W.shape) != 4:
        raise ValueError(f"u must be (batch, in_caps, in_dim) and W (in_caps, out_caps, out_dim, in_dim); "
                         f"got shapes {tuple(u.shape)} and {tuple(W.shape)}")
    batch, in_caps, in_dim = (int(s) for s in u.shape)
    w_in_caps, out_caps, out_dim, w_in_dim = (int(s) for s in W.shape)
    if (w_in_caps, w_in_dim) != (in_caps, in_dim):
        raise ValueError(f"u has {in_caps} capsules of {in_dim} but W is for {w_in_caps} capsules of {w_in_dim}")
    return batch, in_caps, in_dim, out_caps, out_dim


# --------------------------------------------------------------------------- NumPy references (float64)


def forward_reference(u, W) -> np.ndarray:
    """``u_hat[b, i, j, d] = sum_k W[i, j, d, k] u[b, i, k]``."""
    return np.einsum("ijdk,bik->bijd", np.asarray(W, np.float64), np.asarray(u, np.float64))


def forward_loop_reference(u, W) -> np.ndarray:
    """The same as the original custom op's test: a loop over every (b, i, j), one matrix-vector product each."""
    u = np.asarray(u, np.float64)
    W = np.asarray(W, np.float64)
    batch, in_caps, _, out_caps, out_dim = shapes(u, W)
    u_hat = np.empty((batch, in_caps, out_caps, out_dim))
    for b in range(batch):
        for i in range(in_caps):
            for j in range(out_caps):
                u_hat[b, i, j] = W[i, j] @ u[b, i]
    return u_hat


def bytes_moved(batch, in_caps, in_dim, out_caps, out_dim, itemsize=4) -> int:
    """The least traffic of the forward pass: read u and W once, write u_hat once."""
    return itemsize * (batch * in_caps * in_dim + in_caps * out_caps * out_dim * in_dim
                       + batch * in_caps * out_caps * out_dim)


def flops(batch, in_caps, in_dim, out_caps, out_dim) -> int:
    return 2 * batch * in_caps * out_caps * out_dim * in_dim


# --------------------------------------------------------------------------- launchers


def _grid_blocks(n: int) -> int:
    """Blocks for a grid-stride loop: enough to fill the device, never more than the work needs."""
    return max(1, min(blocks_for(n, NAIVE_BLOCK), 65535))


def forward_naive(u, W, out=None, sync=True):
    """Version 1: ``capsule_predict_naive``; one thread per output element, grid-stride, int64 indices."""
    u, W = float32_operand(u), float32_operand(W)
    batch, in_caps, in_dim, out_caps, out_dim = shapes(u, W)
    u_hat = result_array(out, (batch, in_caps, out_caps, out_dim))
    n = batch * in_caps * out_caps * out_dim
    module(in_dim).function("capsule_predict_naive")(
        u, W, u_hat, batch, in_caps, in_dim, out_caps, out_dim, grid=_grid_blocks(n), block=NAIVE_BLOCK, sync=sync)
    return u_hat


def forward_shared_input(u, W, out=None, sync=True):
    """Version 2: ``capsule_predict_shared_input``; a block per (input capsule, batch tile), u tile in shared memory."""
    u, W = float32_operand(u), float32_operand(W)
    batch, in_caps, in_dim, out_caps, out_dim = shapes(u, W)
    u_hat = result_array(out, (batch, in_caps, out_caps, out_dim))
    module(in_dim).function("capsule_predict_shared_input")(
        u, W, u_hat, batch, in_caps, in_dim, out_caps, out_dim,
        grid=(in_caps, blocks_for(batch, CAPS_BATCH_TILE)), block=SHARED_BLOCK,
        shared=CAPS_BATCH_TILE * in_dim * 4, sync=sync)
    return u_hat


def register_block_shape(out_caps: int, out_dim: int) -> tuple[int, int]:
    """Block of versions 3 and 4: x covers the row in groups of 4 outputs, y shares out the samples."""
    quads = blocks_for(out_caps * out_dim, CAPS_OUTS_PER_THREAD)
    if quads > 1024:
        raise ValueError(f"out_caps * out_dim = {out_caps * out_dim}: versions 3 and 4 handle rows of at most 4096")
    rows_y = max(1, min(CAPS_BATCH_TILE, THREADS_PER_BLOCK // quads))
    return quads, rows_y


def _launch_register_blocked(kernel: str, u, W, out, sync):
    """Versions 3 and 4 take the same arguments and launch: a block per (input capsule, batch tile)."""
    batch, in_caps, in_dim, out_caps, out_dim = shapes(u, W)
    u_hat = result_array(out, (batch, in_caps, out_caps, out_dim))
    module(in_dim).function(kernel)(
        u, W, u_hat, batch, in_caps, out_caps, out_dim,
        grid=(in_caps, blocks_for(batch, CAPS_BATCH_TILE)), block=register_block_shape(out_caps, out_dim),
        shared=CAPS_BATCH_TILE * in_dim * 4, sync=sync)
    return u_hat


def forward_register_blocked(u, W, out=None, sync=True):
    """Version 3: ``capsule_predict_register_blocked``; 4 outputs per thread, their weights in registers."""
    u, W = float32_operand(u), float32_operand(W)
    return _launch_register_blocked("capsule_predict_register_blocked", u, W, out, sync)


def vectorizable(in_dim: int, out_caps: int, out_dim: int) -> bool:
    """Version 4 needs every row of u, W and u_hat to start on a 16-byte boundary."""
    return in_dim % 4 == 0 and (out_caps * out_dim) % 4 == 0


def forward_vectorized(u, W, out=None, sync=True):
    """Version 4: ``capsule_predict_vectorized``; version 3 with float4 loads and streaming float4 stores."""
    u, W = float32_operand(u), float32_operand(W)
    batch, in_caps, in_dim, out_caps, out_dim = shapes(u, W)
    if not vectorizable(in_dim, out_caps, out_dim):
        raise ValueError(f"forward_vectorized needs in_dim and out_caps * out_dim to be multiples of 4, "
                         f"got in_dim={in_dim}, out_caps * out_dim={out_caps * out_dim}; use forward_register_blocked")
    return _launch_register_blocked("capsule_predict_vectorized", u, W, out, sync)


def streamable(in_dim: int, out_caps: int, out_dim: int) -> bool:
    """Version 5 needs version 4's 16-byte rows, and a row of at most ``STREAMING_THREADS`` quads."""
    return vectorizable(in_dim, out_caps, out_dim) and out_caps * out_dim <= 4 * STREAMING_THREADS


def runs_version(version: str, in_dim: int, out_caps: int, out_dim: int) -> bool:
    """Whether ``version`` handles the shape: versions 4 and 5 need rows of whole 16-byte quads."""
    if version == "streaming":
        return streamable(in_dim, out_caps, out_dim)
    return version != "vectorized" or vectorizable(in_dim, out_caps, out_dim)


def streaming_launch(batch, in_caps, in_dim, out_caps, out_dim, capsules_per_block=None, batch_tile=None,
                     blocks=None) -> dict:
    """Launch shape of version 5: ``block``, ``grid``, ``batch_tile`` and ``shared`` bytes.

    The block is ``(ROW / 4, capsules_per_block)`` threads, at most ``STREAMING_THREADS``.  The work is
    cut into pieces, runs of ``capsules_per_block`` capsules times tiles of ``batch_tile`` samples, one
    piece per block unless ``blocks`` asks for fewer blocks (each then takes every ``blocks``-th piece).
    """
    quads = (out_caps * out_dim) // 4
    if quads > STREAMING_THREADS:
        raise ValueError(f"out_caps * out_dim = {out_caps * out_dim}: version 5 handles rows of at most "
                         f"{4 * STREAMING_THREADS}; use forward_vectorized")
    capsules = capsules_per_block or max(1, min(in_caps, STREAMING_THREADS // quads))
    if quads * capsules > STREAMING_THREADS:
        raise ValueError(f"{capsules} capsules of {quads} quads make a block of more than {STREAMING_THREADS} threads")
    largest = max(1, STREAMING_MAX_SHARED // (capsules * in_dim * 4))
    batch_tile = max(1, min(batch_tile or STREAMING_BATCH_TILE, batch, largest))
    pieces = blocks_for(in_caps, capsules) * blocks_for(batch, batch_tile)
    return {"block": (quads, capsules), "grid": max(1, min(pieces, blocks or pieces)), "batch_tile": batch_tile,
            "shared": batch_tile * capsules * in_dim * 4}


def forward_streaming(u, W, out=None, sync=True, capsules_per_block=None, batch_tile=None, blocks=None):
    """Version 5: ``capsule_predict_streaming``; a run of consecutive capsules per block, the batch streamed through."""
    u, W = float32_operand(u), float32_operand(W)
    batch, in_caps, in_dim, out_caps, out_dim = shapes(u, W)
    if not vectorizable(in_dim, out_caps, out_dim):
        raise ValueError(f"forward_streaming needs in_dim and out_caps * out_dim to be multiples of 4, "
                         f"got in_dim={in_dim}, out_caps * out_dim={out_caps * out_dim}; use forward_register_blocked")
    launch = streaming_launch(batch, in_caps, in_dim, out_caps, out_dim, capsules_per_block, batch_tile, blocks)
    u_hat = result_array(out, (batch, in_caps, out_caps, out_dim))
    module(in_dim).function("capsule_predict_streaming")(
        u, W, u_hat, batch, in_caps, out_caps, out_dim, launch["batch_tile"],
        grid=launch["grid"], block=launch["block"], shared=launch["shared"], sync=sync)
    return u_hat


def forward(u, W, out=None, sync=True):
    """The fastest version that handles the shape: streaming, else vectorized, else register-blocked."""
    _, _, in_dim, out_caps, out_dim = shapes(u, W)
    if streamable(in_dim, out_caps, out_dim):
        return forward_streaming(u, W, out, sync=sync)
    if vectorizable(in_dim, out_caps, out_dim):
        return forward_vectorized(u, W, out, sync=sync)
    return forward_register_blocked(u, W, out, sync=sync)


# --------------------------------------------------------------------------- the versions' facts

AXES = ("batch", "in_caps", "in_dim", "out_caps", "out_dim")  # the names of a shape's sizes


def dims(shape) -> tuple[int, int, int, int, int]:
    """``(batch, in_caps, in_dim, out_caps, out_dim)`` of a shape dict."""
    return tuple(int(shape[a]) for a in AXES)


def _register_blocked_launch(shape) -> LaunchConfig:
    """Versions 3 and 4: a block per (input capsule, batch tile), the tile of u in shared memory."""
    b, ic, idim, oc, od = dims(shape)
    return LaunchConfig((ic, blocks_for(b, CAPS_BATCH_TILE), 1), (*register_block_shape(oc, od), 1),
                        CAPS_BATCH_TILE * idim * 4)


def _facts(kernel: str, launcher, launch, **rung) -> KernelVersion:
    return KernelVersion(TOPIC, kernel, launcher, launch,
                         bytes=lambda shape: float(bytes_moved(*dims(shape))),
                         flops=lambda shape: float(flops(*dims(shape))),
                         reference=forward_reference, defines={"CAPS_IN_DIM": 8}, **rung)


def _naive_launch(shape) -> LaunchConfig:
    """Version 1: one thread per output element, a grid-stride loop over them."""
    b, ic, idim, oc, od = dims(shape)
    return LaunchConfig((_grid_blocks(b * ic * oc * od), 1, 1), (NAIVE_BLOCK, 1, 1), 0)


def _shared_input_launch(shape) -> LaunchConfig:
    """Version 2: a block per (input capsule, batch tile), the tile of u in shared memory."""
    b, ic, idim, oc, od = dims(shape)
    return LaunchConfig((ic, blocks_for(b, CAPS_BATCH_TILE), 1), (SHARED_BLOCK, 1, 1), CAPS_BATCH_TILE * idim * 4)


def _streaming_launch(shape) -> LaunchConfig:
    """Version 5 with its default run of capsules and batch tile (:func:`streaming_launch`)."""
    launch = streaming_launch(*dims(shape))
    return as_launch(launch["grid"], launch["block"], launch["shared"])


KERNELS = kernel_table(
    _facts("capsule_predict_naive", forward_naive, _naive_launch, number=1, key="naive",
           title="one thread per output element"),
    _facts("capsule_predict_shared_input", forward_shared_input, _shared_input_launch, number=2,
           key="shared_input", title="a tile of samples' inputs in shared memory"),
    _facts("capsule_predict_register_blocked", forward_register_blocked, _register_blocked_launch, number=3,
           key="register_blocked", title="CAPS_OUTS_PER_THREAD consecutive outputs per thread"),
    _facts("capsule_predict_vectorized", forward_vectorized, _register_blocked_launch, number=4, key="vectorized",
           title="version 3 with 16-byte loads and stores"),
    _facts("capsule_predict_streaming", forward_streaming, _streaming_launch, number=5, key="streaming",
           title="a run of input capsules per block, their weights streamed once"),
)
