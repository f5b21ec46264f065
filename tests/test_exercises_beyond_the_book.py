"""Every graded exercise asks for something the book does not print, and stays so.

(a) The part of each solution a student writes shares no run of more than
    :data:`~exercise_distance.MAX_SHARED_RUN` tokens (comments and whitespace dropped) with any CUDA
    source students are given (``kernels/**/*.cu``, ``*.cuh``, and any under ``autograder/``).
(b) Each kernel the exercise's chapter prints (the records of its topics; for the chapter on index
    notation, which has no ``.cu`` file, every kernel the generator writes for the comprehensions it
    prints, and mv under the split reduction it shows), pasted into the exercise's cell with the
    exercise's parameter list and launch, fails a hidden case: the smallest hidden shape (by output
    size) on which it is wrong is found by running them from the smallest up.  A printed kernel is
    pasted as a student would paste it: its whole source (helpers and all) with a copy of the kernel
    under the exercise's parameter list, which works when each of its parameters is an argument of the
    exercise of the same name (an exercise's extra arguments, a padding, a stride, go unused).  One
    module is compiled per source for all the chapter's exercises, and the cases run on the current
    backend (the CPU emulator under ``make test``).  A chapter whose pages print no kernel (the warm-up
    puzzles, ``Chapter.prints_kernels``) has none to paste: that its pages show no source of ``kernels/`` is
    checked instead.  An index-notation exercise's cell holds a
    comprehension: every comprehension the chapter prints (``kernels/index_notation/examples.py`` and
    ``generated.py``), pasted as it is and with its statements under the exercise's first line, is
    rejected (as the grader rejects it: invalid, or not the exercise's inputs and outputs) or fails a
    hidden case.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest

from autograder.comparison import compare
from autograder.exercises import get_exercise
from autograder.tc_grading import _interface_problem
from book.chapters import CHAPTERS, ROOT
from book.run_chapter import code_cells
from exercise_distance import MAX_SHARED_RUN, longest_shared_run, solution_body
from kernels.index_notation import NAIVE, TcError, TcShapeError, compile_tc, examples, generated
from kernels.runtime import errors as E, selection
from kernels.runtime.module import compile_source
from kernels.runtime.sources import KERNEL_DIR, source_path, topic_module
from planted_corpus import solution_kernel

CUDA_EXERCISES = [(chapter, name) for chapter in CHAPTERS for name in chapter.exercises()
                  if get_exercise(name).language == "cuda"]

#: Exercises that still ask for a kernel the book prints (or close to it): their turn has not come yet.
#: Not run (each would compile its chapter's kernels on the emulator for nothing); remove a name when its
#: exercise asks for more than the book.
STILL_THE_BOOKS: set[str] = set()


def _marked(name):
    marks = [pytest.mark.xfail(run=False, reason="the exercise still asks for the book's kernel")] \
        if name in STILL_THE_BOOKS else []
    return pytest.param(name, id=name, marks=marks)


# ------------------------------------------------------------------ (a) no long run of shipped tokens


@pytest.mark.parametrize("name", [_marked(name) for _, name in CUDA_EXERCISES])
def test_the_solution_shares_no_long_run_with_a_shipped_kernel(name):
    length, path, run = longest_shared_run(solution_body(name))
    assert length <= MAX_SHARED_RUN, f"{name}: {length} tokens in a row are in {path}: {run}"


def test_a_pasted_kernel_is_found():
    """The measure finds a kernel of the book in a cell (and a short common idiom is not a run)."""
    text = source_path("saxpy").read_text()
    assert longest_shared_run(text)[0] > MAX_SHARED_RUN
    assert longest_shared_run("int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i];")[0] == 0


# ------------------------------------------------------------------ (b) the printed kernels fail


def _definition(source: str, kernel: str) -> tuple[int, int, int, int]:
    """(start of ``__global__``, start of the parameter list, end of it, end of the body) of ``kernel``."""
    match = re.search(r"__global__\s+(?:[\w()\s,*#]*?\s)?" + re.escape(kernel) + r"\s*\(", source)
    assert match, kernel
    depth, i = 1, match.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    params_end = i - 1
    body = source.index("{", i)
    depth, j = 1, body + 1
    while depth:
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        j += 1
    return match.start(), match.end(), params_end, j


@dataclass(frozen=True)
class Printed:
    """A kernel the chapter prints: the file (or generated source) it is in, that text, its name and the
    compile-time definitions it is built with."""

    where: str
    text: str
    kernel: str
    defines: tuple = ()


def _pastable(printed: Printed, exercise) -> bool:
    """Whether every parameter of the printed kernel is an argument of the exercise of the same name."""
    names = {arg.name for arg in exercise.args}
    return all(p.name in names for p in _printed_params(printed))


@lru_cache(maxsize=None)
def _signatures(where: str, text: str, defines: tuple):
    from kernels.runtime.signature import parse_kernels

    return parse_kernels(text, where, dict(defines))


def _printed_params(printed: Printed):
    return _signatures(printed.where, printed.text, printed.defines)[printed.kernel].params


def _pasted_name(exercise: str, kernel: str, where: str = "") -> str:
    """The name of ``kernel`` pasted into ``exercise``'s cell; ``where`` tells apart the generated sources, whose
    kernels are named after their comprehension (mv, naive and split)."""
    generated_from = "" if not where or where.endswith(".cu") else "__" + re.sub(r"\W+", "_", where).strip("_")
    return f"pasted__{exercise}__{kernel}{generated_from}"


def _printed_comprehensions() -> dict[str, str]:
    """Every comprehension chapter 7 prints, by name: its examples and the layers of ``generated.py``."""
    return {**{f"examples.{name}": example.text for name, example in examples.EXAMPLES.items()},
            **{f"generated.{name}": text for name, text in generated.COMPREHENSIONS.items()}}


def _printed_kernels(chapter):
    """The CUDA kernels the chapter prints: its topics' records, or for chapter 7 (no topics) every kernel the
    generator writes for the comprehensions it prints, naive, and mv under the split reduction it shows; none for a
    chapter that prints no kernel."""
    import importlib

    if not chapter.prints_kernels:
        return
    for topic in chapter.topics:
        text = source_path(topic).read_text()
        for record in importlib.import_module(topic_module(topic)).KERNELS.values():
            if "DLK_ARCH_SPECIFIC" in record.defines:
                continue  # inline PTX for one GPU: the emulator runs none of it (see the module's report)
            yield Printed(f"{topic}.cu", text, record.kernel, tuple(sorted(record.defines.items())))
    if chapter.topics:
        return
    sources = {f"{name} (naive)": compile_tc(text, NAIVE).source for name, text in _printed_comprehensions().items()}
    sources["generated.mv (split)"] = compile_tc(generated.MV, generated.MV_SPLIT).source
    seen = set()
    for where, text in sources.items():
        if text not in seen:  # examples.py and generated.py print mv alike
            seen.add(text)
            yield from (Printed(where, text, kernel) for kernel in _signatures(where, text, ()))


def _groups(printed):
    """The printed kernels of one text in groups whose compile-time definitions agree (one module each)."""
    groups: list[tuple[dict, list]] = []
    for kernel in printed:
        for defines, members in groups:
            if all(defines.get(k, v) == v for k, v in kernel.defines):
                defines.update(kernel.defines)
                members.append(kernel)
                break
        else:
            groups.append((dict(kernel.defines), [kernel]))
    return groups


@lru_cache(maxsize=None)
def _chapter_modules(chapter_name: str):
    """(pasted kernel name -> (module, printed kernel)) for every printed kernel of the chapter that fits an
    exercise's parameter list, compiled one module per source text (and set of definitions)."""
    chapter = next(c for c in CHAPTERS if c.name == chapter_name)
    exercises = [get_exercise(name) for name in chapter.exercises() if get_exercise(name).language == "cuda"]
    pasted = {}
    by_text: dict[tuple[str, str], list] = {}
    for printed in _printed_kernels(chapter):
        by_text.setdefault((printed.where, printed.text), []).append(printed)
    for (where, original), kernels in by_text.items():
        for defines, members in _groups(kernels):
            copies = []
            for printed in members:
                start, params_start, params_end, end = _definition(original, printed.kernel)
                for exercise in exercises:
                    if not _pastable(printed, exercise):
                        continue
                    head = original[start:params_start - 1].rsplit(printed.kernel, 1)[0]
                    params = exercise.signature[exercise.signature.index("(") + 1:exercise.signature.rindex(")")]
                    name = _pasted_name(exercise.name, printed.kernel, printed.where)
                    copies.append((name, printed, f"{head}{name}({params}){original[params_end + 1:end]}\n"))
            if not copies:
                continue
            for module, kept in _compiled(where, original, copies, defines):
                pasted.update({name: (module, printed) for name, printed in kept})
    return pasted


