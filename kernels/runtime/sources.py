"""Where the book's topic sources are: ``kernels/<part>/<topic>.cu``, beside this package.

A topic's name is unique across the parts (``reduction`` is
``kernels/basics/reduction.cu``, its module ``kernels.basics.reduction``), so
code names a topic and this module finds its file.  The engine reads them
(:func:`kernels.runtime.loader.load_topic`) without importing the topic
modules above it.  ``kernels/cuda_helpers.cuh`` and the other shared headers
stay in ``kernels/``, the include path of every compile, so a topic includes
them, or another part's file, as ``#include "cuda_helpers.cuh"`` or
``#include "gemm/sgemm.cu"``.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent.parent


def topic_sources() -> dict[str, Path]:
    """Every topic's ``.cu`` file by topic name, in the order of their paths.

    Raises ValueError when two parts hold a topic of the same name, since a
    name must say which file it means.
    """
    found: dict[str, Path] = {}
    for path in sorted(KERNEL_DIR.glob("*/*.cu")):
        if path.stem in found:
            raise ValueError(f"two topics are called {path.stem!r}: {relative_path(found[path.stem])} and "
                             f"{relative_path(path)}; rename one, a topic's name must be unique")
        found[path.stem] = path
    return found


def source_path(topic: str) -> Path:
    """Path of ``kernels/<part>/<topic>.cu``."""
    sources = topic_sources()
    if topic not in sources:
        raise KeyError(f"no kernels/<part>/{topic}.cu: the topics are {', '.join(sorted(sources))}")
    return sources[topic]


def relative_path(path: Path) -> str:
    """``path`` as the book names it, from the repository's root: ``kernels/basics/reduction.cu``."""
    return path.resolve().relative_to(KERNEL_DIR.parent).as_posix()


def topic_module(topic: str) -> str:
    """The Python module beside the topic's source: ``kernels.basics.reduction``."""
    return ".".join(source_path(topic).relative_to(KERNEL_DIR.parent).with_suffix("").parts)
