"""The layers point one way: engine <- kernels <- grader, book and benchmarks.

* ``kernels/runtime`` (the engine) imports nothing of the project above it;
* ``kernels`` and ``autograder`` import nothing of ``book`` or ``benchmarks``;
* the grader's modules import each other without a circle;
* the grading child (what runs in the sandbox) and the grader's side of a
  grading are apart: the child holds nothing of the instructor's side, the
  grader's side starts the child and never imports its code;
* ``benchmarks`` is a package: no script edits ``sys.path``.

Imports are read from the source (every ``import``, at the top of a module
or inside a function), so that a hidden import cannot hide a layer pointing up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("kernels", "autograder", "book", "benchmarks")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module or not node.level:
                found.add(target)  # "from . import x" imports x, not (for this purpose) the package's own code
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PROJECT}


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", python_files("kernels/runtime"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_nothing_above_it(path):
    above = {m for m in imports(path) if not m.startswith("kernels.runtime")}
    assert not above, f"{module_name(path)} imports {sorted(above)}"


@pytest.mark.parametrize("path", python_files("kernels") + python_files("autograder"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_and_grader_do_not_import_the_book_or_the_benchmarks(path):
    up = {m for m in imports(path) if m.split(".")[0] in ("book", "benchmarks")}
    assert not up, f"{module_name(path)} imports {sorted(up)}"


def test_the_grader_has_no_import_circle():
    files = {module_name(p): p for p in python_files("autograder")}
    graph = {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}
    # an import of a package's attribute ("autograder.exercises.get_exercise") names no module: ignored above
    state: dict[str, int] = {}

    def visit(name, trail):
        if state.get(name) == 1:
            cycle = trail[trail.index(name):] + [name]
            pytest.fail("import circle: " + " -> ".join(cycle))
        if state.get(name) == 2:
            return
        state[name] = 1
        for dep in sorted(graph[name]):
            visit(dep, trail + [name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])


def grader_imports(start: str) -> set[str]:
    """Every module of the grader that ``start`` imports, directly or through others."""
    files = {module_name(p): p for p in python_files("autograder")}
    seen, todo = set(), [start]
    while todo:
        for dep in imports(files[todo.pop()]):
            if dep in files and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


#: The instructor's side: the course secret, nbgrader, the gradebook, a class's grading, the command.
INSTRUCTOR_SIDE = ("autograder.course", "autograder.course_secret", "autograder.class_grading", "autograder.class_run",
                   "autograder.cluster", "autograder.cli", "autograder.grading_record", "autograder.export",
                   "autograder.leaderboard", "autograder.grade_cells", "autograder.nbgrader_autograde",
                   "autograder.nbgrader_bridge", "autograder.nbgrader_preprocessors")


def test_the_grading_child_holds_nothing_of_the_instructor_s_side():
    inside = grader_imports("autograder.grading_child")
    assert "autograder.checker" in inside and "autograder.tc_grading" in inside
    assert not inside & {"autograder.isolation", *INSTRUCTOR_SIDE}, sorted(inside & {"autograder.isolation", *INSTRUCTOR_SIDE})


def test_the_grader_s_side_of_a_grading_starts_the_child_and_never_imports_its_code():
    parent = grader_imports("autograder.isolation")
    child_only = {"autograder.grading_child", "autograder.checker", "autograder.tc_grading"}
    assert "autograder.verdict" in parent and not parent & child_only, sorted(parent & child_only)


@pytest.mark.parametrize("path", python_files("benchmarks"), ids=lambda p: p.name)
def test_benchmarks_are_a_package_without_path_edits(path):
    assert "sys.path" not in path.read_text(), f"{path.name} edits sys.path: import through the benchmarks package"