def _compiled(where, original, copies, defines):
    """[(module, [(pasted name, printed kernel)])]: the copies compiled with the text they come from.  A copy that
    does not compile (the kernel declares a name the exercise's parameter list has: a student gets a compile
    error) is left out, and the rest compiled again."""
    stem = re.sub(r"\W+", "_", where.removesuffix(".cu"))
    include_dirs = (str(source_path(where.removesuffix(".cu")).parent), str(KERNEL_DIR)) if where.endswith(".cu") else ()
    while copies:
        text = original + "\n// pasted into the exercises' cells\n"
        lines = []
        for name, printed, copy in copies:
            lines.append((text.count("\n") + 1, text.count("\n") + copy.count("\n") + 1, name))
            text += copy
        try:
            module = compile_source(text, name=f"{stem}_pasted.cu", defines=defines, include_dirs=include_dirs)
        except E.KernelCompileError as exc:
            bad = {name for line in map(int, re.findall(r"_pasted\.cu:(\d+):\d*:? ?error", str(exc)))
                   for first, last, name in lines if first <= line <= last}
            bad |= {name for line in map(int, re.findall(r"_pasted\.cu:(\d+): error", str(exc)))
                    for first, last, name in lines if first <= line <= last}
            assert bad, f"{where}: the pasted kernels do not compile for a reason of the text's own: {exc}"
            REFUSED.update(bad)
            copies = [c for c in copies if c[0] not in bad]
            continue
        return [(module, [(name, printed) for name, printed, _ in copies])]
    return []


