"""Turn a compiler's log into a message a reader can act on.

nvcc writes ``vector_add.cu(12): error: identifier "x" is undefined`` and g++
writes ``vector_add.cu:12:5: error: ...``.  Both name the reader's own file
and lines (the backends compile with ``#line`` directives so that they do);
this module adds the quoted source line under each diagnostic.
"""

from __future__ import annotations

import re

# name(12): error: ...      (nvcc)       name:12:5: error: ...   (gcc, clang)
_LOCATION = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::(?P<col>\d+))?):\s*(?P<rest>.*)$")


def quote_source_lines(log: str, source: str, source_name: str, max_messages: int = 12) -> str:
    """Return the compiler messages about ``source_name``, each followed by the line it names."""
    lines = source.splitlines()
    out: list[str] = []
    shown = 0
    for raw in log.splitlines():
        m = _LOCATION.match(raw.strip())
        if not m or not m.group("file").endswith(source_name.split("/")[-1]):
            continue
        rest = m.group("rest")
        if not re.match(r"(fatal )?(error|warning)", rest):
            continue
        line_no = int(m.group("l1") or m.group("l2"))
        col = m.group("col")
        out.append(f"{source_name}:{line_no}: {rest}")
        if 1 <= line_no <= len(lines):
            text = lines[line_no - 1]
            out.append(f"  {line_no:4d} | {text}")
            if col and col.isdigit():
                out.append("       | " + " " * (int(col) - 1) + "^")
        shown += 1
        if shown >= max_messages:
            out.append("  ... (more messages in the full compiler log: error.log)")
            break
    return "\n".join(out)


def compile_error_message(log: str, source: str, source_name: str, compiler: str) -> str:
    quoted = quote_source_lines(log, source, source_name)
    if quoted:
        return f"{source_name} did not compile ({compiler}):\n{quoted}"
    tail = "\n".join(log.strip().splitlines()[-20:])
    return f"{source_name} did not compile ({compiler}):\n{tail}"
