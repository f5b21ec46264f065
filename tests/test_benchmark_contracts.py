"""The book finds rows in the results files only through the benchmarks' contracts, and every contract holds.

A benchmark declares what the book reads in its results file as a :class:`~benchmarks.common.Contract` made of
the constants it writes its rows with; the book (its modules and its pages' code cells) names groups, rows,
layers and sections through the same constants.  So:

* every contract holds in every recorded file of its benchmark, tagged ones (other GPUs) included;
* every constant of a benchmark that the book uses, where it names something in a file, is in a contract;
* the book spells no group, row, layer or section out as a string where it looks one up (a renamed row would
  then quietly find nothing, and a page show "not measured" or a shorter table);
* the book imports the benchmark it measures with by module, never by a name built from a string.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import types
from pathlib import Path

import pytest

import benchmarks
from benchmarks.common import Contract, recorded_runs
from book.run_chapter import code_cells

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _benchmark_modules() -> dict[str, types.ModuleType]:
    return {info.name: importlib.import_module(f"benchmarks.{info.name}")
            for info in pkgutil.iter_modules(benchmarks.__path__)}


MODULES = _benchmark_modules()
#: Every contract a benchmark declares, by "<module>.<constant>".
CONTRACTS = {f"{name}.{attr}": value for name, module in MODULES.items() for attr, value in vars(module).items()
             if isinstance(value, Contract)}


def _cases():
    for label, contract in CONTRACTS.items():
        paths = recorded_runs(contract.results)
        if not paths:
            yield pytest.param(contract, None, id=f"{label}-not-recorded")
        for path in paths:
            yield pytest.param(contract, path, id=f"{label}-{path.stem}")


@pytest.mark.parametrize("contract, path", list(_cases()))
def test_every_contract_holds_in_every_recorded_file_of_its_benchmark(contract: Contract, path: Path | None):
    if path is None:
        pytest.skip(f"{contract.results}.json has not been recorded yet (make bench on a GPU machine)")
    broken = contract.broken_by(json.loads(path.read_text()))
    assert not broken, f"{path.name} breaks the contract the book reads it by:\n  " + "\n  ".join(broken)


def test_the_chapters_benchmarks_and_the_profiler_declare_their_contracts():
    from book.chapters import CHAPTERS

    declared = {contract.results for contract in CONTRACTS.values()}
    read = {c.name for c in CHAPTERS if c.has_benchmark} | {b for c in CHAPTERS for b in c.more_benchmarks} | {"profiles"}
    assert read <= declared, f"benchmarks the book reads without a contract: {sorted(read - declared)}"


def test_a_contract_names_what_a_file_lacks_and_refuses_a_bare_string():
    contract = Contract("demo", groups=("g", "h"), rows={"g": ("a", "b")}, prefixes={"g": ("imp",)},
                        values={"layer": ("L1",)}, sections=("sweep", "shapes_part"),
                        entries={"shapes_part": ("s1",), "sweep": ("k",)})
    data = {"results": [{"name": "a", "group": "g", "layer": "L1"}, {"name": "implicit 1", "group": "g"}],
            "sweep": [{"name": "k"}], "shapes_part": {"size": 3, "shapes": [{"label": "s1"}]}}
    assert contract.broken_by(data) == ["no group 'h'", "no row 'b' in group 'g'"]
    data["results"] += [{"name": "b", "group": "g"}, {"name": "x", "group": "h"}]
    assert contract.broken_by(data) == []
    assert contract.broken_by({"results": []}) == [
        "no group 'g'", "no group 'h'", "no row 'a' in group 'g'", "no row 'b' in group 'g'",
        "no row starting 'imp' in group 'g'", "no row whose layer is 'L1'", "no section 'sweep'",
        "no section 'shapes_part'", "no entry 's1' in section 'shapes_part'", "no entry 'k' in section 'sweep'"]
    profiled = Contract("demo", groups=("g",), rows={"g": ("naive",)}, row_field="step")
    assert profiled.broken_by({"results": [{"name": "kernel_naive", "step": "naive", "group": "g"}]}) == []
    with pytest.raises(TypeError, match="groups must be a tuple of strings"):
        Contract("demo", groups="forward")
    with pytest.raises(ValueError, match="rows of groups it does not list"):
        Contract("demo", groups=("g",), rows={"other": ("a",)})


# --- what the book uses of a benchmark ---------------------------------------------------------

def _sources() -> list[tuple[str, str]]:
    """(where, code) for every module of the book and every code cell of its pages."""
    found = [(path.name, path.read_text()) for path in sorted(BOOK.glob("*.py"))]
    for page in sorted(BOOK.glob("*.md")):
        for k, cell in enumerate(code_cells(page.read_text()), 1):
            code = "\n".join(line for line in cell.splitlines() if not line.startswith(("%", "!")))
            found.append((f"{page.name}, cell {k}", code))
    return found


SOURCES = _sources()


def _benchmark_names(tree: ast.AST) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """The names a source binds to benchmark modules (``{alias: module}``) and to their constants
    (``{name: (module, constant)}``)."""
    modules, constants = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "benchmarks":
            modules.update({alias.asname or alias.name: alias.name for alias in node.names})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
            module = node.module.split(".", 1)[1]
            constants.update({alias.asname or alias.name: (module, alias.name) for alias in node.names})
    return modules, constants


def _strings(value) -> list[str] | None:
    """The strings a constant is made of (a dict: its values), or None when it names nothing (a number, a function)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)) and value:
        parts = [_strings(v) for v in value]
        return None if any(p is None for p in parts) else [s for p in parts for s in p]
    return None


