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

import re
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


# --------------------------------------------------------------------------- finding a function in a .cu


def function_lines(source: str, name: str) -> tuple[int, int]:
    """The lines (0-based, inclusive) of the ``__global__`` or ``__device__`` function ``name`` in ``source``:
    from its first qualifier (``template <...>``, ``__launch_bounds__(...)`` on that line or the next) to its
    closing brace.  KeyError if ``source`` defines no such function."""
    match = _definition(name).search(source)
    if match is None:
        raise KeyError(name)
    start = source.count("\n", 0, match.start())
    return start, _closing_line(source.splitlines(), start)


def _definition(name: str) -> re.Pattern:
    return re.compile(
        r"^[ \t]*(?:template\s*<[^>]*>\s*)?(?:extern\s+\"C\"\s+)?(?:__global__|__device__)"
        r"(?:[^(;{]|\([^()]*\))*?\b" + re.escape(name) + r"\s*\(",
        re.M,
    )


def _closing_line(lines: list[str], start: int) -> int:
    """The line of the brace that closes the body opened at or after line ``start`` (comments ignored)."""
    depth, seen_brace = 0, False
    for end in range(start, len(lines)):
        code = re.sub(r"//.*", "", lines[end])
        depth += code.count("{") - code.count("}")
        seen_brace = seen_brace or "{" in code
        if seen_brace and depth == 0:
            return end
    return len(lines) - 1


# --------------------------------------------------------------------------- a kernel's section

_SEPARATOR = re.compile(r"^//\s*-{4,}\s*$")
_KERNEL = re.compile(r"^[ \t]*(?:template\s*<[^>]*>\s*)?(?:extern\s+\"C\"\s+)?__global__\b", re.M)


def _preamble_end(lines: list[str]) -> int:
    """The first line after the file's opening comment block and the ``#include`` and blank lines after it."""
    at = 0
    while at < len(lines) and lines[at].lstrip().startswith("//"):
        at += 1
    while at < len(lines) and (not lines[at].strip() or lines[at].lstrip().startswith("#include")):
        at += 1
    return at


def _boundaries(source: str) -> tuple[set[int], set[int]]:
    """Where sections may start (line numbers) and the separator lines, which belong to no section.

    A section starts after the preamble, after the closing brace of every ``__global__`` function and after
    every ``// ----`` separator line.
    """
    lines = source.splitlines()
    separators = {i for i, line in enumerate(lines) if _SEPARATOR.match(line)}
    starts = {_preamble_end(lines)} | {i + 1 for i in separators}
    for match in _KERNEL.finditer(source):
        starts.add(_closing_line(lines, source.count("\n", 0, match.start())) + 1)
    return starts, separators


def section(source: str, name: str) -> str:
    """The section of ``source`` that holds the function ``name``: what a chapter shows for a kernel.

    The file's kernels divide it: a section runs from the end of the previous ``__global__`` function (or
    of the file's opening comment and includes, or a ``// ----`` separator line, whichever is last) to the
    end of the next ``__global__`` function (or the next separator).  So a kernel's section is the kernel,
    the comment block above it, and every ``#define`` and ``__device__`` helper written between it and
    the kernel before; a helper's section is the section it lies in (a group of helpers between two
    separators is a section of its own).  No comment marker is read: the kernel is found by its name.
    """
    lines = source.splitlines()
    try:
        start, end = function_lines(source, name)
    except KeyError:
        raise KeyError(f"no function called {name!r}") from None
    starts, separators = _boundaries(source)
    first = max((s for s in starts if s <= start), default=0)
    last = min([s - 1 for s in starts if s > end] + [i - 1 for i in separators if i > end] + [len(lines) - 1])
    return "\n".join(lines[first : last + 1]).strip("\n")


def kernel_section(topic: str, name: str) -> str:
    """:func:`section` of ``kernels/<part>/<topic>.cu``, a KeyError naming the file when it has no ``name``."""
    path = source_path(topic)
    try:
        return section(path.read_text(), name)
    except KeyError:
        raise KeyError(f"{relative_path(path)} has no function called {name!r}") from None
