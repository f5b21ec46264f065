"""Where the book's topic sources are: ``kernels/<topic>.cu``, beside this package.

The engine reads them (:func:`kernels.runtime.loader.load_topic`) without
importing the topic modules above it.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent


def source_path(topic: str) -> Path:
    """Path of ``kernels/<topic>.cu``."""
    return KERNEL_DIR / f"{topic}.cu"
