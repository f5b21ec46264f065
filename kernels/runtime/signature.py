"""Read the parameter lists of ``__global__`` functions from CUDA C source.

The runtime checks every launch against the kernel's own declaration: the
number of arguments, the dtype an array must have for a ``float*``, the C type
a Python number is converted to.  Both backends use the parsed signatures; the
emulator also generates its launch trampolines from them.

This is a small parser for the declarations kernels are written with, not a C
parser: it understands qualifiers (``const``, ``__restrict__``), pointer
parameters, the scalar and vector types of CUDA C, ``__launch_bounds__``,
``extern "C"`` and object-like ``#define`` s used as type names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import KernelCompileError

# C type (with qualifiers and ``signed`` removed, words joined by one space)
# -> (NumPy dtype of one scalar, number of scalars per element).
_SCALAR_TYPES: dict[str, tuple[str, int]] = {
    "float": ("float32", 1),
    "double": ("float64", 1),
    "int": ("int32", 1),
    "unsigned int": ("uint32", 1),
    "unsigned": ("uint32", 1),
    "short": ("int16", 1),
    "unsigned short": ("uint16", 1),
    "char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "long": ("int64", 1),
    "unsigned long": ("uint64", 1),
    "long long": ("int64", 1),
    "long long int": ("int64", 1),
    "unsigned long long": ("uint64", 1),
    "unsigned long long int": ("uint64", 1),
    "int8_t": ("int8", 1),
    "uint8_t": ("uint8", 1),
    "int16_t": ("int16", 1),
    "uint16_t": ("uint16", 1),
    "int32_t": ("int32", 1),
    "uint32_t": ("uint32", 1),
    "int64_t": ("int64", 1),
    "uint64_t": ("uint64", 1),
    "int64": ("int64", 1),
    "size_t": ("uint64", 1),
    "ptrdiff_t": ("int64", 1),
}
for _base, _dtype in (("float", "float32"), ("double", "float64"), ("int", "int32"), ("uint", "uint32")):
    for _n in (1, 2, 3, 4):
        _SCALAR_TYPES[f"{_base}{_n}"] = (_dtype, _n)
_SCALAR_TYPES.update({
    "uint": ("uint32", 1),
    "ushort": ("uint16", 1),
    "uchar": ("uint8", 1),
    # cuda_fp16.h / cuda_bf16.h: NumPy float16, and ml_dtypes' bfloat16
    "half": ("float16", 1),
    "__half": ("float16", 1),
    "half2": ("float16", 2),
    "__half2": ("float16", 2),
    "__nv_bfloat16": ("bfloat16", 1),
    "nv_bfloat16": ("bfloat16", 1),
    "__nv_bfloat162": ("bfloat16", 2),
    "nv_bfloat162": ("bfloat16", 2),
})


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes  # registers bfloat16 with NumPy

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "signed", "struct", "__grid_constant__"}


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter."""

    name: str
    c_type: str  # base type as written, e.g. "float", "float4", "int64_t"
    dtype: np.dtype  # dtype of one scalar of the base type
    lanes: int  # scalars per element (4 for float4)
    is_pointer: bool
    is_const: bool  # for pointers: the pointee is const (an input)
    is_reference: bool = False  # a const T& scalar: passed by the address of a copy of the value

    def describe(self) -> str:
        const = "const " if self.is_const and (self.is_pointer or self.is_reference) else ""
        star = "*" if self.is_pointer else "&" if self.is_reference else ""
        return f"{const}{self.c_type}{star} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function: its name, parameters and the line it starts on."""

    name: str
    params: tuple[Parameter, ...]
    line: int

    def describe(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


def strip_comments(source: str) -> str:
    """Blank out comments and string literals, keeping every newline (and so line numbers)."""

    def blank(match: re.Match) -> str:
        text = match.group(0)
        if text.startswith('"') or text.startswith("'"):
            return text[0] + re.sub(r"[^\n]", " ", text[1:-1]) + text[-1]
        return re.sub(r"[^\n]", " ", text)

    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    return re.sub(pattern, blank, source, flags=re.S)


def _object_macros(source: str, defines: dict[str, str]) -> dict[str, str]:
    macros = dict(defines)
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n\\]+)$", source, re.M):
        macros.setdefault(m.group(1), m.group(2).strip())
    # type aliases: typedef float Dtype; using Dtype = float;
    for m in re.finditer(r"\btypedef\s+([A-Za-z_][\w\s:]*?)\s+([A-Za-z_]\w*)\s*;", source):
        macros.setdefault(m.group(2), " ".join(m.group(1).split()))
    for m in re.finditer(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([A-Za-z_][\w\s:]*?)\s*;", source):
        macros.setdefault(m.group(1), " ".join(m.group(2).split()))
    return macros


def _matching_paren(text: str, open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _parse_parameter(text: str, macros: dict[str, str], kernel: str, source_name: str, line: int) -> Parameter:
    original = " ".join(text.split())
    # Expand object-like macros used as type names (a few rounds for chains).
    for _ in range(4):
        text = re.sub(r"[A-Za-z_]\w*", lambda m: macros.get(m.group(0), m.group(0)) if m.group(0) in macros else m.group(0), text)
    text = re.sub(r"([A-Za-z_]\w*)\s*\[\s*\]", r"* \1", text)  # float x[] == float* x
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    tokens = re.findall(r"[A-Za-z_]\w*(?:::\w+)*|\*|&", text)
    if not tokens:
        raise KernelCompileError(f"{source_name}:{line}: cannot read parameter '{original}' of kernel {kernel}", source_name=source_name)
    name = tokens[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", name) or name in _QUALIFIERS or name in _SCALAR_TYPES:
        raise KernelCompileError(
            f"{source_name}:{line}: parameter '{original}' of kernel {kernel} needs a name", source_name=source_name
        )
    type_tokens = tokens[:-1]
    is_reference = "&" in type_tokens
    if is_reference and ("const" not in type_tokens or "*" in type_tokens or type_tokens.count("&") > 1):
        raise KernelCompileError(
            f"{source_name}:{line}: kernel {kernel} takes '{original}' by non-const reference; kernels take values, "
            f"pointers and const references (const T&) only",
            source_name=source_name,
        )
    type_tokens = [t for t in type_tokens if t != "&"]
    stars = type_tokens.count("*")
    if stars > 1:
        raise KernelCompileError(
            f"{source_name}:{line}: parameter '{original}' of kernel {kernel} is a pointer to a pointer, which cannot be passed from NumPy",
            source_name=source_name,
        )
    is_pointer = stars == 1
    if is_pointer:
        star = type_tokens.index("*")
        pointee_const = "const" in type_tokens[:star]
    else:
        pointee_const = "const" in type_tokens
    base_words = [t.split("::")[-1] for t in type_tokens if t != "*" and t not in _QUALIFIERS]
    base = " ".join(base_words)
    if base not in _SCALAR_TYPES:
        raise KernelCompileError(
            f"{source_name}:{line}: parameter '{original}' of kernel {kernel} has type '{base}', "
            f"which the runtime cannot pass (use one of float, double, int, unsigned, int64_t, float2, float4, ... or pointers to them)",
            source_name=source_name,
        )
    dtype, lanes = _SCALAR_TYPES[base]
    return Parameter(name, base, _dtype(dtype), lanes, is_pointer, pointee_const, is_reference)


def parse_kernels(source: str, source_name: str = "kernel.cu", defines: dict[str, str] | None = None) -> dict[str, KernelSignature]:
    """Return the ``__global__`` functions defined in ``source`` by name.

    Declarations without a body (prototypes) are skipped; templates are
    skipped too, since a kernel launched by name must be ``extern "C"``.
    """
    clean = strip_comments(source)
    macros = _object_macros(clean, {k: str(v) for k, v in (defines or {}).items()})
    line_of = None
    if _kernel_made_by_macro(clean):
        expanded = _preprocess(clean, defines or {})
        if expanded is not None:
            clean, line_of = expanded
    kernels: dict[str, KernelSignature] = {}
    for m in re.finditer(r"\b__global__\b", clean):
        # Skip templates: look back for 'template <...>' right before.
        before = clean[max(0, m.start() - 200) : m.start()]
        if re.search(r"template\s*<[^;{}]*>\s*$", before):
            continue
        head = re.match(
            r"\s*(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?(?:inline\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(",
            clean[m.end() :],
        )
        if head is None:
            continue
        name = head.group(1)
        open_index = m.end() + head.end() - 1
        close_index = _matching_paren(clean, open_index)
        if close_index < 0:
            continue
        after = clean[close_index + 1 :].lstrip()
        if after.startswith(";"):
            continue  # a prototype
        line = clean.count("\n", 0, m.start()) + 1
        if line_of is not None:
            line = line_of[min(line, len(line_of)) - 1]
        param_text = clean[open_index + 1 : close_index].strip()
        params: list[Parameter] = []
        if param_text and param_text != "void":
            depth = 0
            current = ""
            pieces = []
            for ch in param_text:
                if ch in "(<[":
                    depth += 1
                elif ch in ")>]":
                    depth -= 1
                if ch == "," and depth == 0:
                    pieces.append(current)
                    current = ""
                else:
                    current += ch
            pieces.append(current)
            for piece in pieces:
                params.append(_parse_parameter(piece, macros, name, source_name, line))
        if name in kernels:
            raise KernelCompileError(f"{source_name}:{line}: kernel {name} is defined twice", source_name=source_name)
        kernels[name] = KernelSignature(name, tuple(params), line)
    return kernels


def _kernel_made_by_macro(clean: str) -> bool:
    """Is a __global__ function written inside a #define (a macro that makes kernels)?"""
    for m in re.finditer(r"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", clean, re.M):
        if "__global__" in m.group(0):
            return True
    return False


def _preprocess(clean: str, defines: dict[str, str]) -> tuple[str, list[int]] | None:
    """The source with its macros expanded by the C preprocessor (its #include lines left out: only
    the kernels' own text matters here), and the source line of each line of the result."""
    import os
    import subprocess

    text = re.sub(r"^[ \t]*#[ \t]*include\b[^\n]*", "", clean, flags=re.M)
    cmd = [os.environ.get("CXX", "g++"), "-E", "-x", "c++", "-D__CUDACC__=1",
           *(f"-D{k}={v}" for k, v in defines.items()), "-"]
    try:
        result = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    lines: list[str] = []
    line_of: list[int] = []
    current, in_source = 1, False
    for row in result.stdout.splitlines():
        marker = re.match(r'^# (\d+) "([^"]*)"', row)
        if marker:
            current, in_source = int(marker.group(1)), marker.group(2) == "<stdin>"
            continue
        lines.append(row if in_source else "")
        line_of.append(current)
        current += 1
    return "\n".join(lines), line_of


def _split_top(text: str) -> list[str]:
    pieces, depth, current = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            pieces.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        pieces.append(current)
    return [p.strip() for p in pieces]


def template_instance(source: str, request: str, source_name: str = "kernel.cu",
                      defines: dict[str, str] | None = None) -> KernelSignature | None:
    """The signature of one instantiation of a template kernel, e.g. ``"sgemm<64, 64, 8>"`` or
    ``"scale<float>"`` (template arguments left out take their defaults); None if ``source`` has no
    template ``__global__`` function of that name."""
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*<(.*)>\s*", request, re.S)
    if not m:
        return None
    base, args = m.group(1), _split_top(m.group(2))
    clean = strip_comments(source)
    macros = _object_macros(clean, {k: str(v) for k, v in (defines or {}).items()})
    pattern = (r"\btemplate\s*<(?P<tparams>[^;{}]*?)>\s*__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
               r"(?:__launch_bounds__\s*\([^)]*\)\s*)?" + re.escape(base) + r"\s*\(")
    for t in re.finditer(pattern, clean):
        open_index = t.end() - 1
        close_index = _matching_paren(clean, open_index)
        if close_index < 0 or clean[close_index + 1 :].lstrip().startswith(";"):
            continue
        tparams = _split_top(t.group("tparams"))
        if len(args) > len(tparams):
            raise KernelCompileError(
                f"{source_name}: {request} gives {len(args)} template arguments; {base} takes {len(tparams)}",
                source_name=source_name)
        local = dict(macros)
        shown = []
        for k, tp in enumerate(tparams):
            head, _, default = tp.partition("=")
            words = head.split()
            if not words:
                continue
            value = args[k] if k < len(args) else default.strip()
            if not value:
                raise KernelCompileError(f"{source_name}: {request} leaves template parameter '{head.strip()}' of "
                                         f"{base} without a value", source_name=source_name)
            if words[0] in ("typename", "class"):
                local[words[-1]] = value
            shown.append(" ".join(value.split()))
        line = clean.count("\n", 0, t.start()) + 1
        name = f"{base}<{', '.join(shown)}>"
        param_text = clean[open_index + 1 : close_index].strip()
        params = tuple(_parse_parameter(p, local, name, source_name, line)
                       for p in _split_top(param_text) if param_text and param_text != "void")
        return KernelSignature(name, params, line)
    return None