#: Pasted kernels that do not compile with the exercise's parameter list (rejected as a compile error).
REFUSED: set[str] = set()


def _output_size(exercise, shape) -> int:
    inputs = exercise.make_inputs(shape, np.random.default_rng(0))
    return sum(int(np.size(v)) for v in exercise.reference(inputs).values())


def _fails(exercise, kernel, shape, launch) -> str:
    """Why the pasted kernel is rejected on ``shape`` ('' if it passes)."""
    inputs = exercise.make_inputs(shape, np.random.default_rng(7))
    expected, scales = exercise.reference(inputs), exercise.error_scale(inputs)
    params = exercise.declared_params
    args, outputs = [], {}
    for arg, param in zip(exercise.args, params):
        if arg.role == "scalar":
            args.append(param.dtype.type(inputs[arg.name]))
            continue
        if arg.role == "out":
            unset = np.nan if param.dtype.kind == "f" else np.iinfo(param.dtype).min  # what no kernel writes
            value = np.full(np.shape(expected[arg.name]), 0 if arg.init == "zeros" else unset, param.dtype)
        else:
            value = np.array(inputs[arg.name], dtype=param.dtype)
        if arg.role != "in":
            outputs[arg.name] = value
        args.append(value)
    try:
        _, config = exercise.resolve_launch(shape, exercise.validate_launch(launch))
        kernel(*args, grid=config.grid, block=config.block, shared=config.shared)
    except (E.KernelError, ValueError) as exc:
        return f"rejected: {str(exc).splitlines()[0]}"
    for name, got in outputs.items():
        verdict = compare(got, expected[name], scales[name], exercise.rtol, exercise.atol)
        if verdict["n_bad"]:
            return f"{verdict['n_bad']} wrong elements of {name}"
    return ""


@pytest.fixture(scope="module")
def emulator():
    """The pasted kernels run on the CPU emulator, whatever backend the session has: a printed kernel pasted into an
    exercise reads and writes past its arrays on the hidden shapes by design, which the emulator reports and a GPU
    would turn into an illegal address that ends every later test of its process."""
    previous = selection._current  # the session's backend object, put back as it was
    yield selection.use_backend("cpu")
    selection._current = previous


PRINTED = [pytest.param(chapter.name, *_marked(name).values, id=name, marks=_marked(name).marks)
           for chapter, name in CUDA_EXERCISES if chapter.prints_kernels]


@pytest.mark.parametrize("chapter, name", PRINTED)
def test_each_printed_kernel_of_the_chapter_fails_the_hidden_cases(emulator, chapter, name):
    exercise = get_exercise(name)
    pasted = {key: value for key, value in _chapter_modules(chapter).items() if key.startswith(f"pasted__{name}__")}
    assert pasted or name in {n.split("__")[1] for n in REFUSED}, f"no kernel the chapter prints fits {name}"
    reference = exercise.reference_kernel
    if reference is not None and reference.source is None and reference.topic in next(
            c for c in CHAPTERS if c.name == chapter).topics:
        assert _pasted_name(name, reference.kernel) in pasted or _pasted_name(name, reference.kernel) in REFUSED, (
            f"the chapter's {reference.kernel}, the exercise's speed reference, does not fit its parameter list")
    launch = solution_kernel(name).launch
    shapes = sorted(exercise.hidden_shapes, key=lambda shape: _output_size(exercise, shape))
    passed = []
    for key, (module, printed) in sorted(pasted.items()):
        kernel = module.function(key)
        if not any(_fails(exercise, kernel, shape, launch) for shape in shapes):
            passed.append(f"{printed.kernel} ({printed.where})")
    assert not passed, f"{name}: the chapter's {', '.join(passed)}, pasted, pass every hidden case"


