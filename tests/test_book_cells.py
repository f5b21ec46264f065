"""The pages' code cells define no functions or classes of their own: helpers live in the ``book`` package.

A function written in a page's cell is code no test imports and no other page can share (two pages once
had two different ``speed_table`` s); the page imports it from a module of ``book`` instead, as d2l's
``#@save`` does.  The functions listed in :data:`DEFINED_IN_CELLS` stay in their cells, each for the reason
given: the reader is meant to read them there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from book.run_chapter import code_cells

BOOK = Path(__file__).resolve().parents[1] / "book"

_GRADIENT = ("the function whose gradient the check compares, built from this page's kernels and state "
             "where the reader sees what is checked")

#: (page, function): why the page defines it in a cell.
DEFINED_IN_CELLS = {
    ("perceptrons", "sign_layer"): "the lesson: a layer of perceptrons is the kernel launched once per neuron",
    ("perceptrons", "network"): "the lesson: layers of perceptrons applied one after another",
    ("capsules", "routed"): _GRADIENT,
    ("capsules", "routed_backward"): _GRADIENT,
    ("cnn_backward", "conv_vjp"): _GRADIENT,
    ("large_margin_softmax", "naive_vjp"): _GRADIENT,
    ("mlp_backprop", "vjp"): _GRADIENT,
    ("mlp_backprop", "ce_vjp"): _GRADIENT,
}


def defined_in_cells(markdown: str) -> list[str]:
    """The functions and classes the code cells of a page define, at any depth, in order."""
    found = []
    for cell in code_cells(markdown):
        code = "\n".join(line for line in cell.splitlines() if not line.startswith(("%", "!")))
        found += [node.name for node in ast.walk(ast.parse(code))
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return found


def test_no_code_cell_defines_a_function_or_class_but_those_listed_with_their_reason():
    defined = {(page.stem, name) for page in sorted(BOOK.glob("*.md")) for name in defined_in_cells(page.read_text())}
    unlisted = sorted(defined - set(DEFINED_IN_CELLS))
    assert not unlisted, (f"code cells define {unlisted}: move each to a module of the book package (one job a "
                          f"module) and import it, or list it in DEFINED_IN_CELLS with the reason it stays")
    stale = sorted(set(DEFINED_IN_CELLS) - defined)
    assert not stale, f"DEFINED_IN_CELLS lists what no cell defines any more: {stale}"


def test_the_finder_sees_functions_and_classes_in_any_cell():
    page = ("Text with `def prose(): pass` in it.\n\n```{code-cell} ipython3\n:tags: [hide-input]\n\n"
            "x = 1\nfor i in range(2):\n    def inner():\n        pass\n```\n\n"
            "```python\ndef listing_only(): pass\n```\n\n"
            "```{code-cell} ipython3\nclass Helper:\n    def method(self):\n        return lambda: 1\n```\n")
    assert defined_in_cells(page) == ["inner", "Helper", "method"]
