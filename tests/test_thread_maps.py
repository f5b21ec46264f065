"""Thread maps: which thread read and wrote which element, as check() and the puzzles' page draw them.

The expected maps shipped with the exercises are the solutions' maps as the solutions are now; a map from the
grading child is kept only if it reads back as one; two maps side by side mark where they differ, the elements
outside an array, and the elements two threads touch with nothing ordering them.
"""

from __future__ import annotations

import json

import pytest

from autograder.thread_map_recording import expected_file_text, record_expected
from autograder.thread_maps import EXPECTED, checked_thread_map, expected_map
from book.chapters import chapter
from kernels.tools.thread_maps import AccessMap, Array, ThreadMap, draw_side_by_side, side_by_side

PUZZLES = chapter("puzzles").exercises()


def test_the_expected_maps_are_the_solutions_maps_as_they_are_now():
    recorded = record_expected([assignment.solution for assignment in chapter("puzzles").assignments])
    assert set(recorded) == set(PUZZLES)
    assert EXPECTED.read_text() == expected_file_text(recorded), (
        "autograder/exercises/thread_maps.json is not the solutions' maps: run python -m autograder.thread_map_recording")


def test_every_puzzle_has_a_map_of_its_reads_and_writes():
    for name in PUZZLES:
        tmap = expected_map(name)
        assert tmap is not None and tmap.kernel == name, name
        assert tmap.find("out", "written") is not None, name
        sizes = {array.name: array.size for array in tmap.arrays}
        assert all(0 <= e < sizes[m.argument] for m in tmap.maps for e in m.threads), f"{name}: outside an array"
        assert not tmap.unordered, f"{name}: the solution's map has a race"


def one_dimensional(writes: dict, reads: dict | None = None, grid=(2, 1, 1), unordered=None) -> ThreadMap:
    reads = reads if reads is not None else {e: (e,) for e in range(10)}
    return ThreadMap("copy", grid, (8, 1, 1), [Array("a", (10,)), Array("out", (10,))],
                     [AccessMap("a", "read", reads), AccessMap("out", "written", writes)], "", unordered or {})


def test_a_map_reads_back_from_its_plain_data():
    tmap = one_dimensional({e: (e,) for e in range(10)}, unordered={"out": {3: (3, 11)}})
    assert ThreadMap.from_dict(json.loads(json.dumps(tmap.as_dict()))) == tmap
    assert checked_thread_map(tmap.as_dict()) == tmap.as_dict()


@pytest.mark.parametrize("forge", [
    lambda d: d.update(maps=[{"argument": "<script>", "access": "read", "threads": []}]),
    lambda d: d["maps"][0].update(threads=[[0, [10 ** 9]]]),  # a thread the launch does not have
    lambda d: d["maps"][0].update(threads=[[e, [0]] for e in range(100_000)]),  # a flood
    lambda d: d.update(grid=[2, 1]),
    lambda d: d.update(unordered={"out": [[0, [1]]]}),
    lambda d: d.update(arrays="a"),
])
def test_a_forged_map_is_dropped(forge):
    forged = one_dimensional({e: (e,) for e in range(10)}).as_dict()
    forge(forged)
    assert checked_thread_map(forged) is None
    assert checked_thread_map("the map is perfect") is None


def test_side_by_side_marks_differences_elements_outside_and_races():
    expected = one_dimensional({e: (e,) for e in range(10)})
    shifted = one_dimensional({e + 1: (e,) for e in range(10)} | {3: (2, 11)}, unordered={"out": {3: (2, 11)}})
    text = side_by_side(expected, shifted)
    lines = text.splitlines()
    assert "a (10 elements), read by: the same as expected" in text
    assert "out (10 elements), written by: 10 of 10 elements differ from the expected map; yours writes 1 past its end" in text
    assert "10!" in text and "outside the array" in text
    assert "yours: 1 element touched by two threads with nothing ordering them, a race (~), e.g. element 3: written " \
           "by thread 2, touched by thread 11 in another block" in text
    yours = next(line for line in lines if line.startswith("  yours") and "2,11~" in line)
    assert yours.split()[1:4] == [".", "0", "1"]  # element 0 unwritten, element 1 by thread 0, ...
    # a map alone (the page's expected picture, or a kernel with no recorded map) has no differences to mark
    alone = side_by_side(expected, None)
    assert "differ" not in alone and "  expected" in alone and "yours" not in alone


def test_a_matrix_is_drawn_as_a_grid_and_threads_named_by_their_place_in_the_block():
    cells = {r * 3 + c: (r * 8 + c,) for r in range(2) for c in range(3)}
    expected = ThreadMap("m", (1, 1, 1), (8, 8, 1), [Array("out", (2, 3))], [AccessMap("out", "written", cells)])
    wrong = ThreadMap("m", (1, 1, 1), (8, 8, 1), [Array("out", (2, 3))],
                      [AccessMap("out", "written", {**cells, 4: (9, 10)})])
    text = side_by_side(expected, wrong)
    assert "threadIdx.x,threadIdx.y" in text and "1,1+1*" in text and "0,1 " in text


def test_the_picture_has_a_panel_per_map_and_array():
    import matplotlib.pyplot as plt

    expected = one_dimensional({e: (e,) for e in range(10)})
    fig = draw_side_by_side(expected, one_dimensional({e: (0,) for e in range(10)}, unordered={"out": {1: (0, 0)}}))
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == ["expected: a (10 elements), read by", "yours: a (10 elements), read by",
                      "expected: out (10 elements), written by", "yours: out (10 elements), written by"]
    assert "orange dashes" in fig._suptitle.get_text()
    plt.close(fig)
    assert draw_side_by_side(None, None) is None
