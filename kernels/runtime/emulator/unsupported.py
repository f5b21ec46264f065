"""CUDA features the CPU emulator cannot run, found in the source before g++ sees it.

Each is reported in one sentence at the reader's line, instead of the
compiler errors they would otherwise cause inside the emulator's own code.
"""

from __future__ import annotations

import re

from ..errors import KernelCompileError
from ..signature import strip_comments

_FEATURES = [
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\("),
     "inline PTX assembly (asm) is not supported by the CPU emulator, which runs kernels as C++ on the CPU; "
     "write the operation in CUDA C, or run this kernel on a GPU"),
    (re.compile(r"<<<"),
     "a kernel launch written in the source (<<<...>>>: host code that launches kernels, or a launch from device "
     "code, dynamic parallelism) is not supported by the CPU emulator; launch each kernel from Python with "
     "module.function(...) instead, or run this source on a GPU"),
    (re.compile(r"\b(?:tex1Dfetch|tex1D|tex2D|tex3D|texture\s*<|cudaTextureObject_t|surf1Dwrite|surf2Dwrite|surf2Dread)\b"),
     "textures and surfaces are not supported by the CPU emulator; read the data through an ordinary pointer "
     "(const T* __restrict__, or __ldg), or run this kernel on a GPU"),
]


def check_supported(source: str, source_name: str) -> None:
    """Raise KernelCompileError naming the first unsupported feature of each kind and its line."""
    clean = strip_comments(source)
    lines = source.splitlines()
    found = []
    for pattern, sentence in _FEATURES:
        m = pattern.search(clean)
        if m:
            line = clean.count("\n", 0, m.start()) + 1
            text = f"{source_name}:{line}: unsupported: {sentence}."
            if 1 <= line <= len(lines):
                text += f"\n  {line:4d} | {lines[line - 1]}"
            found.append((line, text))
    if found:
        raise KernelCompileError(
            f"{source_name} uses what the CPU emulator cannot run:\n" + "\n".join(t for _, t in sorted(found)),
            source_name=source_name,
        )
