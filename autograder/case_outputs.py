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
import secrets
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


def _results_folder(directory: str | os.PathLike) -> int:
    """A descriptor of ``directory``/results, a real folder: whatever else holds that name (a link the
    submission planted, a file) is moved aside first."""
    parent = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(3):
            try:
                return os.open(DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except FileNotFoundError:
                pass
            except OSError:
                os.rename(DIRECTORY, f"{DIRECTORY}.planted-{secrets.token_hex(4)}", src_dir_fd=parent, dst_dir_fd=parent)
            try:
                os.mkdir(DIRECTORY, 0o700, dir_fd=parent)
            except FileExistsError:
                pass
        return os.open(DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)


def save(directory: str | os.PathLike, tag: str, outputs: dict, inputs_after: dict | None = None) -> None:
    """Child side: write the buffers of one launch, each to a fresh file renamed into place (a link or file the
    submission planted under that name is replaced, never followed).  A write that fails raises (OSError): the
    grading then ends as the grader's failure, or as the submission's where it filled or changed the space
    (:mod:`autograder.grading_child`), never as a case that reads as missing and costs the student points."""
    folder = _results_folder(directory)
    try:
        for role, arrays in (("out", outputs), ("in", inputs_after or {})):
            for name, array in arrays.items():
                final = f"{tag}.{role}.{name}.npy"
                temporary = f".{final}.{secrets.token_hex(4)}"
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=folder)
                with os.fdopen(fd, "wb") as handle:
                    np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
                os.rename(temporary, final, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


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
