"""Thread maps: which thread of a launch read and which wrote each element of its arrays, from the emulator.

The emulator's profiling build records every access of the sampled blocks' threads to the argument
buffers and shared arrays (:mod:`kernels.runtime.emulator.element_accesses`); a :class:`ThreadMap` is that
record as a picture's data: for each argument, per element, the threads that read it and those that
wrote it (an atomic update counts as a write), with the elements below 0 or past the last where a kernel
ran past its array; and for each shared array the same, a row per block (each block has its own).  It
also names the elements two threads touched with nothing ordering them, one of them writing plainly
(threads of different blocks, or of one block between the same two barriers): a race, which a missing
``__syncthreads()`` leaves although every thread touches the right elements.  A thread is numbered
across the grid, ``block * threads per block + thread``: for a one-dimensional launch,
``blockIdx.x * blockDim.x + threadIdx.x``.

:func:`record` runs any code that launches kernels with every block of every launch recorded (keep the
launches tiny: tens of elements); :func:`side_by_side` writes two maps of the same launch (the expected
one and a reader's) as text, a column per element, and :func:`draw_side_by_side` draws them::

    from kernels.tools.thread_maps import record, side_by_side
    (tmap,), error = record(kernel, a, out, np.int32(10), grid=(3, 1, 1), block=(4, 1, 1))
    print(side_by_side(None, tmap))
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

import numpy as np

from kernels.runtime.emulator.profiling import LOAD, STORE, LaunchProfile, collecting
from kernels.runtime.errors import KernelError
from kernels.tools.profiler import on_emulator

__all__ = ["AccessMap", "ThreadMap", "record", "side_by_side", "draw_side_by_side", "READ", "WRITTEN"]

READ, WRITTEN = "read", "written"
ACCESSES = (READ, WRITTEN)
GLOBAL, SHARED = "global", "shared"
#: Limits on what a map holds (a map comes back from a sandboxed child, and is drawn cell by cell).
MAX_ARGUMENTS = 16
MAX_ELEMENTS = 4096  # elements of one array a map holds
MAX_OUTSIDE = 256  # elements outside an argument's array a map keeps
MAX_THREADS_PER_ELEMENT = 1024
#: A label longer than this is cut to its first thread and a count: "3+5" is thread 3 and 5 others.
CELL_WIDTH = 7


@dataclass
class AccessMap:
    """The threads that read (or wrote) each element of one array."""

    argument: str
    access: str  # READ or WRITTEN
    threads: dict[int, tuple[int, ...]]  # element (flat index; < 0 or >= size: outside the array) -> threads

    def of(self, element: int) -> tuple[int, ...]:
        return self.threads.get(element, ())


def _ints(values, count=None) -> tuple[int, ...]:
    if not isinstance(values, list) or (count is not None and len(values) != count) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError("not a list of whole numbers")
    return tuple(values)


def _elements_threads(rows, threads: int, pairs: bool = False) -> dict[int, tuple[int, ...]]:
    """``[[element, [thread, ...]], ...]`` read back and checked: within the limits, threads of the launch (of
    ``threads``), and two threads a row where ``pairs`` (an unordered element: two threads), else sorted sets."""
    if not isinstance(rows, list) or len(rows) > MAX_ELEMENTS + MAX_OUTSIDE:
        raise ValueError("too many elements")
    found = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 2):
            raise ValueError("not an element's threads")
        (element,), who = _ints([row[0]]), _ints(row[1], 2 if pairs else None)
        if len(who) > MAX_THREADS_PER_ELEMENT or any(t < 0 or t >= threads for t in who):
            raise ValueError("not a launch's threads")
        found[element] = who if pairs else tuple(sorted(set(who)))
    return found


@dataclass(frozen=True)
class Array:
    """An array of the launch: an argument, or a shared array (shape: a row per block where the grid has several)."""

    name: str
    shape: tuple[int, ...]
    space: str = GLOBAL

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        if self.space == SHARED:
            rows = "a row per block, " if len(self.shape) == 2 else ""
            return f"shared, {rows}{self.shape[-1]} elements used"
        return " x ".join(map(str, self.shape)) + (" elements" if len(self.shape) == 1 else "")


@dataclass
class ThreadMap:
    """Which thread touched which element of each array in one launch (grid and block as launched)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    arrays: list[Array]  # the pointer arguments in order, then the shared arrays
    maps: list[AccessMap]
    note: str = ""  # what limits the map (a launch that was not recorded whole, ...)
    #: array -> element -> two threads that touched it unordered, one writing plainly (a race)
    unordered: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    # ---- threads and their labels ----------------------------------------------------------------
    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def one_dimensional(self) -> bool:
        return self.block[1] == self.block[2] == 1 and self.grid[1] == self.grid[2] == 1

    def label(self, thread: int) -> str:
        """A thread's name: its index across the grid for a 1-D launch; else ``x,y`` (and ``block:`` before it
        where the grid has several blocks)."""
        if self.one_dimensional:
            return str(thread)
        block, t = divmod(thread, self.threads_per_block)
        bx, by, _ = self.block
        local = f"{t % bx},{t // bx % by}" + (f",{t // (bx * by)}" if self.block[2] > 1 else "")
        return local if math.prod(self.grid) == 1 else f"{block}:{local}"

    def cell(self, threads: tuple[int, ...]) -> str:
        """What a cell shows of the threads that touched its element: '.' for none, runs of a 1-D launch's
        threads as '4-6', and past :data:`CELL_WIDTH` characters the first thread and how many more."""
        if not threads:
            return "."
        if self.one_dimensional:
            runs, start, previous = [], threads[0], threads[0]
            for t in threads[1:]:
                if t != previous + 1:
                    runs.append((start, previous))
                    start = t
                previous = t
            runs.append((start, previous))
            text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
        else:
            text = self.label(threads[0]) + (f"+{len(threads) - 1}" if len(threads) > 1 else "")
        if len(text) > CELL_WIDTH:
            text = f"{self.label(threads[0])}+{len(threads) - 1}"
        return text

    def find(self, argument: str, access: str) -> AccessMap | None:
        return next((m for m in self.maps if m.argument == argument and m.access == access), None)

    # ---- plain data ------------------------------------------------------------------------------
    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
                "arrays": [[a.name, list(a.shape), a.space] for a in self.arrays],
                "maps": [{"argument": m.argument, "access": m.access,
                          "threads": [[element, list(threads)] for element, threads in sorted(m.threads.items())]}
                         for m in self.maps],
                "unordered": {name: [[element, list(pair)] for element, pair in sorted(elements.items())]
                              for name, elements in self.unordered.items()},
                "note": self.note}

    @classmethod
    def from_dict(cls, d: dict) -> "ThreadMap":
        """The map :meth:`as_dict` wrote; ``ValueError`` for anything else (a map from a sandboxed child is checked
        whole: types, sizes and limits)."""
        if not isinstance(d, dict) or not isinstance(d.get("kernel"), str) or len(d["kernel"]) > 200:
            raise ValueError("not a thread map")
        grid, block = _ints(d.get("grid"), 3), _ints(d.get("block"), 3)
        if min(grid + block) < 1 or math.prod(grid) * math.prod(block) > 1 << 24:
            raise ValueError("not a launch")
        arrays = []
        for item in d.get("arrays") or []:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and len(item[0]) <= 100
                    and item[2] in (GLOBAL, SHARED)):
                raise ValueError("not an array")
            shape = _ints(item[1])
            if not 1 <= len(shape) <= 4 or min(shape) < 0 or math.prod(shape) > 1 << 40:
                raise ValueError("not an array's shape")
            arrays.append(Array(item[0], shape, item[2]))
        maps_in, unordered_in = d.get("maps") or [], d.get("unordered") or {}
        names = {a.name for a in arrays}
        if (len(arrays) > 2 * MAX_ARGUMENTS or not isinstance(maps_in, list) or len(maps_in) > 4 * MAX_ARGUMENTS
                or not isinstance(unordered_in, dict) or any(name not in names for name in unordered_in)):
            raise ValueError("not the arrays of a map")
        threads = math.prod(grid) * math.prod(block)
        maps = []
        for m in maps_in:
            if not isinstance(m, dict) or m.get("argument") not in names or m.get("access") not in ACCESSES:
                raise ValueError("not an access map")
            maps.append(AccessMap(m["argument"], m["access"], _elements_threads(m.get("threads"), threads)))
        unordered = {name: _elements_threads(rows, threads, pairs=True) for name, rows in unordered_in.items()}
        note = d.get("note", "")
        if not isinstance(note, str):
            raise ValueError("not a note")
        return cls(d["kernel"], grid, block, arrays, maps, note[:300], unordered)

    # ---- from the emulator -----------------------------------------------------------------------
    @classmethod
    def from_profile(cls, profile: LaunchProfile, names: list[str] | None = None) -> "ThreadMap":
        """The map of a profiled launch (its :attr:`~LaunchProfile.elements`); ``names`` renames the arguments in
        order (the names an exercise gives them, whatever a kernel calls its parameters)."""
        note = profile.note
        if profile.blocks_profiled < profile.launch.blocks:
            note = "; ".join(filter(None, [note, f"only the first {profile.blocks_profiled} of "
                                                  f"{profile.launch.blocks} blocks were recorded"]))
        tmap = cls(profile.kernel, tuple(profile.launch.grid), tuple(profile.launch.block), [], [], note)
        accesses = profile.elements
        if accesses is None:
            return tmap
        table = accesses.table
        blocks = profile.launch.blocks
        renamed = iter(names or ())
        for index, argument in enumerate(accesses.arguments):
            rows = table[table["argument"] == index]
            if argument.space == SHARED:
                # each block has its own: a row per block, as wide as the elements the blocks used
                width = int(rows["element"].max()) + 1 if len(rows) else 0
                shown = max(1, min(blocks, MAX_ELEMENTS // max(width, 1)))
                rows = rows[rows["block"] < shown]
                array = Array(argument.name, (shown, width) if blocks > 1 else (width,), SHARED)
                element = rows["block"].astype(np.int64) * width + rows["element"]
            else:
                array = Array(next(renamed, argument.name), argument.shape)
                element = rows["element"]
            if array.space == SHARED and not len(rows):
                continue
            tmap.arrays.append(array)
            thread = rows["block"].astype(np.int64) * tmap.threads_per_block + rows["thread"]
            races = _unordered(element, thread, rows)
            if races:
                tmap.unordered[array.name] = races
            for access in ACCESSES:
                chosen = (rows["kind"] == LOAD) == (access == READ)
                if not chosen.any():
                    continue
                threads: dict[int, set] = {}
                for e, who in zip(element[chosen].tolist(), thread[chosen].tolist()):
                    threads.setdefault(e, set()).add(who)
                inside = sorted(e for e in threads if 0 <= e < array.size)[:MAX_ELEMENTS]
                outside = sorted(e for e in threads if not 0 <= e < array.size)[:MAX_OUTSIDE]
                tmap.maps.append(AccessMap(array.name, access, {e: tuple(sorted(threads[e]))[:MAX_THREADS_PER_ELEMENT]
                                                                for e in inside + outside}))
        return tmap


def _unordered(element: np.ndarray, thread: np.ndarray, rows: np.ndarray) -> dict[int, tuple[int, int]]:
    """element -> (a thread that wrote it plainly, another thread that touched it with nothing ordering the two):
    threads of different blocks, or of one block that had passed as many barriers (a shared array's elements are
    its block's own, so only the barriers order them)."""
    found: dict[int, tuple[int, int]] = {}
    stores = np.flatnonzero(rows["kind"] == STORE)
    if not len(stores):
        return found
    order = np.argsort(element, kind="stable")
    starts = np.searchsorted(element[order], element[stores], side="left")
    ends = np.searchsorted(element[order], element[stores], side="right")
    for w, start, end in zip(stores, starts, ends):
        e = int(element[w])
        if e in found:
            continue
        for other in order[start:end]:
            if thread[other] != thread[w] and (rows["block"][other] != rows["block"][w]
                                               or rows["epoch"][other] == rows["epoch"][w]):
                found[e] = (int(thread[w]), int(thread[other]))
                break
    return dict(sorted(found.items())[:MAX_ELEMENTS])


def record(run, *args, **kwargs) -> tuple[list[ThreadMap], KernelError | None]:
    """``run(*args, **kwargs)`` on the CPU emulator with every block of its launches recorded: (one map per
    launch, the error a launch ended with or None).  A launch that fails its checks (an access past an array, a
    race) is mapped as far as it ran: that map is the one that shows what went wrong."""
    error = None
    with on_emulator(), collecting(0, elements=True) as profiles:
        try:
            run(*args, **kwargs)
        except KernelError as exc:
            error = exc
    return [ThreadMap.from_profile(p) for p in profiles], error


# ---- two maps of one launch, paired ------------------------------------------------------------------------

@dataclass
class Row:
    """One array's one access in both maps: a row of a picture."""

    array: Array  # the shape both maps' elements are placed in
    title: str
    access: str
    expected: AccessMap | None
    yours: AccessMap | None
    #: the array's elements each map has two threads touch unordered (the same for every access of the array)
    races: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    first_of_array: bool = True
    #: what each map calls the array ("expected", "yours"): a shared array may be named differently in each
    names: dict[str, str] = field(default_factory=dict)

    def differs(self, element: int) -> bool:
        return (self.expected.of(element) if self.expected else ()) != (self.yours.of(element) if self.yours else ())

    def outside(self) -> list[int]:
        return sorted({e for m in (self.expected, self.yours) if m for e in m.threads if not 0 <= e < self.array.size})


def _rewidened(elements: dict, width: int, new_width: int) -> dict:
    """A shared array's elements (keys, in rows of ``width`` per block) in rows of ``new_width``."""
    if width == new_width:
        return elements
    return {(e // width) * new_width + e % width: value for e, value in elements.items()}


def _rewidened_map(m: AccessMap | None, width: int, new_width: int) -> AccessMap | None:
    return m and AccessMap(m.argument, m.access, _rewidened(m.threads, width, new_width))


def _rows(expected: ThreadMap | None, yours: ThreadMap | None) -> list[Row]:
    """The rows of two maps: the arguments by name in order, then the shared arrays by their order (a kernel's
    own names for them may differ from the solution's), reads before writes."""
    maps = [m for m in (expected, yours) if m is not None]
    rows = []
    names = []
    for tmap in maps:
        names += [a.name for a in tmap.arrays if a.space == GLOBAL and a.name not in names]
    shared = [[a for a in tmap.arrays if a.space == SHARED] if tmap else [] for tmap in (expected, yours)]
    pairs = [(next(a for t in maps for a in t.arrays if a.name == name),) * 2 for name in names]
    pairs += [(shared[0][k] if k < len(shared[0]) else None, shared[1][k] if k < len(shared[1]) else None)
              for k in range(max(map(len, shared)))]
    for e_array, y_array in pairs:
        array = e_array or y_array
        title = array.name
        if array.space == SHARED:
            if e_array and y_array and e_array.name != y_array.name:
                title = f"{y_array.name} (expected: {e_array.name})"
            elif y_array and not e_array:
                title = f"{y_array.name} (no shared array expected)"
            widths = [a.shape[-1] for a in (e_array, y_array) if a]
            array = Array(title, array.shape[:-1] + (max(widths),), SHARED)
        width = array.shape[-1]
        races = {label: _rewidened(tmap.unordered.get(a.name, {}), a.shape[-1] if a.space == SHARED else width, width)
                 for label, tmap, a in (("expected", expected, e_array), ("yours", yours, y_array)) if tmap and a}
        first = True
        for access in ACCESSES:
            e_map = expected.find(e_array.name, access) if expected and e_array else None
            y_map = yours.find(y_array.name, access) if yours and y_array else None
            if e_map is None and y_map is None:
                continue
            if array.space == SHARED:
                e_map = _rewidened_map(e_map, e_array.shape[-1], width) if e_array else None
                y_map = _rewidened_map(y_map, y_array.shape[-1], width) if y_array else None
            names = {label: a.name for label, a in (("expected", e_array), ("yours", y_array)) if a}
            rows.append(Row(array, title, access, e_map, y_map, races, first, names))
            first = False
    return rows


def _legend(tmap: ThreadMap) -> str:
    if tmap.one_dimensional:
        return "the thread blockIdx.x * blockDim.x + threadIdx.x"
    return "threadIdx.x,threadIdx.y" + ("" if math.prod(tmap.grid) == 1 else " after the block's number and a colon")


# ---- side by side, as text ---------------------------------------------------------------------------------

def _race_text(row: Row, label: str, tmap: ThreadMap) -> str:
    """What a map's unordered elements of the row's array are, in words ('' for none)."""
    found = row.races.get(label) or {}
    if not found or not row.first_of_array:
        return ""
    element, (writer, other) = next(iter(found.items()))
    count = f"{len(found)} element{'s' if len(found) != 1 else ''}"
    return (f"{'yours: ' if label == 'yours' else ''}{count} touched by two threads with nothing ordering them, a "
            f"race (~), e.g. element {element}: written by thread {tmap.label(writer)}, touched by thread "
            f"{tmap.label(other)} in {'another block' if writer // tmap.threads_per_block != other // tmap.threads_per_block else 'the same block with no __syncthreads() between'}")


def _summary(row: Row) -> str:
    if row.expected is None and row.yours is None:
        return ""
    size = min(row.array.size, MAX_ELEMENTS)
    differing = [e for e in range(size) if row.differs(e)]
    theirs = [e for e in row.outside() if row.yours and row.yours.of(e)]
    parts = []
    if differing:
        parts.append(f"{len(differing)} of {size} elements differ from the expected map")
    if theirs:
        past, before = [e for e in theirs if e >= 0], [e for e in theirs if e < 0]
        where = " and ".join(filter(None, [f"{len(past)} past its end" if past else "",
                                           f"{len(before)} before its start" if before else ""]))
        parts.append(f"yours {'reads' if row.access == READ else 'writes'} {where}")
    return "; ".join(parts) if parts else "the same as expected"


def side_by_side(expected: ThreadMap | None, yours: ThreadMap | None, width: int = 100) -> str:
    """Both maps as text, the expected map above (a 1-D array: a column per element) or left (a 2-D one: a grid
    each) of yours, differences marked.  Either map may be None (then the other alone)."""
    first = expected or yours
    if first is None:
        return "no thread map"
    out = [f"thread map of {first.kernel}, grid ({','.join(map(str, first.grid))}), block "
           f"({','.join(map(str, first.block))}): each element shows the thread(s) that touched it, as "
           f"{_legend(first)}; '.' none"]
    for tmap in (expected, yours):
        if tmap and tmap.note:
            out.append(f"  ({'expected' if tmap is expected else 'yours'}: {tmap.note})")
    both = expected is not None and yours is not None
    labels = _labels(expected, yours)
    for row in _rows(expected, yours):
        summary = _summary(row) if both else ""
        out.append(f"{row.title} ({row.array.describe()}), {row.access} by:" + (f" {summary}" if summary else ""))
        for label, tmap in zip(labels, [m for m in (expected, yours) if m is not None]):
            said = _race_text(row, "yours" if tmap is yours else "expected", tmap)
            if said:
                out.append(f"  {said}")
        if len(row.array.shape) == 2 and row.array.shape[1] > 0:
            out += _grid_text(first, row, labels, both)
        else:
            out += _row_text(first, row, labels, both, width)
    return "\n".join(out)


def _labels(expected: ThreadMap | None, yours: ThreadMap | None) -> list[str]:
    """What the maps are called: "expected" and "yours"; a reader's map alone is "kernel"."""
    return ["expected"] * (expected is not None) + (["yours" if expected else "kernel"] if yours else [])


def _maps_of(row: Row, labels: list[str]) -> list[tuple[str, AccessMap | None]]:
    return [(label, row.expected if label == "expected" else row.yours) for label in labels]


def _cell_text(tmap: ThreadMap, row: Row, label: str, m: AccessMap | None, element: int) -> str:
    """A cell of the text: its threads, and '~' where two of the map's threads touch the element unordered."""
    text = tmap.cell(m.of(element)) if m else "."
    race = row.races.get("expected" if label == "expected" else "yours") or {}
    return text + "~" if element in race else text


def _row_text(tmap: ThreadMap, row: Row, labels: list[str], both: bool, width: int) -> list[str]:
    size = row.array.size
    outside = row.outside()
    columns = [e for e in outside if e < 0] + list(range(min(size, MAX_ELEMENTS))) + [e for e in outside if e >= 0]
    headers = [f"{c}" + ("!" if not 0 <= c < size else "") for c in columns]
    cells = {label: [_cell_text(tmap, row, label, m, c) for c in columns] for label, m in _maps_of(row, labels)}
    w = max([len(h) for h in headers] + [len(c) for texts in cells.values() for c in texts] + [1])
    per = max(1, (width - 12) // (w + 1))
    lines = []
    for start in range(0, len(columns), per):
        chunk = range(start, min(len(columns), start + per))
        lines.append("  element  " + " ".join(headers[i].rjust(w) for i in chunk))
        for label in labels:
            lines.append(f"  {label:<8} " + " ".join(cells[label][i].rjust(w) for i in chunk))
        if both:
            marks = " ".join(("^" if row.differs(columns[i]) else " ").rjust(w) for i in chunk)
            if marks.strip():
                lines.append("           " + marks)
    if row.outside():
        lines.append("  (an element marked ! is outside the array: its index is below 0 or past the last)")
    return lines


def _grid_text(tmap: ThreadMap, row: Row, labels: list[str], both: bool) -> list[str]:
    rows, cols = row.array.shape
    maps = _maps_of(row, labels)
    cells = {label: [[_cell_text(tmap, row, label, m, r * cols + c) for c in range(cols)] for r in range(rows)]
             for label, m in maps}
    w = max([len(str(cols - 1))] + [len(c) for grid in cells.values() for line in grid for c in line])
    down = "block" if row.array.space == SHARED else "row"

    def mark(r, c, label):
        return "*" if label == "yours" and both and row.differs(r * cols + c) else " "

    blocks = []
    for label in labels:
        panel_width = 6 + cols * (w + 2)
        lines = [label.ljust(panel_width), f"{down:>5} " + "".join(f"{c:>{w}}  " for c in range(cols))]
        for r in range(rows):
            lines.append(f"{r:>5} " + "".join(cells[label][r][c].rjust(w) + mark(r, c, label) + " "
                                              for c in range(cols)))
        blocks.append([line.ljust(panel_width) for line in lines])
    out = ["  " + "   |   ".join(parts).rstrip() for parts in zip(*blocks)]
    if both and any(row.differs(e) for e in range(rows * cols)):
        out.append("  (* marks an element of yours that differs from the expected map)")
    for element in row.outside():
        where = "past the end" if element >= 0 else "before the start"
        who = "; ".join(f"{label} {tmap.cell(m.of(element)) if m else '.'}" for label, m in maps)
        out.append(f"  element {element}, {where} of the array ({rows * cols} elements): {who}")
    return out


# ---- side by side, as a picture ----------------------------------------------------------------------------

#: The blocks' colours: none red or orange, which mark differences and races.
BLOCK_COLORS = ("tab:blue", "tab:green", "tab:purple", "tab:olive", "tab:cyan", "tab:brown", "tab:pink", "tab:gray")


def _color(tmap: ThreadMap, thread: int):
    import matplotlib.pyplot as plt

    if math.prod(tmap.grid) == 1:  # one block: neighbouring threads in neighbouring colours
        return plt.get_cmap("viridis")(0.3 + 0.65 * (thread % tmap.threads_per_block) / max(1, tmap.threads_per_block - 1))
    return BLOCK_COLORS[thread // tmap.threads_per_block % len(BLOCK_COLORS)]


def _layout(array: Array, outside: list[int]) -> tuple[int, dict[int, tuple[int, int]]]:
    """(columns, element -> (row, column)) of an array's cells: a 2-D array as it is, a 1-D one in rows of at
    most 16, and the elements outside the array in a row of their own below."""
    size = min(array.size, MAX_ELEMENTS)
    cols = array.shape[1] if len(array.shape) == 2 and array.shape[1] > 0 else max(1, min(16, size))
    places = {e: divmod(e, cols) for e in range(size)}
    last = max((r for r, _ in places.values()), default=-1) + 1
    for k, element in enumerate(outside):
        places[element] = (last + k // cols, k % cols)
    return max(cols, min(16, len(outside))), places


def draw_side_by_side(expected: ThreadMap | None, yours: ThreadMap | None, fig=None):
    """The maps drawn as grids of cells, the expected one on the left and yours on the right, a row of panels per
    array and access: each cell is an element, labelled with the thread that touched it (several: a run or the
    first and how many more) and coloured by it (one block) or its block, blank where none did; elements outside
    the array are hatched, and a cell of yours that differs from the expected one has a red border.  None when
    neither map touched anything."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    first = expected or yours
    rows = _rows(expected, yours)
    if not rows or first is None:
        return None
    columns = _labels(expected, yours)
    both = len(columns) == 2
    panels = []
    for row in rows:
        cols, places = _layout(row.array, row.outside())
        panels.append((row, cols, places, max(r for r, _ in places.values()) + 1 if places else 1))
    width = max(cols for _, cols, _, _ in panels)
    heights = [n + 0.9 for *_, n in panels]
    if fig is None:
        fig = plt.figure(figsize=(min(16.0, 0.6 + len(columns) * (0.5 * width + 0.5)), 0.8 + 0.48 * sum(heights)))
    axes = fig.subplots(len(panels), len(columns), squeeze=False, gridspec_kw={"height_ratios": heights})
    for row_axes, (row, cols, places, n_rows) in zip(axes, panels):
        size = row.array.size
        for ax, label in zip(row_axes, columns):
            m = row.expected if label == "expected" else row.yours
            for element, (r, c) in places.items():
                threads = m.of(element) if m else ()
                inside = 0 <= element < size
                differs = both and label == "yours" and row.differs(element)
                ax.add_patch(Rectangle((c, -r), 0.92, 0.86, facecolor=_color(first, threads[0]) if threads else "white",
                                       alpha=0.6 if threads else 1, hatch=None if inside else "///",
                                       edgecolor="red" if differs else ("black" if inside else "dimgray"),
                                       linewidth=2.2 if differs else 0.5))
                if element in (row.races.get("expected" if label == "expected" else "yours") or {}):
                    ax.add_patch(Rectangle((c + 0.06, -r + 0.06), 0.8, 0.74, fill=False, edgecolor="darkorange",
                                           linestyle="--", linewidth=1.8))
                ax.text(c + 0.46, -r + 0.38, first.cell(threads) if threads else "", ha="center", va="center",
                        fontsize=7.5)
                if not inside or len(row.array.shape) != 2:
                    ax.text(c + 0.04, -r + 0.82, str(element), ha="left", va="top", fontsize=5.5, color="dimgray")
            if len(row.array.shape) == 2:
                down = "block" if row.array.space == SHARED else "row"
                for r in range(row.array.shape[0]):
                    ax.text(-0.12, -r + 0.43, f"{down} {r}" if r == 0 else str(r), ha="right", va="center", fontsize=6,
                            color="dimgray")
                for c in range(row.array.shape[1]):
                    ax.text(c + 0.46, 0.9, str(c), ha="center", va="bottom", fontsize=6, color="dimgray")
            ax.set_xlim(-1.0, width + 0.1)
            ax.set_ylim(-n_rows + 0.8, 1.15)
            ax.set_axis_off()
            name = row.names.get("expected" if label == "expected" else "yours", row.title)
            ax.set_title(f"{label}: {name} ({row.array.describe()}), {row.access} by", fontsize=9, loc="left",
                         color="darkred" if both and label == "yours" else "black")
    raced = any(races for row in rows for races in row.races.values())
    title = (f"{first.kernel}: which thread touched each element (label: {_legend(first)}; hatched: outside the "
             f"array" + ("; red border: differs from the expected map" if both else "")
             + ("; orange dashes: two threads touch it with nothing ordering them, a race" if raced else "") + ")")
    fig.suptitle(textwrap.fill(title, max(40, int(fig.get_figwidth() * 13))), fontsize=8.5)
    fig.tight_layout()
    return fig
