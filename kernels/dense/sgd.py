"""The gradient descent step of ``kernels/dense/sgd.cu``: reference and launcher."""

from __future__ import annotations

import numpy as np

from ..runtime import Module, blocks_for
from ..runtime.loader import load_topic
from ..runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "sgd"
BLOCK = 256


def module() -> Module:
    return load_topic(TOPIC)


def sgd_update_reference(param, grad, learning_rate: float) -> np.ndarray:
    return np.asarray(param, np.float64) - learning_rate * np.asarray(grad, np.float64)


def sgd_update(param, grad, learning_rate: float):
    """``sgd_update``, in place on ``param`` (a float32 array or a device buffer)."""
    count = int(param.size)
    module().function("sgd_update")(param, grad, float(learning_rate), count, grid=blocks_for(count, BLOCK), block=BLOCK)
    return param


KERNELS = kernel_table(
    KernelVersion(TOPIC, "sgd_update", sgd_update, lambda shape: launch_1d(blocks_for(int(shape["n"]), BLOCK), BLOCK),
                  bytes=lambda shape: 12.0 * int(shape["n"]),  # param and grad read, param written
                  flops=lambda shape: 2.0 * int(shape["n"]), reference=sgd_update_reference,
                  number=1, title="one thread per parameter"),
)
