"""Shared pytest set-up: GPU tests skip (visibly) where there is no usable GPU.

Markers (declared in pyproject.toml):

* ``gpu``: needs a real CUDA device; skipped without one.
* ``backend``: runs kernels on the current backend: the CPU emulator under
  ``make test``, the GPU under ``make test-gpu`` (``DLK_BACKEND=gpu``).
"""

from __future__ import annotations

import functools

import pytest

from suite_order import HEAVY_FIRST


@functools.lru_cache(maxsize=1)
def gpu_usable() -> bool:
    from kernels.runtime import selection

    return selection.gpu_usable()


def pytest_addoption(parser):
    parser.addoption("--heavy-first", action="store_true", default=False,
                     help="run the files of HEAVY_FIRST (tests/suite_order.py) first; with pytest-xdist, "
                          "add --no-loadscope-reorder so that it keeps this order")


NO_GPU_REASON = (
    "no usable GPU here (PyCUDA missing or no CUDA device): these tests run on a GPU machine with `make test-gpu`"
)


def pytest_collection_modifyitems(config, items):
    if config.getoption("heavy_first"):
        rank = {path: index for index, path in enumerate(HEAVY_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or gpu_usable():
        return
    skip = pytest.mark.skip(reason=NO_GPU_REASON)
    for item in gpu_items:
        item.add_marker(skip)


def pytest_report_header(config):
    import os

    from kernels.runtime.selection import ENV_VAR

    return f"kernels backend: {ENV_VAR}={os.environ.get(ENV_VAR, 'auto')}"


@pytest.fixture(scope="session")
def backend():
    """The backend kernels run on in this session; skips (with the reason) if none can be made.

    With ``DLK_BACKEND=gpu`` or ``cpu`` a backend that cannot be made is an
    error, not a skip: the run asked for it.
    """
    from kernels.runtime import selection

    try:
        return selection.current_backend()
    except ImportError as exc:
        if selection.requested() != "auto":
            raise
        pytest.skip(f"no backend to run kernels on: the CPU emulator (kernels.runtime.emulator) cannot be imported ({exc})")


@pytest.fixture
def launches(monkeypatch):
    """The (kernel, LaunchConfig) of every launch prepared while the test runs, in order."""
    from kernels.runtime import module as runtime_module
    from kernels.runtime.versions import as_launch

    seen = []
    prepare = runtime_module.Kernel.prepare

    def recording(self, args, grid, block, shared=0):
        seen.append((self.name, as_launch(grid, block, shared)))
        return prepare(self, args, grid, block, shared)

    monkeypatch.setattr(runtime_module.Kernel, "prepare", recording)
    return seen