def test_what_the_book_takes_from_a_benchmark_is_in_its_contract():
    promised = {name: set().union(*(c.strings() for c in vars(module).values() if isinstance(c, Contract)))
                for name, module in MODULES.items()}
    outside = []
    for file in sorted({where.split(",")[0] for where, _ in SOURCES}):
        # A page imports in its first cell what its other cells use: its cells share the names.
        trees = [ast.parse(code) for where, code in SOURCES if where.split(",")[0] == file]
        modules, constants = {}, {}
        for tree in trees:
            found_modules, found_constants = _benchmark_names(tree)
            modules.update(found_modules)
            constants.update(found_constants)
        used = {(modules[n.value.id], n.attr) for tree in trees for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules}
        used |= set(constants.values())
        for module, attr in sorted(used):
            strings = _strings(getattr(MODULES[module], attr))
            missing = sorted(set(strings or ()) - promised[module])
            if missing:
                outside.append(f"{file}: benchmarks.{module}.{attr} ({', '.join(map(repr, missing))})")
    assert not outside, ("the book reads names no contract promises (add them to the benchmark's Contract):\n  "
                         + "\n  ".join(outside))


# --- no spelled-out lookups --------------------------------------------------------------------

#: Calls that look up rows, groups, layers, sections or files by the strings they are given: every argument...
LOOKUPS_ALL_ARGUMENTS = {"rows", "row", "timed", "layers", "section", "every_run", "recorded"}
#: ...or the first only (the others say what is shown, or how to measure).
LOOKUPS_FIRST_ARGUMENT = {"load", "show"}
#: A row's fields that name it, or that the book filters rows by.
ROW_FIELDS = {"name", "group", "layer", "step", "gradient", "source", "kernel"}
#: The common layout of every results file (benchmarks/common.py): a row's kind, and the parts every file has.
COMMON_LAYOUT = {"kernel", "peer", "peaks", "device", "summary", "results", "date", "benchmark", "software"}
#: The scoreboard's comparisons: which of their arguments name the file and its rows.
COMPARISON_ARGUMENTS = {"results", "groups", "layer", "kernels", "peers", "section"}


def _is_row_field(node: ast.AST) -> bool:
    """``r["name"]`` or ``r.get("group")``: a field of a row that names it or that rows are filtered by."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value in ROW_FIELDS
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in ROW_FIELDS)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    return [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]


def _looked_up(tree: ast.AST, helpers: dict[str, set[str]]) -> list[ast.AST]:
    """The expressions a source looks rows up by; ``helpers``: the source's own functions that pass some of their
    parameters (by name) on to a lookup."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            of_prose = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "prose"
            if name in LOOKUPS_ALL_ARGUMENTS or (of_prose and name != "glue_phrase"):
                found += [*node.args, *(k.value for k in node.keywords)]
            elif name in LOOKUPS_FIRST_ARGUMENT and node.args:
                found.append(node.args[0])
            elif name == "Comparison":
                found += [*node.args[2:], *(k.value for k in node.keywords if k.arg in COMPARISON_ARGUMENTS)]
            elif name == "startswith" and isinstance(func, ast.Attribute) and _is_row_field(func.value):
                found += node.args
            elif name in helpers:
                order = helpers[name]["order"]
                found += [a for a, p in zip(node.args, order) if p in helpers[name]["looked_up"]]
                found += [k.value for k in node.keywords if k.arg in helpers[name]["looked_up"]]
        elif isinstance(node, ast.Compare) and any(_is_row_field(n) for n in [node.left, *node.comparators]):
            found += [n for n in [node.left, *node.comparators] if not _is_row_field(n)]
    return found


