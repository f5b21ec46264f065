"""What a submitted kernel may contain, decided on the preprocessed source.

A check by pattern on the text a student wrote can always be dodged: the
digraph ``%:include``, an include name built by a macro, ``_Pragma`` strings,
string literals pasted or escaped inside ``asm``.  So the questions are asked
of the C preprocessor's own output instead, once as plain C++ (what nvcc's host
pass sees) and once with the macros nvcc's device pass defines (``__CUDA_ARCH__``,
``__NVCC__``, ...), which the CPU emulator defines too, so that a branch taken
only in one pass cannot hide anything:

* **includes** -- the files the compiler opened, from its dependency output
  (``-MD``) and its include trace (``-H``): every file must lie in the
  emulator's headers or the compiler's own system headers, and every header
  the student's file names directly must be one of
  :data:`ALLOWED_HEADERS`.  Nothing else may be read at compile time.
* **assembler directives** -- an ``asm``/``__asm__`` statement whose text
  (literals pasted and escapes decoded) holds ``.incbin``, ``.include`` or a
  directive that makes more text or bytes (``.macro``, ``.irp``, ``.rept``,
  ``.fill``, ...) is refused: the first two read files, the others build them
  or fill the executable with ballast.
* **asking for the emulator** -- a source whose preprocessed text changes
  when the emulator's own macro (``DLK_EMULATOR``, which the book's headers
  use) is defined would be one kernel on the emulator and another on a GPU;
  so would one that asks whether a header exists (``__has_include``, by name,
  through a macro or pasted), which each compiler answers from its own folders;
* **switching checks off** -- sanitizer attributes (``no_sanitize...``,
  ``no_address_safety_analysis``, ...), the ``optimize`` attribute,
  ``#pragma GCC optimize/push_options/target`` and any ``#pragma clang``, and
  calls into the sanitizer's own interface (``__asan_*``, ``__sanitizer_*``),
  which would unpoison the guarded memory around a buffer.

The whole preprocessed text is scanned, headers included (the system headers
the allowed ones pull in contain none of these), so a ``#line`` directive that
makes the student's text look like a header's hides nothing.  Each refusal is
one sentence naming the student's line.
"""

from __future__ import annotations

import bisect
import codecs
import functools
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernels.runtime.emulator import build as emulator_build

#: Headers a kernel may include.  Nothing else: an include of a path would let the
#: compiler read (and quote in its messages) any file the grading process can see.
ALLOWED_HEADERS = frozenset({
    "cuda_fp16.h", "cuda_bf16.h", "cuda_runtime.h", "cuda.h", "device_launch_parameters.h", "math_constants.h",
    "cooperative_groups.h", "cooperative_groups/reduce.h", "stdint.h", "cstdint", "math.h", "cmath", "float.h",
    "cfloat", "limits.h", "climits", "stddef.h", "cstddef", "assert.h", "cassert", "stdio.h", "cstdio",
    "mma.h", "cuda_pipeline.h",  # WMMA's fragments and cp.async, which the GEMM chapter's exercises ask for
})

#: The two ways the source is preprocessed: as plain C++ (nvcc's host pass sees what no macro of nvcc hides),
#: and with what nvcc's device pass defines, which the emulator defines too (its prelude).
CONFIGURATIONS = ((), emulator_build.nvcc_defines())

_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d)*)\s*$')
_TRACE = re.compile(r"^(\.+) (.+)$")

