"""Reference CUDA C kernels of the book, each beside its NumPy reference and launcher.

``kernels/<topic>.cu`` holds a topic's kernels numbered in teaching order;
``kernels/<topic>.py`` holds the NumPy reference and a launcher per version.
``kernels.runtime`` compiles and launches them on a GPU or the CPU emulator.
"""

from .runtime.sources import KERNEL_DIR, source_path


def read_source(topic: str) -> str:
    """The CUDA C source of ``kernels/<topic>.cu``, as the chapters show it."""
    return source_path(topic).read_text()