# ------------------------------------------------------------------ (b) for index notation: the printed comprehensions


def _comprehension_fails(exercise, text: str, shapes) -> str:
    """Why the comprehension ``text`` in the exercise's cell is rejected on one of ``shapes`` ('' if it passes all)."""
    try:
        tc = compile_tc(text, NAIVE)
    except TcError as exc:
        return f"rejected: {str(exc).splitlines()[0]}"
    problem = _interface_problem(exercise, tc.checked)
    if problem:
        return f"rejected: {problem}"
    (output,) = (arg.name for arg in exercise.outputs)
    for shape in shapes:
        inputs = exercise.make_inputs(shape, np.random.default_rng(7))
        try:
            got = np.asarray(tc(**{arg.name: inputs[arg.name] for arg in exercise.args if arg.role == "in"}))
        except TcShapeError as exc:
            return f"{exercise.shape_label(shape)}: {exc}"
        expected = exercise.reference(inputs)[output]
        if got.shape != expected.shape:
            return f"{exercise.shape_label(shape)}: {output} has shape {got.shape}, not {expected.shape}"
        verdict = compare(got, expected, exercise.error_scale(inputs)[output], exercise.rtol, exercise.atol)
        if verdict["n_bad"]:
            return f"{exercise.shape_label(shape)}: {verdict['n_bad']} wrong elements of {output}"
    return ""


def _body(text: str) -> str:
    return text[text.index("{") + 1:text.rindex("}")]


TC_EXERCISES = [name for chapter in CHAPTERS for name in chapter.exercises() if get_exercise(name).language == "tc"]


@pytest.mark.parametrize("name", TC_EXERCISES)
def test_each_printed_comprehension_fails_the_hidden_cases(name):
    """Every comprehension chapter 7 prints, pasted into the exercise's cell as it is and with its statements under
    the exercise's first line, is rejected or fails a hidden case."""
    exercise = get_exercise(name)
    shapes = sorted(exercise.hidden_shapes, key=lambda shape: _output_size(exercise, shape))
    passed = []
    for where, text in _printed_comprehensions().items():
        for how, pasted in (("as printed", text), ("under the exercise's signature",
                                                   f"{exercise.signature} {{{_body(text)}}}")):
            if not _comprehension_fails(exercise, pasted, shapes):
                passed.append(f"{where} {how}")
    assert not passed, f"{name}: {', '.join(passed)} pass every hidden case"


# ------------------------------------------------------------------ (b) for a chapter that prints no kernel

#: What shows the source of a kernel of kernels/ on a page: the listing helpers, or a topic's module imported to be
#: run and printed (kernels.runtime and kernels.tools are the engine and its tools, no kernels of the book).
SHOWS_A_KERNEL = re.compile(r"\b(read_source|show_kernel|kernel_listing|function_source|source_excerpt|"
                            r"generated_listing|source_path)\b|\bfrom kernels\.(?!runtime\b|tools\b)\w+|"
                            r"\bimport kernels\.(?!runtime\b|tools\b)|\bfrom kernels import (?!runtime\b|tools\b)")


def _page_code(page: str) -> str:
    """The code cells of ``book/<page>.md`` and the modules of the book package they import."""
    code = "\n".join(code_cells((ROOT / "book" / f"{page}.md").read_text()))
    modules = set(re.findall(r"\bfrom book\.(\w+) import", code)) | {
        name.strip() for names in re.findall(r"\bfrom book import ([\w, ]+)", code) for name in names.split(",")}
    return "\n".join([code] + [(ROOT / "book" / f"{m}.py").read_text() for m in sorted(modules)])


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if not c.prints_kernels], ids=lambda c: c.name)
def test_a_chapter_that_prints_no_kernel_shows_no_source_of_kernels(chapter):
    assert not chapter.topics, f"{chapter.name} prints no kernel, yet teaches topics"
    for page in chapter.pages:
        found = SHOWS_A_KERNEL.search(_page_code(page))
        assert not found, f"book/{page}.md shows a kernel of kernels/ ({found.group(0)}): its chapter prints_kernels"
    # and the check sees a page that does print kernels
    assert SHOWS_A_KERNEL.search(_page_code("cuda_from_python"))
