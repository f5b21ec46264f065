"""The warm-up puzzles (chapter 0): graded through the grader, and what their page, notebook and cases promise.

Each solution gets every correctness point and each planted bug of ``tests/planted_bugs/<puzzle>/`` is rejected for
its reason, with the words its feedback must have (here rather than in tests/test_exercises.py, which checks the
rest of their corpus: a file of its own runs beside that one); their thread maps are in tests/test_thread_maps.py.
"""

from __future__ import annotations

import math

import pytest

from autograder.checker import kernel_is_empty
from autograder.exercises import get_exercise
from autograder.submission import submissions_from_notebook
from book.chapters import ROOT, chapter
from planted_corpus import check_corpus_file, check_solution_kernel, corpus

PUZZLES = chapter("puzzles").exercises()
(ASSIGNMENT,) = chapter("puzzles").assignments
RELEASED = ROOT / "exercises" / ASSIGNMENT.assignment / f"{ASSIGNMENT.notebook}.ipynb"


@pytest.mark.parametrize("name", PUZZLES)
def test_the_solution_gets_every_correctness_point(backend, name):
    check_solution_kernel(name)


@pytest.mark.parametrize("path", corpus(PUZZLES))
def test_planted_bugs_are_rejected_for_their_reason(backend, path):
    check_corpus_file(path)


def test_the_page_states_and_draws_every_puzzle_in_the_notebook_s_order():
    page = (ROOT / "book" / "puzzles.md").read_text()
    drawn = [name for name in PUZZLES if f'show_puzzle("{name}")' in page]
    assert drawn == PUZZLES
    assert sorted(drawn, key=lambda name: page.index(f'show_puzzle("{name}")')) == PUZZLES


def test_a_released_stub_counts_as_no_code_even_with_the_shared_array_it_declares():
    stubs = {sub.exercise: sub.source for sub in submissions_from_notebook(RELEASED)}
    assert list(stubs) == PUZZLES
    assert any("__shared__" in source for source in stubs.values())
    for name, source in stubs.items():
        assert kernel_is_empty(source, name), name
        assert "YOUR CODE HERE" in source and "about" in source.lower(), f"{name}: the stub says how much to write"
    assert not kernel_is_empty(stubs["dot"].replace("// YOUR CODE HERE", "out[0] = 1.0f;"), "dot")


def test_puzzles_score_correctness_only_and_fix_their_launch():
    for name in PUZZLES:
        ex = get_exercise(name)
        assert ex.speed_points == 0 and ex.correctness_points > 0 and ex.reference_kernel is None, name
        assert ex.launch_keys == () and ex.thread_map is not None, name


def test_hidden_sizes_cover_one_element_a_ragged_last_block_and_more_data_than_threads():
    for name in PUZZLES:
        ex = get_exercise(name)
        launches = [(shape, ex.resolve_launch(shape, {})[1]) for shape in ex.hidden_shapes]
        threads = [(shape, math.prod(c.grid) * math.prod(c.block)) for shape, c in launches]
        sizes = [math.prod(v for k, v in shape.items() if k in ("n", "rows", "cols")) for shape in ex.hidden_shapes]
        assert min(sizes) == 1, name
        ragged = [size % math.prod(c.block) for size, (_, c) in zip(sizes, launches)]
        if any(t > size for size, (_, t) in zip(sizes, threads)):  # threads without an element: a guard is needed
            assert any(ragged), name
    blocks = get_exercise("blocks")
    assert any(blocks.resolve_launch(s, {})[1].grid[0] * 8 < s["n"] for s in blocks.hidden_shapes)
