"""Activation functions of ``kernels/dense/activations.cu``: NumPy references and launchers.

``forward(name, z)`` and ``backward(name, saved, dY)`` launch the kernel
pair of ``name`` ("sigmoid", "tanh" or "relu").  ``saved`` is what the
backward kernel reads: the output y for sigmoid and tanh, the input z for ReLU
(``SAVES[name]`` says which).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..runtime import Module, blocks_for
from ..runtime.loader import float32_operand, load_topic
from ..runtime.versions import KernelVersion, kernel_table, launch_1d

TOPIC = "activations"
BLOCK = 256
#: The activations in the order the chapter introduces them: a rung each, its forward and its backward kernel.
TITLES = {"sigmoid": "the logistic sigmoid, f' from y", "tanh": "tanh, f' from y", "relu": "ReLU, f' from z"}
NAMES = tuple(TITLES)
SAVES = {"sigmoid": "output", "tanh": "output", "relu": "input"}


def module() -> Module:
    return load_topic(TOPIC)


# --------------------------------------------------------------------------- NumPy references (float64)


def forward_reference(name: str, z) -> np.ndarray:
    z = np.asarray(z, np.float64)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-z))
    if name == "tanh":
        return np.tanh(z)
    if name == "relu":
        return np.maximum(z, 0.0)
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")


def backward_reference(name: str, saved, dY) -> np.ndarray:
    """dE/dz from dE/dy; ``saved`` is y (sigmoid, tanh) or z (relu), as for the kernels."""
    s = np.asarray(saved, np.float64)
    dY = np.asarray(dY, np.float64)
    if name == "sigmoid":
        return dY * s * (1.0 - s)
    if name == "tanh":
        return dY * (1.0 - s * s)
    if name == "relu":
        return dY * (s > 0)
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")


# --------------------------------------------------------------------------- launchers


def _out(out, shape):
    return np.empty(shape, np.float32) if out is None else out


def forward(name: str, z, out=None):
    """``<name>_forward``: y = f(z), one thread per element."""
    if name not in NAMES:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")
    z = float32_operand(z)
    y = _out(out, tuple(z.shape))
    count = int(z.size)
    module().function(f"{name}_forward")(z, y, count, grid=blocks_for(count, BLOCK), block=BLOCK)
    return y


def backward(name: str, saved, dY, out=None):
    """``<name>_backward``: dZ = dY * f'(z), one thread per element."""
    if name not in NAMES:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(NAMES)}")
    saved, dY = float32_operand(saved), float32_operand(dY)
    if tuple(saved.shape) != tuple(dY.shape):
        raise ValueError(f"saved {SAVES[name]} has shape {tuple(saved.shape)} but dY has {tuple(dY.shape)}")
    dZ = _out(out, tuple(dY.shape))
    count = int(dY.size)
    module().function(f"{name}_backward")(saved, dY, dZ, count, grid=blocks_for(count, BLOCK), block=BLOCK)
    return dZ


# --------------------------------------------------------------------------- the versions' facts
# A shape is {"n": elements}; one thread per element.


#: Arithmetic per element, exp and division counted as one each (relu: a comparison).
FLOPS_PER_ELEMENT = {("sigmoid", "forward"): 4, ("tanh", "forward"): 4, ("relu", "forward"): 1,
                     ("sigmoid", "backward"): 3, ("tanh", "backward"): 3, ("relu", "backward"): 1}


def _elementwise(shape):
    return launch_1d(blocks_for(int(shape["n"]), BLOCK), BLOCK)


KERNELS = kernel_table(*(
    KernelVersion(TOPIC, f"{name}_{direction}", partial(launcher, name), _elementwise,
                  # forward: z read, y written; backward: the saved values and dY read, dZ written
                  bytes=(lambda shape, k=reads: 4.0 * (k + 1) * int(shape["n"])),
                  flops=(lambda shape, f=FLOPS_PER_ELEMENT[name, direction]: float(f * int(shape["n"]))),
                  reference=partial(reference, name), number=number,
                  title=TITLES[name] if direction == "forward" else "its derivative times dY")
    for number, name in enumerate(NAMES, start=1)
    for direction, launcher, reference, reads in (("forward", forward, forward_reference, 1),
                                                   ("backward", backward, backward_reference, 2))
))
