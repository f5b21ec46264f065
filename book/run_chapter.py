"""Run the code cells of chapters as one plain Python script, without Jupyter.

For machines that have a GPU but no notebook tooling (the book's GPU runner
has no package index): it checks that a chapter runs on the GPU, measuring as
it goes, the way ``make book`` runs it on the emulator.  Figures are drawn
but not shown; what cells display is printed (shortened).

    DLK_BACKEND=gpu PYTHONPATH=$PWD python3 book/run_chapter.py book/cuda_from_python.md
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path


def _stand_in_ipython() -> None:
    """A minimal IPython.display where IPython is not installed: displayed objects are printed."""
    try:
        import IPython.display  # noqa: F401

        return
    except ImportError:
        pass

    class Shown:
        def __init__(self, data=None, *args, **kwargs):
            self.data = data

        def __repr__(self) -> str:
            return str(self.data)[:300]

    display = types.ModuleType("IPython.display")
    display.Code = display.HTML = display.Markdown = display.Image = Shown
    display.display = print
    ipython = types.ModuleType("IPython")
    ipython.display = display
    ipython.get_ipython = lambda: None
    ipython.version_info = (8, 24, 0)
    sys.modules["IPython"] = ipython
    sys.modules["IPython.display"] = display


def code_cells(markdown: str) -> list[str]:
    """The code of each ```{code-cell} block, cell options (":tags: ...") removed."""
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", markdown, re.S | re.M)
    return [re.sub(r"^:[\w-]+:.*\n", "", cell, flags=re.M) for cell in cells]


def main(paths: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    _stand_in_ipython()
    for path in paths:
        cells = code_cells(Path(path).read_text())
        namespace: dict = {"__name__": "__chapter__"}
        for k, code in enumerate(cells, 1):
            print(f"--- {path}: cell {k} of {len(cells)}", flush=True)
            result = None
            body = code.rstrip().splitlines()
            # Like a notebook, show the value of a cell's last line if it is an expression.
            try:
                compile(body[-1], "<last>", "eval") if body else None
                last_is_expression = bool(body) and not body[-1].startswith((" ", "\t"))
            except SyntaxError:
                last_is_expression = False
            if last_is_expression:
                exec(compile("\n".join(body[:-1]), f"{path}:cell{k}", "exec"), namespace)
                result = eval(compile(body[-1], f"{path}:cell{k}", "eval"), namespace)
            else:
                exec(compile(code, f"{path}:cell{k}", "exec"), namespace)
            if result is not None:
                print(repr(result)[:300])
        print(f"{path}: all {len(cells)} cells ran")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["book/cuda_from_python.md"]))
