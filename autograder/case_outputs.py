"""The arrays a grading child hands back: one ``.npy`` file per buffer, in its scratch directory.

The child (inside the sandbox) writes what a launch left in every output
buffer, and in every input buffer, under a tag (``case-3``, ``timing``).  The
grader reads them only after the sandbox and every process in it are gone,
and trusts nothing about them: a file is opened without following links,
must be a regular file of plausible size, is parsed without pickle, and must
have the shape the grader's own reference has.  Anything else reads as
missing, which fails the case.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import ml_dtypes
import numpy as np

DIRECTORY = "results"
#: Largest element the grader accepts back (complex128 is the widest NumPy number).
MAX_ITEMSIZE = 16
HEADER_ALLOWANCE = 4096
#: np.save writes a bfloat16 array (ml_dtypes) as raw two-byte records, which load back as this.
SAVED_BFLOAT16 = np.dtype("V2")


def _path(directory: str | os.PathLike, tag: str, role: str, name: str) -> Path:
    return Path(directory) / DIRECTORY / f"{tag}.{role}.{name}.npy"


def save(directory: str | os.PathLike, tag: str, outputs: dict, inputs_after: dict | None = None) -> None:
    """Child side: write the buffers of one launch (never raises for a full disk: the case then reads as missing)."""
    (Path(directory) / DIRECTORY).mkdir(exist_ok=True)
    for role, arrays in (("out", outputs), ("in", inputs_after or {})):
        for name, array in arrays.items():
            try:
                np.save(_path(directory, tag, role, name), np.ascontiguousarray(array), allow_pickle=False)
            except OSError:
                pass


def load(directory: str | os.PathLike, tag: str, role: str, name: str, size: int) -> np.ndarray | None:
    """Grader side: the ``size`` elements written for ``name``, flat, or None if they cannot be trusted."""
    path = _path(directory, tag, role, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > size * MAX_ITEMSIZE + HEADER_ALLOWANCE:
            return None
        try:
            array = np.load(handle, allow_pickle=False)
        except (ValueError, OSError, EOFError):
            return None
    if isinstance(array, np.ndarray) and array.dtype == SAVED_BFLOAT16:
        array = array.view(ml_dtypes.bfloat16)
    elif not isinstance(array, np.ndarray) or array.dtype.kind not in "biufc":
        return None
    if array.size != size:
        return None
    return array.ravel()