_ASM = re.compile(r"\b(?:__asm__|__asm|asm)\b(?:\s|\b(?:volatile|__volatile__|goto|inline|__inline__)\b)*\(")
_STRING = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\((.*?)\)\1"|(?:u8|u|U|L)?"((?:[^"\\\n]|\\.)*)"', re.S)
#: assembler directives that read files, or make text, code or bytes of their own
_BAD_DIRECTIVE = re.compile(
    r"(incbin|\.?include|\.macro|\.irpc?\b|\.rept|\.altmacro|\.purgem|\.exitm|\.fill|\.space|\.skip|\.zero|"
    r"\.(?:a|as)ciz?\b|\.string|\.octa|\.quad|\.rodata|\.section|\.pushsection|\.data)", re.I)

_NO_CHECKS = re.compile(
    r"\b_*(no_sanitize\w*|no_address_safety_analysis|disable_sanitizer_instrumentation|no_instrument_function)\b")
_OPTIMIZE_ATTRIBUTE = re.compile(r"(?:__attribute__\s*\(\(|\[\[)[^;{}]*?\b_*optimize_*\b")
_SANITIZER_API = re.compile(r"\b__(?:asan|lsan|ubsan|msan|tsan|hwasan|sanitizer)_\w+")
_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+(?:GCC\s+(?:optimize|push_options|pop_options|reset_options|target)\b|clang\b)",
                     re.M)


class SourceRefused(Exception):
    """The source asks for something a graded kernel may not do; the message is for the student."""


@dataclass
class Preprocessed:
    text: str
    opened: list[str]          # every file the compiler opened (dependency output)
    direct: list[str]          # files the student's source includes itself (include trace, depth 1)
    include_lines: dict[str, int]
    ok: bool
    student_file: str


@functools.lru_cache(maxsize=None)
def system_include_dirs(cxx: str) -> tuple[str, ...]:
    """The compiler's own header directories, as it reports them (``-v``)."""
    out = subprocess.run([cxx, "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True, timeout=60)
    dirs, inside = [], False
    for line in out.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            break
        elif inside and line.strip():
            dirs.append(os.path.realpath(line.strip()))
    return tuple(dirs)


def _roots(cxx: str) -> tuple[str, ...]:
    return (str(emulator_build.INCLUDE.resolve()),) + system_include_dirs(cxx)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def preprocess(source: str, extra: tuple[str, ...] = ()) -> Preprocessed:
    """The student's source preprocessed as the emulator compiles it (``-E -H -MD``)."""
    cxx = emulator_build.compiler()
    with tempfile.TemporaryDirectory(prefix="dlk-pp-") as work:
        src = Path(work) / "kernel.cu"
        src.write_text(source)
        deps = Path(work) / "kernel.d"
        cmd = [cxx, "-std=gnu++17", "-x", "c++", "-E", "-H", "-MD", "-MF", str(deps), *extra,
               "-I", str(emulator_build.HERE), "-I", str(emulator_build.INCLUDE), str(src)]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=60)
        except subprocess.TimeoutExpired:
            raise SourceRefused("The source took too long to preprocess (a runaway macro or include); "
                                "it was not compiled.") from None
        except OSError as exc:
            raise SourceRefused(f"The grader could not check the source: its C++ preprocessor ({cxx}) did not run "
                                f"({exc.strerror}); please tell the instructor.") from None
        opened = []
        if deps.exists():
            body = deps.read_text().replace("\\\n", " ")
            opened = [p.replace("\\ ", " ") for p in re.split(r"(?<!\\)\s+", body.split(":", 1)[-1]) if p]
        direct = []
        for line in result.stderr.splitlines():
            m = _TRACE.match(line)
            if m and len(m.group(1)) == 1:
                direct.append(m.group(2))
        text = result.stdout
        include_lines = _include_sites(text, str(src))
    return Preprocessed(text, [p for p in opened if p != str(src)], direct, include_lines,
                        result.returncode == 0, str(src))


def _include_sites(text: str, student_file: str) -> dict[str, int]:
    """For each file the student's source includes, the line of its include directive."""
    stack: list[str] = []
    sites: dict[str, int] = {}
    for line in text.splitlines():
        m = _MARKER.match(line)
        if not m:
            continue
        flags = m.group(3).split()
        if "1" in flags:
            stack.append(m.group(2))
        elif "2" in flags and stack:
            left = stack.pop()
            if m.group(2) == student_file and not stack:
                sites.setdefault(os.path.realpath(left), int(m.group(1)) - 1)
    return sites


def _line_origins(text: str, student_file: str) -> list[int | None]:
    """The student's line each line of the preprocessed text comes from (None: a header's)."""
    origins: list[int | None] = []
    current, number = None, 0
    for line in text.splitlines():
        m = _MARKER.match(line)
        if m:
            current, number = m.group(2), int(m.group(1))
            origins.append(None)
            continue
        origins.append(number if current == student_file else None)
        number += 1
    return origins


def _at(line: int | None) -> str:
    return f"line {line}: " if line else ""


def _asm_text(text: str, start: int) -> tuple[str, int]:
    """The assembler text of the asm statement opening at ``start`` (literals pasted, escapes decoded)."""
    depth, i = 1, start
    while i < len(text) and depth:
        c = text[i]
        if c == '"' or (c == "R" and text.startswith('R"', i)):
            m = _STRING.match(text, i if c == '"' else i)
            if m:
                i = m.end()
                continue
        depth += c == "("
        depth -= c == ")"
        i += 1
    body = text[start:i]
    pieces = []
    for m in _STRING.finditer(body):
        if m.group(2) is not None:
            pieces.append(m.group(2))
        else:
            try:
                pieces.append(codecs.escape_decode(m.group(3).encode("latin-1", "backslashreplace"))[0].decode("latin-1"))
            except ValueError:
                pieces.append(m.group(3))
    return "".join(pieces), i


def check_preprocessed(pp: Preprocessed, cxx: str) -> str:
    """'' if the preprocessed source may be compiled, else one sentence saying why not."""
    roots = _roots(cxx)
    allowed = ", ".join(f"<{h}>" for h in sorted(ALLOWED_HEADERS))
    for path in pp.direct:
        real = os.path.realpath(path)
        names = [os.path.relpath(real, r) for r in roots if _under(real, r)]
        if not any(n in ALLOWED_HEADERS for n in names):
            line = pp.include_lines.get(real)
            shown = names[0] if names else os.path.basename(path)
            return (f"{_at(line)}the source includes '{shown}', which is not allowed; a kernel may include "
                    f"only the CUDA and C headers {allowed}.")
    # the emulator's headers may include its own files beside them (never named by the student)
    readable = (str(emulator_build.HERE.resolve()),) + roots[1:]
    for path in pp.opened:
        real = os.path.realpath(path)
        if not any(_under(real, r) for r in readable):
            return (f"the source makes the compiler read '{os.path.basename(path)}', a file outside the CUDA and C "
                    f"headers; a kernel may include only {allowed}.")
    text = pp.text
    origins = _line_origins(text, pp.student_file)
    line_starts = [0]
    for m in re.finditer("\n", text):
        line_starts.append(m.end())

    def line_of(offset: int) -> int | None:
        index = bisect.bisect_right(line_starts, offset) - 1
        return origins[index] if 0 <= index < len(origins) else None

    for m in _ASM.finditer(text):
        body, _ = _asm_text(text, m.end())
        bad = _BAD_DIRECTIVE.search(body)
        if bad:
            return (f"{_at(line_of(m.start()))}an asm statement holds the assembler directive '{bad.group(0)}', which "
                    f"reads files or makes data of its own; a kernel may not use it.")
    for pattern, what in ((_NO_CHECKS, "switches off the out-of-bounds checks"),
                          (_OPTIMIZE_ATTRIBUTE, "changes how the kernel is compiled and checked"),
                          (_SANITIZER_API, "reaches into the memory checker"),
                          (_PRAGMA, "changes how the kernel is compiled and checked")):
        found = pattern.search(text)
        if found:
            shown = " ".join(found.group(0).split())[-60:]
            return (f"{_at(line_of(found.start()))}'{shown}' {what}, which a graded kernel may not do; remove it.")
    return ""


#: The macro only the emulator defines (its prelude), for the book's own headers.
EMULATOR_MACRO = "DLK_EMULATOR"


def asks_for_the_emulator(device_pass: Preprocessed, emulated: Preprocessed) -> str:
    """'' if the source preprocesses alike with and without the emulator's own macro, else one sentence (at the
    first student line that differs): a kernel that computes one thing on the emulator and another on a GPU
    would be graded for what the GPU never runs."""
    # each was preprocessed in a folder of its own: the student's file is named alike before comparing
    plain = device_pass.text.replace(device_pass.student_file, "kernel.cu").splitlines()
    emulated_lines = emulated.text.replace(emulated.student_file, "kernel.cu").splitlines()
    if plain == emulated_lines:
        return ""
    origins = _line_origins(emulated.text, emulated.student_file)
    differs = next((i for i, (a, b) in enumerate(zip(plain, emulated_lines)) if a != b), None)
    line = origins[differs] if differs is not None and differs < len(origins) else None
    return (f"{_at(line)}the source compiles differently where {EMULATOR_MACRO} is defined (the CPU emulator's own "
            f"macro): a graded kernel must be the same kernel on the emulator and on a GPU; remove that test.")


#: The preprocessor's questions about which headers exist: answered from the emulator's include path on the
#: emulator and from the CUDA toolkit's by nvcc (``"prelude.h"`` is found only by the one, ``<cuda/std/...>`` only
#: by the other), so a kernel that asks them can be one kernel when graded without a GPU and another on one.
HEADER_QUESTIONS = ("__has_include", "__has_include_next")
_IDENTIFIER_PIECE = re.compile(r"[A-Za-z_0-9]+")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _assembled(name: str, pieces: set[str]) -> bool:
    """Whether ``name`` is two or more of ``pieces`` pasted together (``##``)."""
    ends = {0: 0}  # position in name -> fewest pieces that reach it
    for start in range(len(name)):
        if start not in ends:
            continue
        for piece in pieces:
            if piece and name.startswith(piece, start):
                end = start + len(piece)
                ends[end] = min(ends.get(end, end + 1), ends[start] + 1)
    return ends.get(len(name), 0) >= 2


def asks_which_headers_exist(source: str) -> str:
    """'' if the source never asks whether a header exists, else one sentence at the student's line: by name,
    through a macro (the name appears in its definition) or pasted from pieces (``CAT(__has_, include)``)."""
    spliced_at: list[int] = []  # offsets in the spliced text where a backslash-newline was removed

    def splice(m: re.Match) -> str:
        spliced_at.append(m.start() - 2 * len(spliced_at))
        return ""

    text = re.sub(r"\\\r?\n", splice, source)
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)

    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1 + bisect.bisect_right(spliced_at, offset)

    found = next((m for m in _IDENTIFIER_PIECE.finditer(text) if m.group(0) in HEADER_QUESTIONS), None)
    if found is None and ("##" in text or "%:%:" in text):
        pieces = {m.group(0) for m in _IDENTIFIER_PIECE.finditer(text)}
        if any(_assembled(name, pieces) for name in HEADER_QUESTIONS):
            found = re.search(r"##|%:%:", text)
    if found is None:
        return ""
    return (f"{_at(line_of(found.start()))}the source asks whether a header exists (__has_include), which the CPU "
            f"emulator and nvcc answer from different folders: a graded kernel must be the same kernel on both; "
            f"remove that test (a kernel may include only the CUDA and C headers it needs, without asking).")


def check_source(source: str) -> str:
    """'' if ``source`` may be compiled for grading, else one sentence (at the student's line) saying why not.

    Asked of the preprocessed source under both ways it is compiled (emulator and
    nvcc's device pass), and of the difference the emulator's own macro makes.
    """
    cxx = emulator_build.compiler()
    problem = asks_which_headers_exist(source)
    if problem:
        return problem
    device_pass = None
    for extra in CONFIGURATIONS:
        device_pass = preprocess(source, extra)
        problem = check_preprocessed(device_pass, cxx)
        if problem:
            return problem
    return asks_for_the_emulator(device_pass, preprocess(source, CONFIGURATIONS[-1] + (f"-D{EMULATOR_MACRO}=1",)))
