"""One function of a kernel file, as a chapter shows it: its comment, any ``#define`` above it, and its body.

Chapters print the code they run from ``kernels/<part>/<topic>.cu`` itself, never
a copy; when a file holds several versions, a chapter shows them one at a time::

    from kernels.tools.source_excerpt import function_source
    Code(function_source("perceptron", "gradient_sum_tree"), language="cuda")

A kernel's whole section (the helpers and defines written for it too) is its
record's ``source`` (:func:`kernels.runtime.sources.section`).
"""

from __future__ import annotations

from kernels.runtime.sources import function_lines, relative_path, source_path


def function_source(topic: str, name: str) -> str:
    """The ``__global__`` (or ``__device__``) function ``name`` of ``kernels/<part>/<topic>.cu``.

    Includes the comment lines and ``#define`` s directly above it (up to the
    previous blank line or ``// ----`` separator), and the body to its closing
    brace.  The name may follow qualifiers such as ``__launch_bounds__(256, 2)``,
    on the same line or the next.
    """
    path = source_path(topic)
    source = path.read_text()
    try:
        start, end = function_lines(source, name)
    except KeyError:
        raise KeyError(f"{relative_path(path)} has no function called {name!r}") from None
    lines = source.splitlines()
    first = start
    while first > 0:
        above = lines[first - 1].strip()
        if not above or above.startswith("// ----"):
            break
        if not (above.startswith(("//", "#define", "/*", "*")) or above.endswith("*/")):
            break
        first -= 1
    return "\n".join(lines[first : end + 1]) + "\n"
