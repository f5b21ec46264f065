"""Read the parameter lists of ``__global__`` functions from CUDA C source.

The runtime checks every launch against the kernel's own declaration: the
number of arguments, the dtype an array must have for a ``float*``, the C type
a Python number is converted to.  Both backends use the parsed signatures; the
emulator also generates its launch trampolines from them.

The declarations are read by clang (:mod:`.frontend`), after preprocessing and
with C++'s own name lookup: typedefs and ``using`` aliases, macros (object- and
function-like), namespaces, ``const T&``, template instantiations and structs
are understood as nvcc understands them.  This module maps clang's types to
what the runtime passes: a NumPy dtype, a number of lanes (``float4``), and for
a struct or vector type taken by value its layout as a structured dtype.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from . import frontend
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
    # a struct or vector type taken by value: its layout (field offsets and size as nvcc lays it out)
    record: np.dtype | None = None
    align: int = 0  # its alignment in bytes (of the value; pointers and references are 8)

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
    namespace: tuple[str, ...] = ()  # the namespaces it is defined in, outermost first (as clang resolved them)
    # its name in a compiled module as clang mangles it (``_Z10vector_addPKfS0_Pfi``; the plain name for an
    # extern "C" kernel); empty for a signature made by hand
    symbol: str = ""

    @property
    def qualified_name(self) -> str:
        """``nn::kernel`` (``nn::kernel<float>`` for an instantiation), as named from the global scope.

        (No leading ``::``: after ``decltype(...)`` it would be read as a member of the decltype.)"""
        return "::".join(self.namespace + (self.name,))

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


def _error(source_name: str, line: int, text: str) -> KernelCompileError:
    return KernelCompileError(f"{source_name}:{line}: {text}", source_name=source_name)


_BUILTINS = {  # clang's canonical builtin kinds -> the C name the runtime shows
    "FLOAT": "float", "DOUBLE": "double", "INT": "int", "UINT": "unsigned int", "SHORT": "short",
    "USHORT": "unsigned short", "CHAR_S": "char", "SCHAR": "char", "UCHAR": "unsigned char",
    "CHAR_U": "unsigned char", "BOOL": "bool", "LONG": "long", "ULONG": "unsigned long",
    "LONGLONG": "long long", "ULONGLONG": "unsigned long long",
}


class _Unsupported(Exception):
    """A type the runtime cannot pass (the message names it)."""


def _peel(t):
    """``t`` without sugar that carries no name: elaborated (``struct P``), substituted template
    parameters, ``decltype``."""
    from clang.cindex import TypeKind

    while True:
        if t.kind == TypeKind.ELABORATED:
            t = t.get_named_type()
        elif t.kind in (TypeKind.UNEXPOSED, TypeKind.AUTO):
            canonical = t.get_canonical()
            if canonical == t:
                return t
            t = canonical
        else:
            return t


def _unqualified_name(spelling: str) -> str:
    words = [w for w in spelling.replace("*", " ").split() if w not in _QUALIFIERS]
    return " ".join(words).split("::")[-1]


def _base_type(t) -> tuple[str, np.dtype, int, np.dtype | None]:
    """``(c_type, dtype of one scalar, lanes, by-value layout)`` of a parameter's base type.

    Typedefs are followed until a name the runtime knows (``half``, ``float4``, ``int64_t``) or a
    builtin or a struct; structs get a NumPy structured dtype with clang's (nvptx64's) layout.
    """
    from clang.cindex import TypeKind

    for _ in range(64):
        t = _peel(t)
        if t.kind == TypeKind.TYPEDEF:
            name = _unqualified_name(t.get_typedef_name() or t.spelling)
            if name in _SCALAR_TYPES:
                return _known(name, t)
            t = t.get_declaration().underlying_typedef_type
            continue
        if t.kind == TypeKind.RECORD:
            name = t.get_declaration().spelling
            if name in _SCALAR_TYPES:
                return _known(name, t)
            if t.get_declaration().kind.name != "STRUCT_DECL" and t.get_declaration().kind.name != "CLASS_DECL":
                raise _Unsupported(_unqualified_name(t.spelling))
            layout = _record_layout(t)
            if "<" in t.spelling:  # a struct template's instance: Range<float>
                head, _, arguments = t.spelling.partition("<")
                name = f"{head.split('::')[-1]}<{arguments}"
            return name or _unqualified_name(t.spelling), layout, 1, layout
        if t.kind.name in _BUILTINS:
            name = _BUILTINS[t.kind.name]
            if t.kind.name in ("LONG", "ULONG") and t.get_size() == 4:
                name = name.replace("long", "int")
            return _known(name, t)
        raise _Unsupported(_unqualified_name(t.spelling))
    raise _Unsupported(_unqualified_name(t.spelling))


def _known(name: str, t) -> tuple[str, np.dtype, int, np.dtype | None]:
    dtype_name, lanes = _SCALAR_TYPES[name]
    dtype = _dtype(dtype_name)
    record = None
    if lanes > 1:  # float4 by value: x, y, z, w at nvcc's alignment
        size = t.get_canonical().get_size()
        fields = "xyzw"[:lanes]
        record = np.dtype({"names": list(fields), "formats": [dtype] * lanes,
                           "offsets": [k * dtype.itemsize for k in range(lanes)], "itemsize": size})
    return name, dtype, lanes, record


def _field_dtype(t):
    from clang.cindex import TypeKind

    t = _peel(t)
    if t.kind == TypeKind.CONSTANTARRAY:
        element = _field_dtype(t.element_type)
        return np.dtype((element, (t.element_count,)))
    _, dtype, lanes, record = _base_type(t)
    return record if record is not None else dtype


def _record_layout(t) -> np.dtype:
    """A NumPy structured dtype with the struct's fields at clang's offsets and its size."""
    names, formats, offsets = [], [], []
    for field in t.get_fields():
        if field.is_bitfield():
            raise _Unsupported(f"{t.spelling} (it has bit fields)")
        names.append(field.spelling)
        formats.append(_field_dtype(field.type))
        offsets.append(t.get_offset(field.spelling) // 8)
    if t.get_size() <= 0:
        raise _Unsupported(_unqualified_name(t.spelling))
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": t.get_size()},
                    align=False)


def _parameter(param_type, name: str, original: str, kernel: str, source_name: str, line: int) -> Parameter:
    """One kernel parameter from its clang type."""
    from clang.cindex import TypeKind

    if not name:
        raise _error(source_name, line, f"parameter '{original}' of kernel {kernel} needs a name")
    t = _peel(param_type)
    is_reference = t.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE)
    if is_reference:
        pointee = t.get_pointee()
        if t.kind == TypeKind.RVALUEREFERENCE or not pointee.get_canonical().is_const_qualified() \
                or _peel(pointee).kind == TypeKind.POINTER:
            raise _error(source_name, line, f"kernel {kernel} takes '{original}' by non-const reference; kernels take "
                                            f"values, pointers and const references (const T&) only")
        t = pointee
    is_pointer = False
    for _ in range(8):  # through typedefs of pointers
        peeled = _peel(t)
        if peeled.kind in (TypeKind.POINTER, TypeKind.INCOMPLETEARRAY, TypeKind.CONSTANTARRAY):
            break
        if peeled.kind != TypeKind.TYPEDEF or _unqualified_name(peeled.get_typedef_name()) in _SCALAR_TYPES:
            break
        t = peeled.get_declaration().underlying_typedef_type
    peeled = _peel(t)
    if peeled.kind in (TypeKind.POINTER, TypeKind.INCOMPLETEARRAY, TypeKind.CONSTANTARRAY):
        is_pointer = True
        pointee = peeled.get_pointee() if peeled.kind == TypeKind.POINTER else peeled.element_type
        if pointee.kind == TypeKind.INVALID:
            pointee = peeled.get_canonical().get_pointee()
        if _peel(pointee).get_canonical().kind in (TypeKind.POINTER, TypeKind.CONSTANTARRAY, TypeKind.INCOMPLETEARRAY):
            raise _error(source_name, line, f"parameter '{original}' of kernel {kernel} is a pointer to a pointer, "
                                            f"which cannot be passed from NumPy")
        is_const = pointee.is_const_qualified() or pointee.get_canonical().is_const_qualified()
        t = pointee
    else:
        is_const = t.is_const_qualified() or t.get_canonical().is_const_qualified()
    try:
        c_type, dtype, lanes, record = _base_type(t)
    except _Unsupported as exc:
        raise _error(source_name, line,
                     f"parameter '{original}' of kernel {kernel} has type '{exc}', which the runtime cannot pass "
                     f"(use one of float, double, int, unsigned, int64_t, float2, float4, a struct of them, "
                     f"or pointers to them)") from None
    align = 8 if is_pointer or is_reference else max(1, t.get_canonical().get_align())
    return Parameter(name, c_type, dtype, lanes, is_pointer, is_const, is_reference,
                     record=None if is_pointer else record, align=align)


def _original(param_cursor, fallback_type: str) -> str:
    text = " ".join(t.spelling for t in param_cursor.get_tokens())
    if not text or "(" in text:  # inside a macro expansion the tokens are the macro call's
        text = f"{fallback_type} {param_cursor.spelling}".strip()
    return " ".join(text.split())


def _unknown_type_error(parsed, param, kernel: str, source_name: str, line: int) -> KernelCompileError | None:
    """A parameter whose type clang did not know (``cudaTextureObject_t``): named as written."""
    if not frontend.errors_within(parsed, param):
        return None
    original = _original(param, param.type.spelling)
    words = [w for w in re.findall(r"[A-Za-z_]\w*(?:::\w+)*", original) if w not in _QUALIFIERS]
    base = " ".join(words[:-1]) if len(words) > 1 else (words[0] if words else original)
    return _error(source_name, line,
                  f"parameter '{original}' of kernel {kernel} has type '{base.split('::')[-1]}', which the runtime "
                  f"cannot pass (use one of float, double, int, unsigned, int64_t, float2, float4, a struct of them, "
                  f"or pointers to them)")


def _refuse_stray_includes(parsed, source_name: str) -> None:
    if parsed.stray_includes:
        line, _name = parsed.stray_includes[0]
        raise _error(source_name, line, "an #include split over lines (or built by a macro) cannot be read; write each "
                                        "#include on one line, as #include <name> or #include \"name\"")


def _defines_key(defines: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in (defines or {}).items())


def _line(cursor) -> int:
    return cursor.extent.start.line if cursor.extent.start.file is not None else cursor.location.line


def parse_kernels(source: str, source_name: str = "kernel.cu", defines: dict[str, str] | None = None) -> dict[str, KernelSignature]:
    """Return the ``__global__`` functions defined in ``source`` by name.

    Declarations without a body (prototypes) are skipped; templates are skipped too (they are
    asked for by instantiation, see :func:`template_instance`).
    """
    return dict(_parse_kernels(source, source_name, _defines_key(defines)))


@functools.lru_cache(maxsize=256)
def _parse_kernels(source: str, source_name: str, defines: tuple[tuple[str, str], ...]) -> tuple:
    from clang.cindex import CursorKind

    parsed = frontend.parse(source, defines)
    _refuse_stray_includes(parsed, source_name)
    kernels: dict[str, KernelSignature] = {}
    for cursor, path in frontend.kernels(parsed):
        if cursor.kind != CursorKind.FUNCTION_DECL or not cursor.is_definition():
            continue
        if cursor.get_num_template_arguments() > 0:
            continue  # an explicit specialization of a template kernel
        name = cursor.spelling
        line = _line(cursor)
        params = []
        for param in cursor.get_arguments():
            error = _unknown_type_error(parsed, param, name, source_name, line)
            if error is not None:
                raise error
            params.append(_parameter(param.type, param.spelling, _original(param, param.type.spelling),
                                     name, source_name, line))
        if name in kernels:
            raise _error(source_name, line, f"kernel {name} is defined twice")
        kernels[name] = KernelSignature(name, tuple(params), line, tuple(path), cursor.mangled_name or "")
    return tuple(kernels.items())


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """``text`` cut at each ``sep`` outside brackets: ``"a<1, 2>, f(x, y)"`` -> ``["a<1, 2>", " f(x, y)"]``."""
    pieces, depth, current = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            pieces.append(current)
            current = ""
        else:
            current += ch
    pieces.append(current)
    return pieces


def _split_top(text: str) -> list[str]:
    """Template arguments, stripped; a trailing empty one (``"a, "``) dropped."""
    pieces = split_top_level(text)
    if not pieces[-1].strip():
        pieces.pop()
    return [p.strip() for p in pieces]


def template_instance(source: str, request: str, source_name: str = "kernel.cu",
                      defines: dict[str, str] | None = None) -> KernelSignature | None:
    """The signature of one instantiation of a template kernel, e.g. ``"sgemm<64, 64, 8>"`` or
    ``"scale<float>"`` (template arguments left out take their defaults); None if ``source`` has no
    template ``__global__`` function of that name.  clang instantiates the declaration, so ``T*``
    becomes ``float*`` exactly as nvcc would have it."""
    from clang.cindex import CursorKind, TypeKind

    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*<(.*)>\s*", request, re.S)
    if not m:
        return None
    base, args = m.group(1), _split_top(m.group(2))
    key = _defines_key(defines)
    parsed = frontend.parse(source, key)
    _refuse_stray_includes(parsed, source_name)
    for cursor, path in frontend.kernels(parsed):
        if cursor.kind != CursorKind.FUNCTION_TEMPLATE or cursor.spelling != base or not cursor.is_definition():
            continue
        tparams = [c for c in cursor.get_children() if c.kind in (
            CursorKind.TEMPLATE_TYPE_PARAMETER, CursorKind.TEMPLATE_NON_TYPE_PARAMETER, CursorKind.TEMPLATE_TEMPLATE_PARAMETER)]
        if len(args) > len(tparams):
            raise KernelCompileError(
                f"{source_name}: {request} gives {len(args)} template arguments; {base} takes {len(tparams)}",
                source_name=source_name)
        shown = []
        for k, tp in enumerate(tparams):
            tokens = [t.spelling for t in tp.get_tokens()]
            default = " ".join(tokens[tokens.index("=") + 1:]) if "=" in tokens else ""
            value = args[k] if k < len(args) else default
            if not value:
                raise KernelCompileError(f"{source_name}: {request} leaves template parameter '{tp.spelling}' of "
                                         f"{base} without a value", source_name=source_name)
            shown.append(" ".join(value.split()))
        line = _line(cursor)
        name = f"{base}<{', '.join(shown)}>"
        qualified = "::" + "::".join(path + [base])
        extra = f"using __dlk_instance = decltype(&{qualified}<{', '.join(args)}>);"
        # the declaration is instantiated without the bodies: see frontend's docstring
        instance = frontend.parse(source, key, extra, skip_bodies=True)
        problems = [message for at, _, message in instance.errors if at >= instance.extra_line]
        function = _instance_type(instance)
        if function is not None and function.kind == TypeKind.FUNCTIONPROTO:
            # struct templates taken by value (Range<float>) are instantiated only when their size is asked for
            incomplete = [_value_type(t).spelling for t in function.argument_types() if _value_type(t).get_size() < 0]
            if incomplete:
                extra += "".join(f"\nstatic_assert(sizeof({t}) > 0, \"\");" for t in incomplete)
                instance = frontend.parse(source, key, extra, skip_bodies=True)
                function = _instance_type(instance)
        if problems or function is None or function.kind != TypeKind.FUNCTIONPROTO:
            raise KernelCompileError(f"{source_name}:{line}: {request} is not an instantiation of {base}: "
                                     f"{problems[0] if problems else 'clang could not instantiate it'}",
                                     source_name=source_name)
        params = []
        for param, param_type in zip(_parm_decls(cursor), function.argument_types()):
            error = _unknown_type_error(parsed, param, name, source_name, line)
            if error is not None:
                raise error
            params.append(_parameter(param_type, param.spelling, _original(param, param.type.spelling),
                                     name, source_name, line))
        return KernelSignature(name, tuple(params), line, tuple(path), _instance_symbol(instance))
    return None


def _instance_alias(parsed):
    alias = [c for c in parsed.unit.cursor.get_children() if c.spelling == "__dlk_instance"]
    return alias[0] if alias else None


def _instance_type(parsed):
    alias = _instance_alias(parsed)
    return alias.underlying_typedef_type.get_canonical().get_pointee() if alias else None


def _instance_symbol(parsed) -> str:
    """The mangled name of the function the ``__dlk_instance`` alias names (the specialization clang chose)."""
    from clang.cindex import CursorKind

    alias = _instance_alias(parsed)
    for node in alias.walk_preorder() if alias is not None else ():
        if node.kind == CursorKind.DECL_REF_EXPR and node.referenced is not None \
                and node.referenced.kind == CursorKind.FUNCTION_DECL:
            return node.referenced.mangled_name or ""
    return ""


def _value_type(t):
    """The type a parameter's value has (through a reference), canonical."""
    from clang.cindex import TypeKind

    t = t.get_canonical()
    if t.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE):
        t = t.get_pointee().get_canonical()
    return t


def _parm_decls(cursor):
    from clang.cindex import CursorKind

    return [c for c in cursor.get_children() if c.kind == CursorKind.PARM_DECL]