def _names(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _literals(node: ast.AST) -> list[str]:
    """The string literals an expression is or holds (a tuple, list, set or dict of them, at any depth)."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) and node.value not in COMMON_LAYOUT else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _literals(e)]
    if isinstance(node, ast.Dict):
        return [s for v in node.values for s in _literals(v)]
    return []


def spelled_out_lookups(code: str) -> list[str]:
    """The string literals ``code`` looks rows up by: given to a lookup (or to a function of its own that passes
    it on to one), compared with a row's naming fields, or bound to a name that is (a loop over them, a default,
    an assignment in the same module or cell)."""
    tree = ast.parse(code)
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers: dict[str, dict] = {}
    while True:  # a function that passes a parameter to a lookup is a lookup; so is one that passes it to that one
        found = {f.name: {"order": [a.arg for a in _parameters(f) if a.arg != "self"],
                          "looked_up": {a.arg for a in _parameters(f)} & _names(_looked_up(f, helpers))}
                 for f in functions}
        found = {name: h for name, h in found.items() if h["looked_up"]}
        if found == helpers:
            break
        helpers = found
    looked_up = _looked_up(tree, helpers)
    spelled = [s for node in looked_up for s in _literals(node)]
    names = _names(looked_up)
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and names & _names([node.target]):
            spelled += _literals(node.iter)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            spelled += _literals(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.posonlyargs, *node.args.args]
            defaults = [*zip(arguments[len(arguments) - len(node.args.defaults):], node.args.defaults),
                        *zip(node.args.kwonlyargs, node.args.kw_defaults)]
            spelled += [s for argument, default in defaults if default is not None and argument.arg in names
                        for s in _literals(default)]
    return spelled


@pytest.mark.parametrize("file", sorted({where.split(",")[0] for where, _ in SOURCES}))
def test_the_book_spells_no_row_out_where_it_looks_one_up(file):
    spelled = [f"{where}: {spelled_out_lookups(code)}" for where, code in SOURCES
               if where.split(",")[0] == file and spelled_out_lookups(code)]
    assert not spelled, ("the book looks rows up by strings of its own; name them through the constants of the "
                         "benchmark that writes them (its Contract, benchmarks/<name>.py):\n  " + "\n  ".join(spelled))


def test_the_lookup_finder_finds_each_kind_of_spelled_out_lookup():
    code = '''
figures.rows("forward", "kernel", layer="LeNet C3")
figures.section("block_sweep"); figures.section("peaks")
SpeedFigures.load("cnn", bench.measure, epochs=0)
prose.capsule_step(data, "capsule_predict_naive", bench.VECTORIZED)
prose.glue_phrase("device", "words")
mine = [r for r in rows if r["name"] in ("a", "b") and r.get("gradient") == "weight" and r["kind"] == "peer"]
done = [r for r in rows if r["name"].startswith("implicit_gemm")]
for group in ("saxpy", "copy"):
    figures.rows(group)
for name in ("shown", "only"):
    show_kernel("conv2d", name)
chosen = "tiled"
t = figures.row(chosen)
Comparison("cnn", "conv forward", "cnn", ("forward",), layer="LeNet C1", kernels={"name": "naive"}, shape="N")
def f(data, kernel="gradient_sum_tree", label="the tree"):
    return [r for r in data if r["name"] == kernel], label
def _times(data, group):
    return {r["name"]: r["median_ms"] for r in data if r["group"] == group}
def g(data, group="fc_large"):
    return _times(data, group)
g(data, "conv")
'''
    assert sorted(spelled_out_lookups(code)) == sorted([
        "forward", "LeNet C3", "block_sweep", "cnn", "capsule_predict_naive", "a", "b", "weight", "implicit_gemm",
        "cnn", "forward", "LeNet C1", "naive", "saxpy", "copy", "tiled", "gradient_sum_tree", "fc_large", "conv"])
    assert spelled_out_lookups("figures.rows(bench.FORWARD, layer=bench.LENET_C3)\nr['name'] == bench.NAIVE") == []


def test_the_book_imports_the_benchmark_it_measures_with_by_module():
    """``SpeedFigures.load`` takes the benchmark's ``measure`` itself: no page or module of the book builds a
    module's name from a string to import it."""
    for where, code in SOURCES:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert name not in ("import_module", "__import__") or not any(
                    isinstance(a, ast.JoinedStr) or (isinstance(a, ast.Constant) and str(a.value).startswith("benchmarks"))
                    for a in node.args), f"{where} imports a benchmark by a name it builds: {ast.unparse(node)}"
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "load" and \
                    getattr(node.func.value, "id", "") == "SpeedFigures":
                assert len(node.args) >= 2, f"{where}: SpeedFigures.load without the benchmark's measure: " \
                                            f"{ast.unparse(node)}"
