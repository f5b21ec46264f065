"""Parse a reader's CUDA C source with a real C++ front end: clang, through libclang's Python bindings.

Why libclang (the ``libclang`` wheel, which bundles ``libclang.so``) rather than a parser such as
tree-sitter-cpp: the runtime needs *meaning*, not only a syntax tree.  A kernel parameter written
``Dtype s`` after ``typedef float Dtype;``, ``T* x`` in ``scale<double>``, a struct taken by value,
``const int& n`` or a kernel made by a function-like macro must be resolved to a C type, a size, an
alignment and field offsets exactly as nvcc resolves them.  clang's CUDA mode does the
preprocessing, name lookup, template instantiation and record layout itself (for the nvptx64
target, the layout nvcc uses); a syntax-only parser would leave all of that to hand-written code
again.  The cost is the wheel's size (about 24 MiB) and a few milliseconds a parse, so parses are
cached by source.

The reader's ``#include`` lines are left out (blanked, keeping line numbers):
``frontend_prelude.h`` declares what kernels' declarations use from CUDA's headers.  Function
bodies are parsed too (that is how a definition is told from a prototype), and their errors,
from functions the prelude does not declare, are ignored: only the kernels' parameters matter.
A template kernel is instantiated in a parse that skips function bodies (``skip_bodies``): an
explicit instantiation in the reader's file instantiates the body, and a body that uses what the
prelude does not declare (cooperative groups, say) would make that instance invalid, while nvcc,
with the real headers, instantiates it.
"""

from __future__ import annotations

import atexit
import functools
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import KernelCompileError

_PRELUDE = Path(__file__).with_name("frontend_prelude.h")
_MAIN = "/dlk-frontend/source.cu"
_PRELUDE_NAME = "/dlk-frontend/prelude.h"
_ARGS = ("-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", "--cuda-gpu-arch=sm_90",
         "-nostdinc", "-std=c++17", "-ferror-limit=0", "-w", "-include", _PRELUDE_NAME)
_lock = threading.Lock()


def _cindex():
    try:
        import clang.cindex as cindex
    except ImportError:  # pragma: no cover - a broken installation
        raise KernelCompileError("reading kernel signatures needs libclang (pip install libclang==18.1.1)") from None
    return cindex


@functools.lru_cache(maxsize=1)
def _index():
    return _cindex().Index.create()


_INCLUDE_LINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(?:include|include_next|import|embed)\b(?:[^\n]*\\\n)*[^\n]*", re.M)


def without_includes(source: str) -> str:
    """``source`` with each ``#include`` (``#import``, ``#include_next``, ``#embed``) line blanked,
    continuation lines too, keeping line numbers: the front end reads no file but the source."""
    return _INCLUDE_LINE.sub(lambda m: "\n" * m.group(0).count("\n"), source)


@dataclass(frozen=True)
class Parsed:
    """One parse: the translation unit and the error messages clang gave, by line of the source."""

    unit: object
    errors: tuple[tuple[int, int, str], ...]  # (line, column, message) in the reader's file
    # files clang read that are not the prelude: an #include written so that it was not blanked
    # (split by a line continuation, say); the caller refuses the source without reading its kernels
    stray_includes: tuple[tuple[int, str], ...] = ()
    extra_line: int = 0  # the line ``extra`` starts on (0: none appended)


def parse(source: str, defines: tuple[tuple[str, str], ...] = (), extra: str = "", skip_bodies: bool = False) -> Parsed:
    """The source parsed as CUDA device code; ``extra`` is appended (after the reader's last line).
    With ``skip_bodies`` clang skips the bodies of functions (not of constexpr ones, which it may need).

    Parses are cached by (source, defines, extra, skip_bodies): the emulator and the grader compile the
    same source many times.
    """
    return _parse_cached(source, tuple(defines), extra, skip_bodies)


@functools.lru_cache(maxsize=16)  # translation units are large; the signatures are cached by the caller
def _parse_cached(source: str, defines: tuple[tuple[str, str], ...], extra: str, skip_bodies: bool) -> Parsed:
    cindex = _cindex()
    text = without_includes(source)
    extra_line = 0
    if extra:
        text = text + ("" if text.endswith("\n") else "\n")
        extra_line = text.count("\n") + 1
        text = text + extra + "\n"
    args = list(_ARGS) + [f"-D{k}={v}" for k, v in defines]
    options = cindex.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES if skip_bodies else 0
    with _lock:  # one libclang index; parses of one process one at a time
        unit = _index().parse(_MAIN, args=args, unsaved_files=[(_MAIN, text), (_PRELUDE_NAME, _PRELUDE.read_text())],
                              options=options)
    errors = []
    for d in unit.diagnostics:
        if d.severity >= cindex.Diagnostic.Error and d.location.file is not None and d.location.file.name == _MAIN:
            errors.append((d.location.line, d.location.column, d.spelling))
    stray = tuple((inc.location.line, inc.include.name) for inc in unit.get_includes()
                  if inc.include is not None and inc.include.name != _PRELUDE_NAME)
    return Parsed(unit, tuple(errors), stray, extra_line)


@atexit.register
def _release() -> None:
    """Free the translation units while libclang is still loaded (not in the interpreter's teardown)."""
    _parse_cached.cache_clear()
    _index.cache_clear()


def in_reader_file(cursor) -> bool:
    location = cursor.location
    return location.file is not None and location.file.name == _MAIN


def is_kernel(cursor) -> bool:
    """A ``__global__`` function (or function template)."""
    cindex = _cindex()
    return any(child.kind == cindex.CursorKind.CUDAGLOBAL_ATTR for child in cursor.get_children())


def kernels(parsed: Parsed):
    """Every ``__global__`` function and function template of the reader's file, in order, with its
    namespaces: ``(cursor, ["ns", "inner"])``."""
    cindex = _cindex()
    K = cindex.CursorKind
    found = []

    def walk(cursor, path):
        for child in cursor.get_children():
            if not in_reader_file(child):
                continue
            if child.kind == K.NAMESPACE:
                walk(child, path + ([child.spelling] if child.spelling else []))
            elif child.kind == K.LINKAGE_SPEC or child.kind == K.UNEXPOSED_DECL:
                walk(child, path)  # extern "C" { ... }
            elif child.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and is_kernel(child):
                found.append((child, path))

    walk(parsed.unit.cursor, [])
    return found


def source_text(cursor) -> str:
    """The tokens of ``cursor`` as written, joined by single spaces (empty inside a macro expansion)."""
    return " ".join(t.spelling for t in cursor.get_tokens())


def errors_within(parsed: Parsed, cursor) -> list[str]:
    """clang's error messages located inside ``cursor``'s extent."""
    start, end = cursor.extent.start, cursor.extent.end
    if start.file is None or start.file.name != _MAIN:
        return []
    return [message for line, column, message in parsed.errors
            if (start.line, start.column) <= (line, column) <= (end.line, end.column)]
