"""The records of the large-margin softmax layer's kernels (``kernels/lsoftmax/lsoftmax.cu``), beside its exercises' three.

``kernels/lsoftmax/lsoftmax.py`` keeps the records of the kernels its exercises grade; this module writes
those of the kernels the four layer versions launch, and ``lsoftmax.py`` puts them all in its
``KERNELS`` in the order of ``lsoftmax.cu``.  A layer version is a rung of several kernels: its first
kernel's record carries the version's key ("caffe", "factored", "fused", "epilogue") and title.  A layer launcher runs several kernels (the Caffe forward three, the epilogue
version three): each of them is recorded with that launcher, the launch it gets for a shape
``{"batch": N, "classes": C, "dim": D}``, its least traffic and arithmetic, and the float64
reference of what the launcher returns.

The records take the module as an argument instead of importing it: ``lsoftmax.py`` calls
:func:`layer_records` with itself, so nothing imports in a circle.
"""

from __future__ import annotations

from kernels.runtime import blocks_for
from kernels.runtime.loader import grid_stride_blocks
from kernels.runtime.versions import KernelVersion, LaunchConfig, as_launch, launch_1d


def _sizes(shape) -> tuple[int, int, int]:
    return int(shape["batch"]), int(shape["classes"]), int(shape["dim"])


