"""The layers point one way: engine <- kernels <- grader, book and benchmarks.

* ``kernels/runtime`` (the engine) imports nothing of the project above it;
* inside the engine, a module imports only from its own layer and the layers below it, as the
  package docstring of ``kernels/runtime/__init__.py`` lists them;
* ``kernels`` and ``autograder`` import nothing of ``book`` or ``benchmarks``;
* the modules of the grader, of ``kernels`` (the engine with them) and of ``benchmarks`` import each
  other without a circle;
* the grading child (what runs in the sandbox) and the grader's side of a
  grading are apart: the child holds nothing of the instructor's side, the
  grader's side starts the child and never imports its code;
* ``benchmarks`` is a package: no script edits ``sys.path``.

Imports are read from the source (every ``import``, at the top of a module
or inside a function), so that a hidden import cannot hide a layer pointing up.
"""

from __future__ import annotations

import ast
import re
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


ENGINE = "kernels.runtime"


def in_engine(module: str) -> bool:
    return module == ENGINE or module.startswith(ENGINE + ".")


@pytest.mark.parametrize("path", python_files("kernels/runtime"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_nothing_above_it(path):
    above = {m for m in imports(path) if not in_engine(m)}
    assert not above, f"{module_name(path)} imports {sorted(above)}"


def engine_layer_list() -> list[tuple[str, int]]:
    """(module, layer) from the numbered list of the docstring of ``kernels/runtime/__init__.py``: in
    ``3. ``backend``: the seam...`` the names before the colon; a package (``emulator``) stands for its modules."""
    doc = ast.get_docstring(ast.parse((ROOT / "kernels/runtime/__init__.py").read_text()))
    return [(name, int(m.group(1))) for m in re.finditer(r"^(\d+)\. (.+?):", doc, re.M)
            for name in re.findall(r"``(\w+)``", m.group(2))]


def engine_layers() -> dict[str, int]:
    return dict(engine_layer_list())


def engine_part(module: str) -> str:
    """``kernels.runtime.emulator.build`` -> ``emulator``; the package itself -> ``""``."""
    return module.removeprefix(ENGINE).lstrip(".").partition(".")[0]


@pytest.mark.parametrize("path", python_files("kernels/runtime"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_engine_imports_only_from_its_own_layer_and_below(path):
    part = engine_part(module_name(path))
    if not part:
        return  # the package's face hands on names from every layer
    layers = engine_layers()
    assert part in layers, (f"{module_name(path)} is in no layer of the docstring of kernels/runtime/__init__.py: "
                            f"add it to the layer it belongs to")
    files = {module_name(p) for p in python_files("kernels/runtime")}
    up = sorted(m for m in imports(path) if m in files and engine_part(m)
                and layers.get(engine_part(m), 0) > layers[part])
    assert not up, f"{module_name(path)} (layer {layers[part]}) imports {up} from a layer above it"


def test_the_engine_layers_name_each_module_once_and_only_modules_that_exist():
    named = [name for name, _ in engine_layer_list()]
    parts = {engine_part(module_name(p)) for p in python_files("kernels/runtime")}
    assert named, "the docstring of kernels/runtime/__init__.py lists no layers"
    gone = sorted(set(named) - parts)
    assert not gone, f"the layers of kernels/runtime/__init__.py name {gone}, which do not exist"
    assert len(named) == len(set(named)), f"a module stands in two layers: {sorted(n for n in named if named.count(n) > 1)}"


@pytest.mark.parametrize("path", python_files("kernels") + python_files("autograder"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_and_grader_do_not_import_the_book_or_the_benchmarks(path):
    up = {m for m in imports(path) if m.split(".")[0] in ("book", "benchmarks")}
    assert not up, f"{module_name(path)} imports {sorted(up)}"


def import_circle(graph: dict[str, set[str]]) -> list[str]:
    """The first circle of ``graph`` (module -> the modules it imports), as ``[a, b, ..., a]``; ``[]`` if none."""
    state: dict[str, int] = {}  # 1: on the path being followed, 2: done

    def visit(name, trail):
        if state.get(name) == 1:
            return trail[trail.index(name):] + [name]
        if state.get(name) == 2:
            return []
        state[name] = 1
        for dep in sorted(graph[name]):
            circle = visit(dep, trail + [name])
            if circle:
                return circle
        state[name] = 2
        return []

    for name in sorted(graph):
        circle = visit(name, [])
        if circle:
            return circle
    return []


def module_graph(folder: str) -> dict[str, set[str]]:
    """``{module: the modules of the same folder it imports}`` for the modules under ``folder``."""
    files = {module_name(p): p for p in python_files(folder)}
    # an import of a package's attribute ("autograder.exercises.get_exercise") names no module: left out
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


@pytest.mark.parametrize("folder", ["autograder", "kernels", "benchmarks", "book"])
def test_no_import_circle(folder):
    circle = import_circle(module_graph(folder))
    assert not circle, "import circle: " + " -> ".join(circle)


def test_a_circle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    package = tmp_path / "kernels" / "runtime"
    package.mkdir(parents=True)
    (package / "backend.py").write_text("def measurement():\n    from .measurement import measurement\n")
    (package / "measurement.py").write_text("from . import selection\n")
    (package / "selection.py").write_text("from .backend import Backend\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert import_circle(module_graph("kernels/runtime")) == [
        "kernels.runtime.backend", "kernels.runtime.measurement", "kernels.runtime.selection", "kernels.runtime.backend"]
    (package / "backend.py").write_text("def measurement():\n    pass\n")
    assert import_circle(module_graph("kernels/runtime")) == []


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
