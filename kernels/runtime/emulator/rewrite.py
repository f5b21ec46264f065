"""Turn a reader's CUDA C source into a C++ translation unit for g++.

Most of CUDA C compiles as C++ once the prelude (``prelude.h``) defines the
built-ins.  What a header cannot do is done here, textually, keeping every
line where it was (``#line`` directives make g++ and AddressSanitizer speak
of the reader's file and line numbers):

* ``__shared__ T name[N];`` becomes ``static T name[N]; DLK_SHARED(name, line);``:
  one array per block (blocks run one at a time), poisoned the first time a
  thread of each block reaches it, and an ordinary global to AddressSanitizer
  (so an overrun is a global-buffer-overflow with the line).
* ``extern __shared__ T name[];`` becomes a pointer to the END of a static
  arena, sized by the launch's shared-memory bytes, so overruns hit a redzone.
* ``__constant__`` and ``__device__`` variables at file scope are listed in a
  table, so that Python can set and read them by name.
* After the source come the generated launch trampolines: one per
  ``__global__`` function, unpacking an argument array into its parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..signature import KernelSignature, split_top_level, strip_comments

GENERATED_NAME = "<emulator-generated>"

_IDENT = r"[A-Za-z_]\w*"


@dataclass
class TranslationUnit:
    text: str  # the whole translation unit handed to g++
    variables: list[tuple[str, bool]] = field(default_factory=list)  # (name, writable)
    shared_arrays: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)


def _brace_kinds(clean: str) -> list[tuple[int, int, str]]:
    """(open, close, kind) for every brace pair; kind is "namespace", "extern" (extern "C" {}) or "code"."""
    pairs = []
    stack: list[tuple[int, str]] = []
    last_stop = 0
    for i, ch in enumerate(clean):
        if ch == "{":
            head = clean[last_stop:i]
            if re.search(r"\bnamespace\b[\s\w:]*$", head):
                kind = "namespace"
            elif re.search(r'\bextern\s*"C"\s*$', head):
                kind = "extern"
            else:
                kind = "code"
            stack.append((i, kind))
            last_stop = i + 1
        elif ch == "}":
            if stack:
                start, kind = stack.pop()
                pairs.append((start, i, kind))
            last_stop = i + 1
        elif ch == ";":
            last_stop = i + 1
    return pairs


def _qualified_kernel_names(clean: str, pairs: list[tuple[int, int, str]]) -> dict[str, str]:
    """``name -> ns::inner::name`` for each __global__ function defined inside named namespaces."""
    names: dict[str, str] = {}
    for m in re.finditer(rf"\b__global__\b[^;{{}}(]*?\b({_IDENT})\s*\(", clean):
        path = []
        for start, end, kind in sorted(pairs):
            if kind == "namespace" and start < m.start() < end:
                head = clean[max(0, start - 200) : start]
                ns = re.search(r"\bnamespace\s+([\w:]+)?\s*$", head)
                if ns and ns.group(1):
                    path.append(ns.group(1))
        if path:
            names[m.group(1)] = "::" + "::".join(path + [m.group(1)])
    return names


def _in_function(pos: int, pairs: list[tuple[int, int, str]]) -> bool:
    return any(start < pos < end and kind == "code" for start, end, kind in pairs)


def _in_namespace(pos: int, pairs: list[tuple[int, int, str]]) -> bool:
    return any(start < pos < end and kind == "namespace" for start, end, kind in pairs)


def _declarator_name(piece: str) -> str | None:
    """Name declared by ``float tile[16][17]`` / ``*p`` / ``x = 3``."""
    head = re.split(r"[\[=]", piece, maxsplit=1)[0]
    names = re.findall(_IDENT, head)
    return names[-1] if names else None


def _statement_bounds(clean: str, pos: int) -> tuple[int, int]:
    """Start and end (index of ';') of the declaration statement around ``pos``."""
    start = pos
    while start > 0 and clean[start - 1] not in ";{}":
        start -= 1
    # do not swallow a preprocessor line that ends right before the declaration
    directive = None
    for m in re.finditer(r"^[ \t]*#[^\n]*\n", clean[start:pos], re.M):
        directive = m
    if directive is not None:
        start = start + directive.end()
    end = clean.find(";", pos)
    return start, end


def _keep_lines(original: str, replacement: str) -> str:
    return replacement + "\n" * original.count("\n")


# CUDA's __noinline__ as the GCC attribute (not inside an __attribute__((...)) the reader wrote).
_NOINLINE = re.compile(r"(?<!\(\()\b__noinline__\b")


def rewrite(source: str, source_name: str, signatures: dict[str, KernelSignature]) -> TranslationUnit:
    source = _NOINLINE.sub("__attribute__((noinline))", source)
    clean = strip_comments(source)
    pairs = _brace_kinds(clean)
    edits: list[tuple[int, int, str]] = []
    unit = TranslationUnit(text="")
    file_shared: list[str] = []

    for m in re.finditer(r"\b__shared__\b", clean):
        # skip #define lines, continued ones too (a macro that expands to __shared__ stays unchecked)
        line_start = clean.rfind("\n", 0, m.start()) + 1
        while line_start > 1 and clean[line_start - 2] == "\\":
            line_start = clean.rfind("\n", 0, line_start - 1) + 1
        if re.match(r"[ \t]*#", clean[line_start:]):
            continue
        start, end = _statement_bounds(clean, m.start())
        if end < 0 or any(s <= m.start() < e for s, e, _ in edits):
            continue
        before = clean[start : m.start()]
        after = clean[m.end() : end]
        line = clean.count("\n", 0, m.start()) + 1
        original = source[start : end + 1]
        in_function = _in_function(m.start(), pairs)
        prefix_words = before.split()
        is_extern = "extern" in prefix_words
        qualifiers = " ".join(w for w in before.replace("extern", " ").replace("static", " ").split())
        if is_extern:
            name = _declarator_name(after)
            if not name:
                continue
            head = after[: after.rfind(name)].strip()
            type_text = f"{qualifiers} {head}".strip()
            if in_function:
                text = f"{type_text}* const {name} = ({type_text}*)__dlk_dynamic_shared();"
            else:
                text = f'static {type_text}* {name} = ({type_text}*)__dlk_dynamic_shared_register((void**)&{name}, "{name}");'
            edits.append((start, end + 1, _keep_lines(original, text)))
            continue
        pieces = split_top_level(after)
        first = _declarator_name(pieces[0])
        if not first:
            continue
        name_at = re.search(rf"\b{first}\b(?!.*\b{first}\b)", re.split(r"[\[=]", pieces[0], maxsplit=1)[0])
        base_type = pieces[0][: name_at.start()].strip() if name_at else ""
        out = []
        for k, piece in enumerate(pieces):
            name = _declarator_name(piece)
            if not name:
                continue
            declarator = piece[name_at.start():].strip() if k == 0 and name_at else piece.strip()
            out.append(f"static {qualifiers} {base_type} {' '.join(declarator.split())};".replace("  ", " "))
            if in_function:
                out.append(f"DLK_SHARED({name}, {line});")
            elif not _in_namespace(m.start(), pairs):
                file_shared.append(name)
        edits.append((start, end + 1, _keep_lines(original, " ".join(out))))
        unit.shared_arrays.extend(_declarator_name(p) or "" for p in pieces)

    # __constant__ / __device__ variables at file scope
    for m in re.finditer(
        rf"\b(__constant__|__device__)\b([^;{{}}()=]*?)\b({_IDENT})\s*((?:\[[^\]]*\]\s*)*)(=[^;]*)?;", clean
    ):
        if _in_function(m.start(), pairs) or _in_namespace(m.start(), pairs):
            continue
        decl_start, _ = _statement_bounds(clean, m.start())
        if "extern" in clean[decl_start : m.start()].split() or "extern" in m.group(2).split():
            continue
        if re.search(r"\b(__shared__|typedef|using)\b", clean[decl_start : m.end()]):
            continue
        name = m.group(3)
        words = clean[decl_start : m.end()].split()
        writable = m.group(1) == "__device__" and "__constant__" not in words and "const" not in words
        if name not in (v for v, _ in unit.variables):
            unit.variables.append((name, writable))

    text = source
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]

    quoted = source_name.replace("\\", "\\\\").replace('"', '\\"')
    tail = [f'#line 1 "{GENERATED_NAME}"']
    entries = []
    qualified = _qualified_kernel_names(clean, pairs)
    for index, sig in enumerate(signatures.values()):
        args = ", ".join(
            f"__dlk_pointer_arg{{(void* const*)a[{i}]}}" if p.is_pointer else f"__dlk_scalar_arg{{a[{i}]}}"
            for i, p in enumerate(sig.params)
        )
        base = sig.name.split("<", 1)[0]  # a template instantiation: name<args>
        # the namespaces as clang resolved them (a signature made by hand has none: found in the text then)
        callee = sig.qualified_name if sig.namespace else qualified.get(base, base) + sig.name[len(base):]
        tail.append(f"static void __dlk_launch_{index}(void* const* a) {{ (void)a; {callee}({args}); }}")
        entries.append(f'{{"{sig.name}", __dlk_launch_{index}}}')
        unit.kernels.append(sig.name)
    tail.append('extern "C" const __dlk_kernel_entry __dlk_kernels[] = {' + "".join(e + ", " for e in entries) + "{0, 0}};")

    def variable_entry(name: str, writable: bool) -> str:
        return (
            f'{{"{name}", (void*)&{name}, sizeof({name}), '
            f"sizeof(typename __dlk_base<decltype({name})>::type), {int(writable)}}}"
        )

    tail.append(
        'extern "C" const __dlk_variable_entry __dlk_variables[] = {'
        + "".join(variable_entry(n, w) + ", " for n, w in unit.variables)
        + "{0, 0, 0, 0, 0}};"
    )
    tail.append(
        'extern "C" const __dlk_variable_entry __dlk_file_shared[] = {'
        + "".join(variable_entry(n, True) + ", " for n in file_shared)
        + "{0, 0, 0, 0, 0}};"
    )
    unit.text = (
        '#include "prelude.h"\n'
        f'#line 1 "{quoted}"\n'
        + text
        + ("" if text.endswith("\n") else "\n")
        + "\n".join(tail)
        + "\n"
    )
    return unit