def layer_records(L) -> list[KernelVersion]:
    """The records of the layer kernels of ``L``, the module ``kernels.lsoftmax.lsoftmax``."""

    def record(kernel, launcher, launch, nbytes, nflops, reference, **rung):
        return KernelVersion(L.TOPIC, kernel, launcher, launch, bytes=nbytes, flops=nflops, reference=reference,
                             **rung)

    def per_sample(shape) -> LaunchConfig:  # a grid-stride loop over the samples
        return launch_1d(L._grid(_sizes(shape)[0]), L.BLOCK)

    def per_element(count):
        return lambda shape: launch_1d(L._grid(count(*_sizes(shape))), L.BLOCK)

    def row_by_row(shape) -> LaunchConfig:  # x covers a row of logits, y the rows
        N, C, _ = _sizes(shape)
        return as_launch(L._row_grid(N, C), L.BLOCK)

    def fused(shape) -> LaunchConfig:
        N, C, _ = _sizes(shape)
        threads = L.fused_threads(C)
        return launch_1d(L._fused_grid(N, threads), threads)

    def transpose_of(rows, cols) -> LaunchConfig:
        return as_launch((blocks_for(cols, L.TILE), blocks_for(rows, L.TILE)), (L.TILE, L.TILE_ROWS))

    def logits(F, X, W, labels, m, lam):
        """What the Caffe forward returns: the blended logits (F = X W^T)."""
        return L.logits_reference(X, W, labels, m, lam)

    def loss(F, X, W, labels, m, lam):
        """What the fused forward returns first: the per-sample loss (F = X W^T)."""
        return L.loss_reference(X, W, labels, m, lam)

    def logits_and_loss(X, W, labels, m, lam):
        return L.logits_reference(X, W, labels, m, lam), L.loss_reference(X, W, labels, m, lam)

    def margin_backward(G, X, W, labels, saved, m, lam):
        return L.margin_backward_reference(G, X, W, labels, m, lam)

    def layer_backward(X, W, labels, m, lam, grad_loss):
        """The fused backward's G~ goes through the GEMMs; what the layer gets is (dX, dW)."""
        return L.layer_backward_reference(X, W, labels, m, lam, grad_loss)

    # Bytes: N, C, D floats of 4 bytes; a sample's label row of W is read once (at most min(N, C) rows).
    def label_rows(N, C, D):
        return min(N, C) * D

    return [
        # version 1, the Caffe layer: three grid-stride kernels after the GEMM ...
        record("lsoftmax_copy_label_score", L.forward_caffe, per_sample,
               lambda s: 4.0 * (s["batch"] * s["dim"] + label_rows(*_sizes(s)) + 5 * s["batch"]),
               lambda s: 6.0 * s["batch"] * s["dim"], logits,
               number=1, key="caffe", title="GEMM, then copy-label-score, cos(m theta), blend (three launches) and "
                                            "the softmax loss; backward as two naive loops with a branch per term"),
        record("lsoftmax_blend_label_score", L.forward_caffe, per_sample,
               lambda s: 4.0 * 8 * s["batch"], lambda s: 6.0 * s["batch"], logits,
               number=1, title="the blended label logit written back"),
        # ... and its backward, one thread per element of dX and of dW, a loop over C (or N) each
        record("lsoftmax_backward_input_naive", L.backward_naive, per_element(lambda N, C, D: N * D),
               lambda s: 4.0 * (s["batch"] * s["classes"] + s["classes"] * s["dim"] + 2 * s["batch"] * s["dim"]),
               lambda s: 2.0 * s["batch"] * s["classes"] * s["dim"], margin_backward,
               number=1, title="dX, one thread per element, a loop over the classes"),
        record("lsoftmax_backward_weight_naive", L.backward_naive, per_element(lambda N, C, D: C * D),
               lambda s: 4.0 * (s["batch"] * s["classes"] + s["batch"] * s["dim"] + 2 * s["classes"] * s["dim"]),
               lambda s: 2.0 * s["batch"] * s["classes"] * s["dim"], margin_backward,
               number=1, title="dW, one thread per element, a loop over the batch"),
        # version 2, the factored backward: rescale the label column, then GEMMs and rank-1 terms
        record("lsoftmax_rescale_label_column", L.backward_factored, row_by_row,
               lambda s: 4.0 * (2 * s["batch"] * s["classes"] + 6 * s["batch"]),
               lambda s: 20.0 * s["batch"], margin_backward,
               number=2, title="the same forward; backward as two GEMMs plus rank-1 corrections", key="factored"),
        record("lsoftmax_add_scaled_rows", L.backward_factored, lambda s: as_launch(
                   L._row_grid(_sizes(s)[0], _sizes(s)[2]), L.BLOCK),
               lambda s: 4.0 * (3 * s["batch"] * s["dim"] + s["batch"]),
               lambda s: 2.0 * s["batch"] * s["dim"], margin_backward,
               number=2, title="a row of X scaled and added to each row of dX"),
        record("lsoftmax_class_sums", L.backward_factored,
               lambda s: launch_1d(grid_stride_blocks(s["classes"] * L.BLOCK, L.BLOCK), L.BLOCK),  # a block per class
               lambda s: 4.0 * (2 * s["batch"] + s["classes"]), lambda s: 1.0 * s["batch"], margin_backward,
               number=2, title="the rank-1 terms' sums per class"),
        record("lsoftmax_transpose_add_scaled_rows", L.backward_factored,
               lambda s: as_launch((blocks_for(s["classes"], L.TILE), blocks_for(s["dim"], L.TILE)),
                                   (L.TILE, L.TILE_ROWS)),
               lambda s: 4.0 * (3 * s["classes"] * s["dim"] + s["classes"]),
               lambda s: 2.0 * s["classes"] * s["dim"], margin_backward,
               number=2, title="dW^T transposed, the scaled rows of W added"),
        # version 3: margin, softmax and cross-entropy in one pass over a row, forward and backward
        record("lsoftmax_fused_forward", L.fused_forward, fused,
               lambda s: 4.0 * (s["batch"] * s["classes"] + s["batch"] * s["dim"] + label_rows(*_sizes(s))
                                + 5 * s["batch"]),
               lambda s: 4.0 * s["batch"] * s["classes"] + 6.0 * s["batch"] * s["dim"], loss,
               number=3, key="fused", title="margin + softmax + cross-entropy in one kernel each way, after the GEMM"),
        record("lsoftmax_fused_backward", L.fused_backward, fused,
               lambda s: 4.0 * (2 * s["batch"] * s["classes"] + 8 * s["batch"]),
               lambda s: 4.0 * s["batch"] * s["classes"], layer_backward,
               number=3, title="the fused backward: the logits' gradient in one pass"),
        # version 4: the margin and the softmax partials in the GEMM's epilogue
        record("lsoftmax_label_targets", L.gemm_margin_forward,
               lambda s: launch_1d(grid_stride_blocks(32 * s["batch"], L.BLOCK), L.BLOCK),
               lambda s: 4.0 * (s["batch"] * s["dim"] + label_rows(*_sizes(s)) + 6 * s["batch"]),
               lambda s: 6.0 * s["batch"] * s["dim"], logits_and_loss,
               number=4, key="epilogue",
               title="the label's logit and each tile's softmax partials in the forward GEMM's epilogue"),
        record("lsoftmax_gemm_margin_forward", L.gemm_margin_forward, lambda s: as_launch(
                   (blocks_for(s["classes"], L._sgemm.WARPTILE_DEFAULT["WT_BN"]),
                    blocks_for(s["batch"], L._sgemm.WARPTILE_DEFAULT["WT_BM"])), L._sgemm.warptile_threads()),
               lambda s: 4.0 * (s["batch"] * s["dim"] + s["classes"] * s["dim"] + s["batch"] * s["classes"]),
               lambda s: 2.0 * s["batch"] * s["classes"] * s["dim"], logits_and_loss,
               number=4, title="the warp-tiled GEMM with the margin and the partials in its epilogue"),
        record("lsoftmax_combine_partials", L.gemm_margin_forward, per_sample,
               lambda s: 4.0 * (2 * s["batch"] * blocks_for(s["classes"], L._sgemm.WARPTILE_DEFAULT["WT_BN"])
                                + 6 * s["batch"]),
               lambda s: 4.0 * s["batch"] * blocks_for(s["classes"], L._sgemm.WARPTILE_DEFAULT["WT_BN"]),
               logits_and_loss, number=4, title="the tiles' partials combined into each sample's loss"),
        # every version: the mean of the per-sample losses, in one block (a fixed order of additions)
        record("lsoftmax_mean_loss", L.mean_loss, lambda s: launch_1d(1, 1024),
               lambda s: 4.0 * (s["batch"] + 1), lambda s: 1.0 * s["batch"], lambda loss: loss.mean(),
               number=None, title="the mean of the per-sample losses in one block (every version)"),
        # psi(c) and its derivative by the kernels' own device helper, for the chapter's checks
        record("lsoftmax_psi_values", L.psi_values, lambda s: launch_1d(L._grid(int(s["n"])), L.BLOCK),
               lambda s: 12.0 * s["n"], lambda s: 12.0 * s["n"] * s["m"], L.psi_reference,
               number=None, title="psi(c) and its derivative by the kernels' device helper, for the chapter's checks"),
    ]
