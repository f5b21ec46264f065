"""What the book knows about one kernel version, written once beside its launcher.

Every topic module (``kernels/<part>/<topic>.py``) lists its ``__global__``
functions in ``KERNELS``, a mapping from the CUDA name to a
:class:`KernelVersion`, in teaching order:

* ``number``, ``title`` and ``key``: its rung in the chapter's ladder of
  versions (1, 2, ...; None for a helper kernel that is no rung, such as a
  transpose or a pack), what that rung is in a few words, and the short name
  chapters and benchmarks choose it by (``reduce_sum(x, version="atomic")``);
* ``launcher``: the Python function that runs it on NumPy arrays or device
  buffers (what the chapters and tests call);
* ``launch(shape)``: the grid, block and dynamic shared memory the launcher
  uses for a problem of that shape (what the grader times the reference with,
  and what the benchmarks launch);
* ``bytes(shape)`` and ``flops(shape)``: the least DRAM traffic and the
  arithmetic of one run (the roofline floor of the grader and the benchmarks'
  GB/s and GFLOP/s);
* ``reference``: the NumPy (float64) reference the kernel is checked against;
* ``source``: its section of the ``.cu`` file, found by the kernel's name
  (:func:`kernels.runtime.sources.section`).

A *shape* is a dict of named sizes, the same names the exercise of that kernel
uses (``{"n": 1000, "d": 3}``), so the grader, the benchmarks and the tests all
ask one record.  Everything else about a topic's versions is derived from its
records: :func:`ladder` (the rungs in order), :func:`versions` (the rungs by
key) and :func:`rung` (one of them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field

from .sources import kernel_section, relative_path, source_path

Shape = Mapping[str, int]


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block, three dimensions each, and bytes of dynamic shared memory per block."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int = 0


def launch_1d(blocks: int, threads: int, shared: int = 0) -> LaunchConfig:
    """A one-dimensional launch: ``blocks`` blocks of ``threads`` threads."""
    return LaunchConfig((int(blocks), 1, 1), (int(threads), 1, 1), int(shared))


@dataclass(frozen=True)
class KernelVersion:
    """One ``__global__`` function of ``kernels/<part>/<topic>.cu`` and the facts about it."""

    topic: str  # kernels/<part>/<topic>.cu
    kernel: str  # the __global__ function
    launcher: Callable  # kernels.<part>.<topic>.<launcher>: runs it
    launch: Callable[[Shape], LaunchConfig]  # its launch configuration for a shape
    bytes: Callable[[Shape], float]  # least DRAM traffic of one run
    flops: Callable[[Shape], float]  # floating-point operations of one run
    reference: Callable  # the NumPy reference it is checked against
    #: Preprocessor definitions the kernel is compiled with for ``launch`` (tile sizes and the like).
    defines: Mapping[str, int] = field(default_factory=dict)
    _: KW_ONLY
    #: Its rung in the chapter's ladder, 1, 2, ... in teaching order; kernels the chapter teaches as one step
    #: share a rung (an activation's forward and backward).  None: a kernel that is no rung (a helper such as a
    #: transpose or a pack, the peak's measuring kernel, a kernel generated for an exercise).
    number: int | None
    #: What the kernel is, or for the first kernel of a rung what the rung changes, in a few words.
    title: str
    #: The short name chapters and benchmarks choose the rung by ("warp_shuffle"), on its first kernel.
    key: str | None = None

    def __post_init__(self):
        for name in ("launcher", "launch", "bytes", "flops", "reference"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{self.topic}.{self.kernel}: {name} must be callable, not {getattr(self, name)!r}")
        if self.number is not None and (isinstance(self.number, bool) or not isinstance(self.number, int)
                                        or self.number < 1):
            raise ValueError(f"{self.topic}.{self.kernel}: number must be a rung 1, 2, ... or None, "
                             f"not {self.number!r}")
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"{self.topic}.{self.kernel}: give it a title, a few words on what it is")
        if self.key is not None and (self.number is None or not self.key.isidentifier()):
            raise ValueError(f"{self.topic}.{self.kernel}: a key names a rung, in letters, digits and underscores; "
                             f"got {self.key!r} on {'a helper' if self.number is None else f'rung {self.number}'}")

    @property
    def source_file(self) -> str:
        """Its file as the book names it: ``kernels/basics/reduction.cu``."""
        return relative_path(source_path(self.topic))

    @property
    def source(self) -> str:
        """Its section of the ``.cu`` file: the kernel, the comment above it and the helpers and defines
        written for it (:func:`kernels.runtime.sources.section`)."""
        return kernel_section(self.topic, self.kernel)


def kernel_table(*versions: KernelVersion, continues: Mapping[str, KernelVersion] | None = None,
                 taught_elsewhere: tuple[int, ...] = ()) -> dict[str, KernelVersion]:
    """``KERNELS`` of a topic module: the versions by CUDA name, in teaching order.

    The rungs' numbers must run 1, 2, ... in that order without a gap (helpers, numbered None, anywhere),
    or, for a topic that ``continues`` another's ladder (sgemm_hopper after sgemm), on from that ladder's
    last rung; a rung's key is on its first kernel and unique.  A chapter whose ladder alternates between
    two files (attention: the float kernels in one, the BF16 ones in the other) names in
    ``taught_elsewhere`` the rungs the other file holds, which this table then skips.
    """
    table: dict[str, KernelVersion] = {}
    for version in versions:
        if version.kernel in table:
            raise ValueError(f"{version.topic}: kernel {version.kernel!r} is listed twice")
        table[version.kernel] = version
    last = max((version.number for version in ladder(continues)), default=0) if continues else 0
    shared = False  # whether the next kernel may share rung ``last``: only once this table has one
    keys: set[str] = set()
    for version in table.values():
        if version.number is None:
            continue
        while last + 1 in taught_elsewhere and version.number > last + 1:
            last, shared = last + 1, False
        if version.number != last + 1 and not (shared and version.number == last):
            raise ValueError(f"{version.topic}.{version.kernel} is rung {version.number}, after rung {last}: "
                             f"number the rungs 1, 2, ... in teaching order")
        if version.key is not None and (version.number == last or version.key in keys):
            raise ValueError(f"{version.topic}.{version.kernel}: key {version.key!r} is "
                             f"{'taken' if version.key in keys else 'on a second kernel of its rung'}")
        last, shared = version.number, True
        if version.key is not None:
            keys.add(version.key)
    return table


def ladder(table: Mapping[str, KernelVersion]) -> tuple[KernelVersion, ...]:
    """The rungs of a topic's ``KERNELS``, in order: the first kernel of each number."""
    rungs: dict[int, KernelVersion] = {}
    for version in table.values():
        if version.number is not None:
            rungs.setdefault(version.number, version)
    return tuple(rungs.values())


def versions(table: Mapping[str, KernelVersion]) -> dict[str, KernelVersion]:
    """The rungs that have a key, by key, in order: what ``version="..."`` chooses among."""
    return {version.key: version for version in ladder(table) if version.key is not None}


def rung(table: Mapping[str, KernelVersion], key: str) -> KernelVersion:
    """The rung called ``key``; a KeyError that lists the keys when there is none."""
    found = versions(table)
    if key not in found:
        topic = next(iter(table.values())).topic if table else "this topic"
        raise KeyError(f"{topic} has no version {key!r}; its versions are {', '.join(found) or 'unnamed'}")
    return found[key]


def as_launch(grid, block, shared: int = 0) -> LaunchConfig:
    """A :class:`LaunchConfig` from a launcher's ``grid`` and ``block`` (ints or 1- to 3-tuples)."""

    def dim3(value) -> tuple[int, int, int]:
        items = [value] if isinstance(value, int) else list(value)
        items += [1] * (3 - len(items))
        return int(items[0]), int(items[1]), int(items[2])

    return LaunchConfig(dim3(grid), dim3(block), int(shared))
