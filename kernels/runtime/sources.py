"""Where the book's topic sources are: ``kernels/<topic>.cu``, or ``kernels/<part>/<topic>.cu`` for a topic kept
in a part's folder, beside this package.

The engine reads them (:func:`kernels.runtime.loader.load_topic`) without
importing the topic modules above it.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent


def source_path(topic: str) -> Path:
    """Path of ``kernels/<topic>.cu``, else of the one ``kernels/<part>/<topic>.cu``."""
    path = KERNEL_DIR / f"{topic}.cu"
    if path.exists():
        return path
    in_parts = sorted(KERNEL_DIR.glob(f"*/{topic}.cu"))
    return in_parts[0] if in_parts else path
