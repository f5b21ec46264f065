"""What the book knows about one kernel version, written once beside its launcher.

Every topic module (``kernels/<part>/<topic>.py``) lists its ``__global__`` functions
in ``KERNELS``, a mapping from the CUDA name to a :class:`KernelVersion`:

* ``launcher``: the Python function that runs it on NumPy arrays or device
  buffers (what the chapters and tests call);
* ``launch(shape)``: the grid, block and dynamic shared memory the launcher
  uses for a problem of that shape (what the grader times the reference with,
  and what the benchmarks launch);
* ``bytes(shape)`` and ``flops(shape)``: the least DRAM traffic and the
  arithmetic of one run (the roofline floor of the grader and the benchmarks'
  GB/s and GFLOP/s);
* ``reference``: the NumPy (float64) reference the kernel is checked against.

A *shape* is a dict of named sizes, the same names the exercise of that kernel
uses (``{"n": 1000, "d": 3}``), so the grader, the benchmarks and the tests all
ask one record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

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
    launcher: Callable  # kernels.<topic>.<launcher>: runs it
    launch: Callable[[Shape], LaunchConfig]  # its launch configuration for a shape
    bytes: Callable[[Shape], float]  # least DRAM traffic of one run
    flops: Callable[[Shape], float]  # floating-point operations of one run
    reference: Callable  # the NumPy reference it is checked against
    #: Preprocessor definitions the kernel is compiled with for ``launch`` (tile sizes and the like).
    defines: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("launcher", "launch", "bytes", "flops", "reference"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{self.topic}.{self.kernel}: {name} must be callable, not {getattr(self, name)!r}")


def kernel_table(*versions: KernelVersion) -> dict[str, KernelVersion]:
    """``KERNELS`` of a topic module: the versions by CUDA name, in teaching order."""
    table: dict[str, KernelVersion] = {}
    for version in versions:
        if version.kernel in table:
            raise ValueError(f"{version.topic}: kernel {version.kernel!r} is listed twice")
        table[version.kernel] = version
    return table


def as_launch(grid, block, shared: int = 0) -> LaunchConfig:
    """A :class:`LaunchConfig` from a launcher's ``grid`` and ``block`` (ints or 1- to 3-tuples)."""

    def dim3(value) -> tuple[int, int, int]:
        items = [value] if isinstance(value, int) else list(value)
        items += [1] * (3 - len(items))
        return int(items[0]), int(items[1]), int(items[2])

    return LaunchConfig(dim3(grid), dim3(block), int(shared))
