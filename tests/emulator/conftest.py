"""Fixtures for the CPU emulator's tests: a backend with a private build cache."""

from __future__ import annotations

import os

import pytest

from kernels.runtime import compile_source
from kernels.runtime.emulator import EmulatorBackend


@pytest.fixture(scope="session")
def emulator_cache_dir(tmp_path_factory) -> str:
    """One build cache for these tests, fresh for the session (DLK_CACHE_DIR, when set, wins)."""
    return os.environ.get("DLK_CACHE_DIR") or str(tmp_path_factory.mktemp("dlk-cache"))


@pytest.fixture(scope="module", autouse=True)
def emulator_cache(emulator_cache_dir):
    """Builds of these tests go to that cache; the environment is restored after each test file."""
    saved = os.environ.get("DLK_CACHE_DIR")
    os.environ["DLK_CACHE_DIR"] = emulator_cache_dir
    yield emulator_cache_dir
    if saved is None:
        del os.environ["DLK_CACHE_DIR"]
    else:
        os.environ["DLK_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def emu_backend() -> EmulatorBackend:
    return EmulatorBackend(sandbox=False, timeout=60, checks=True)


@pytest.fixture
def emu_build(emu_backend):
    """emu_build(source, name="kernel.cu", backend=None, **kw) -> Module on the emulator."""
    modules = []

    def _build(source: str, name: str = "kernel.cu", backend=None, **kwargs):
        module = compile_source(source, name, backend=backend or emu_backend, **kwargs)
        modules.append(module)
        return module

    yield _build
    for module in modules:
        module.compiled.close()
