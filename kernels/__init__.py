"""Reference CUDA C kernels of the book, each beside its NumPy reference and launcher.

The kernels are grouped by the book's parts: ``kernels/basics/``, ``dense/``,
``conv/``, ``gemm/``, ``capsules/``, ``lsoftmax/`` and ``index_notation/``.
``kernels/<part>/<topic>.cu`` holds a topic's kernels in teaching order;
``kernels/<part>/<topic>.py`` holds the NumPy reference, a launcher per
version and ``KERNELS``, one record per kernel.  A topic's name is unique
across the parts: ``source_path("reduction")`` finds its file.
``kernels.runtime`` compiles and launches them on a GPU or the CPU emulator.
"""

from .runtime.sources import KERNEL_DIR, source_path


def read_source(topic: str) -> str:
    """The CUDA C source of ``kernels/<part>/<topic>.cu``, as the chapters show it."""
    return source_path(topic).read_text()
