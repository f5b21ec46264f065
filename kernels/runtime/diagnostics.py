"""Turn a compiler's log into a message a reader can act on.

nvcc writes ``vector_add.cu(12): error: identifier "x" is undefined`` and g++
writes ``vector_add.cu:12:5: error: ...``.  Both name the reader's own file
and lines (the backends compile with ``#line`` directives so that they do);
this module adds the quoted source line under each diagnostic.  Errors come
before warnings, and an error that names no line of the reader's file (the
assembler's, ``ptxas error : ...``) is shown as the compiler wrote it, so that
a warning is never all a failed compile shows.
"""

from __future__ import annotations

import re

# name(12): error: ...      (nvcc)       name:12:5: error: ...   (gcc, clang)
_LOCATION = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::(?P<col>\d+))?):\s*(?P<rest>.*)$")
_KIND = re.compile(r"(?:fatal )?(error|warning)")
# what a tool says without a location: "ptxas error   : ...", "nvcc fatal   : ...", "ptxas warning : ..."
_UNLOCATED = re.compile(r"^[A-Za-z][\w+-]*\s+(?P<kind>error|fatal|warning)\s*:", re.I)


def quote_source_lines(log: str, source: str, source_name: str, max_messages: int = 12,
                       kinds: tuple[str, ...] = ("error", "warning")) -> str:
    """Return the compiler messages of ``kinds`` about ``source_name``, errors first, each followed by
    the line it names."""
    lines = source.splitlines()
    found = []
    for raw in log.splitlines():
        m = _LOCATION.match(raw.strip())
        if not m or not m.group("file").endswith(source_name.split("/")[-1]):
            continue
        rest = m.group("rest")
        kind = _KIND.match(rest)
        if not kind or kind.group(1) not in kinds:
            continue
        found.append((kind.group(1) != "error", int(m.group("l1") or m.group("l2")), m.group("col"), rest))
    found.sort(key=lambda message: message[0])  # errors first, each kind in the compiler's order
    out: list[str] = []
    for shown, (_, line_no, col, rest) in enumerate(found):
        if shown == max_messages:
            out.append("  ... (more messages in the full compiler log: error.log)")
            break
        out.append(f"{source_name}:{line_no}: {rest}")
        if 1 <= line_no <= len(lines):
            out.append(f"  {line_no:4d} | {lines[line_no - 1]}")
            if col and col.isdigit():
                out.append("       | " + " " * (int(col) - 1) + "^")
    return "\n".join(out)


def _unlocated(log: str, kinds: tuple[str, ...]) -> list[str]:
    """The log's lines of ``kinds`` ("error" takes "fatal" in) that name no file and line."""
    wanted = set(kinds) | ({"fatal"} if "error" in kinds else set())
    return [raw.strip() for raw in log.splitlines()
            if (m := _UNLOCATED.match(raw.strip())) and m.group("kind").lower() in wanted]


def compile_error_message(log: str, source: str, source_name: str, compiler: str) -> str:
    errors = quote_source_lines(log, source, source_name, kinds=("error",))
    if not errors:
        errors = "\n".join(_unlocated(log, ("error",))) or "\n".join(log.strip().splitlines()[-20:])
    warned = quote_source_lines(log, source, source_name, kinds=("warning",))
    return f"{source_name} did not compile ({compiler}):\n{errors}" + (f"\n{warned}" if warned else "")


def compile_warning_message(log: str, source: str, source_name: str, compiler: str) -> str:
    """What the compiler said about a source that compiled: its warnings at the reader's lines, and the
    assembler's (register spills, say) as written."""
    said = "\n".join(part for part in (quote_source_lines(log, source, source_name, kinds=("warning",)),
                                       "\n".join(_unlocated(log, ("warning",)))) if part)
    return f"{source_name} compiled, with warnings ({compiler}):\n{said or log.strip()}"
