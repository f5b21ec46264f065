"""Template kernels on the GPU backend are found by their mangled names, with or without a demangler.

nvcc installed from PyPI ships no ``cu++filt`` and a GPU machine may have no
binutils ``c++filt``; the C++ runtime's own demangler must do then.  Needs only
nvcc (no GPU): the cubin is compiled here and its symbols read.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernels.runtime import gpu
from kernels.runtime.signature import template_instance

SOURCE = Path(__file__).parent / "cuda_corpus" / "templates.cu"
ASKED = ["scale<float>", "scale<double, 64>", "block_reduce<int, 128>", "axpy<float>"]


@pytest.fixture(scope="module")
def cubin(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    source = SOURCE.read_text()
    signatures = {s.name: s for s in (template_instance(source, name, SOURCE.name, {}) for name in ASKED)}
    names = list(signatures)
    path = tmp_path_factory.mktemp("templates") / "k.cu"
    path.write_text(gpu._wrap_source(source, SOURCE.name) + gpu._instantiating(signatures, names))
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(path.with_suffix(".cubin")), str(path)], check=True,
                   capture_output=True)
    return names, path.with_suffix(".cubin").read_bytes()


@pytest.mark.parametrize("demangler", ["a demangler on the PATH", "no demangler on the PATH"])
def test_every_instantiation_asked_for_is_found(cubin, demangler, monkeypatch):
    names, image = cubin
    if demangler.startswith("no"):
        monkeypatch.setattr(shutil, "which", lambda _name: None)
    elif not (shutil.which("cu++filt") or shutil.which("c++filt")):
        pytest.skip("neither cu++filt nor c++filt is installed")
    found = gpu._mangled_names(image, names)
    assert set(found) == set(names), found
    assert found["scale<float, 128>"].startswith("_Z5scaleIf") and found["scale<double, 64>"].startswith("_Z5scaleId")
    assert found["axpy<float>"].startswith("_ZN3ops4axpyIf")  # inside a namespace
    assert len(set(found.values())) == len(names)


def test_the_runtime_demangles_a_kernel_name():
    assert gpu._demangle("_Z5scaleIfLi128EEvPKT_PS0_S0_i") == "void scale<float, 128>(float const*, float*, float, int)"
    assert gpu._demangle("not_mangled") == "not_mangled"
