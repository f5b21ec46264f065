"""Imports of the project's own modules stand at the top of a module, where a reader sees them.

An import of ``kernels``, ``autograder``, ``book`` or ``benchmarks`` (or a relative one) inside a
function hides an arrow of the import graph.  It is allowed where it is deliberate, and then its
line says why with a trailing comment ``# deferred: <why>``: an optional dependency, an import
circle broken on purpose (and its reason), a heavy module loaded on first use, an import that must
happen inside the sandboxed grading child.  Third-party modules deferred for the same reasons
(PyCUDA, torch) are not the project's own and are not counted here.

:data:`ENFORCED` lists the folders held to this rule, one line each.  Run as a script
(``python tests/test_deferred_imports.py``), this module counts the function-level imports of own
modules in every top-level folder, marked and unmarked.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OWN = ("kernels", "autograder", "book", "benchmarks")

#: Folders (relative to the repository) whose function-level imports of own modules must say why.
ENFORCED = (
    "kernels",
    "benchmarks",
    "book",
    "autograder",
)

MARK = re.compile(r"#\s*deferred:\s*\S")


@dataclass(frozen=True)
class FunctionLevelImport:
    path: Path
    line: int
    text: str
    marked: bool  # the statement carries "# deferred: <why>"

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


def imports_own_module(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in OWN
    return any(alias.name.split(".")[0] in OWN for alias in node.names)


def function_level_imports(path: Path) -> list[FunctionLevelImport]:
    """The imports of own modules made inside a function or method of ``path``, at any depth."""
    source = path.read_text()
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)) and imports_own_module(child):
                statement = lines[child.lineno - 1 : child.end_lineno]
                found.append(FunctionLevelImport(path, child.lineno, " ".join(s.strip() for s in statement),
                                                 any(MARK.search(s) for s in statement)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source, str(path)), False)
    return found


def python_files(folder: Path) -> list[Path]:
    """The Python files under ``folder``, without caches, builds and hidden folders."""
    return sorted(p for p in folder.rglob("*.py")
                  if not any(part.startswith((".", "_build", "__pycache__")) for part in p.relative_to(ROOT).parts))


def top_level_folders() -> list[Path]:
    return sorted(d for d in ROOT.iterdir() if d.is_dir() and not d.name.startswith((".", "_")) and python_files(d))


def counts() -> dict[str, tuple[int, int]]:
    """``{folder: (function-level imports of own modules, how many of them say why)}`` for every top-level
    folder and every folder of :data:`ENFORCED`."""
    table = {}
    for folder in top_level_folders() + [ROOT / name for name in ENFORCED]:
        found = [imp for path in python_files(folder) for imp in function_level_imports(path)]
        table[str(folder.relative_to(ROOT))] = (len(found), sum(imp.marked for imp in found))
    return table


@pytest.mark.parametrize("folder", ENFORCED)
def test_function_level_imports_of_own_modules_say_why(folder):
    files = python_files(ROOT / folder)
    assert files, f"{folder} holds no Python files: remove it from ENFORCED or fix its path"
    unmarked = [imp for path in files for imp in function_level_imports(path) if not imp.marked]
    assert not unmarked, (
        f"{len(unmarked)} function-level import(s) of the project's own modules in {folder}: move each to the "
        f"top of its module, or end its line with '# deferred: <why>' where it must wait\n"
        + "\n".join(f"  {imp}" for imp in unmarked))


def test_the_rule_finds_an_unmarked_import_and_accepts_a_marked_one(tmp_path):
    """A nested, a relative and a method's import are found, a reason must follow the mark; imports at the
    top and of third-party modules are not counted."""
    path = tmp_path / "example.py"
    path.write_text(
        "import kernels.runtime\n"
        "def f():\n"
        "    import numpy\n"
        "    from kernels.runtime import errors\n"
        "    def g():\n"
        "        from . import selection\n"
        "    from autograder import (  # deferred: a cycle broken on purpose, for the test\n"
        "        checker)\n"
        "class C:\n"
        "    def m(self):\n"
        "        import book.figures as figures  # deferred:\n"
    )
    found = function_level_imports(path)
    assert [(imp.line, imp.marked) for imp in found] == [(4, False), (6, False), (7, True), (11, False)]


if __name__ == "__main__":
    print(f"{'folder':<16} {'own imports in functions':>25} {'marked deferred':>16}")
    for name, (total, marked) in counts().items():
        print(f"{name:<16} {total:>25} {marked:>16}")
