"""One function of a kernel file, as a chapter shows it: its comment, any ``#define`` above it, and its body.

Chapters print the code they run from ``kernels/<part>/<topic>.cu`` itself, never a
copy; when a file holds several versions, a chapter shows them one at a time::

    from kernels.tools.source_excerpt import function_source
    Code(function_source("perceptron", "gradient_sum_tree"), language="cuda")
"""

from __future__ import annotations

import re

from kernels import read_source


def function_source(topic: str, name: str) -> str:
    """The ``__global__`` (or ``__device__``) function ``name`` of ``kernels/<part>/<topic>.cu``.

    Includes the comment lines and ``#define`` s directly above it (up to the
    previous blank line or ``// ----`` separator), and the body to its closing
    brace.  The name may follow qualifiers such as ``__launch_bounds__(256, 2)``,
    on the same line or the next.
    """
    source = read_source(topic)
    lines = source.splitlines()
    pattern = re.compile(
        r"^[ \t]*(?:template\s*<[^>]*>\s*)?(?:extern\s+\"C\"\s+)?(?:__global__|__device__)"
        r"(?:[^(;{]|\([^()]*\))*?\b" + re.escape(name) + r"\s*\(",
        re.M,
    )
    match = pattern.search(source)
    if match is None:
        raise KeyError(f"kernels/{topic}.cu has no function called {name!r}")
    start = source.count("\n", 0, match.start())
    first = start
    while first > 0:
        above = lines[first - 1].strip()
        if not above or above.startswith("// ----"):
            break
        if not (above.startswith(("//", "#define", "/*", "*")) or above.endswith("*/")):
            break
        first -= 1
    depth, end, seen_brace = 0, start, False
    for end in range(start, len(lines)):
        code = re.sub(r"//.*", "", lines[end])
        depth += code.count("{") - code.count("}")
        seen_brace = seen_brace or "{" in code
        if seen_brace and depth == 0:
            break
    return "\n".join(lines[first : end + 1]) + "\n"
