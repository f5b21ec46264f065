"""The source a page shows: a kernel of a topic's ``.cu`` file, a Python function, a generated kernel.

Pages print the code they run from the files themselves, never a copy::

    from book.listings import show_kernel, show_python

    show_kernel("conv2d", "conv2d_forward_tiled")   # the kernel, with the comment above it
    show_python(conv2d.conv_layer_sequential)       # a function or method, as Python
"""

from __future__ import annotations

import inspect
import textwrap

from IPython.display import Code, display

from kernels.tools.source_excerpt import function_source


def kernel_listing(topic: str, name: str) -> Code:
    """The kernel (or device function) ``name`` of ``kernels/<part>/<topic>.cu``, with the comment above it."""
    return Code(function_source(topic, name), language="cuda")


def show_kernel(topic: str, name: str) -> None:
    display(kernel_listing(topic, name))


def python_listing(obj) -> Code:
    """A function, method or class as Python; a method without its class's indent."""
    return Code(textwrap.dedent(inspect.getsource(obj)), language="python")


def show_python(obj) -> None:
    display(python_listing(obj))


def excerpt(source: str, start: str, end: str | None = None) -> str:
    """The part of ``source`` from the first ``start`` up to the first ``end`` after it (None: to its end)."""
    first = source.index(start)
    return source[first:source.index(end, first) if end else len(source)]


def generated_listing(source: str) -> Code:
    """A source the index-notation compiler generated, without the prelude every such source shares."""
    return Code(source[source.index("//", source.index("tc_relu")):], language="cuda")
