"""Whether a kernel indexes its arrays with 64-bit integers: a requirement no test case can show.

An exercise whose arrays may pass 2^31 elements (the capsule prediction of a large layer) needs
64-bit indices, but a case that large (8 GiB of floats, and its float64 reference on the host) is
beyond what the grader allocates, so a kernel indexing with ``int`` passes every case it can run.
The source says it instead.  Read by clang's front end (:mod:`kernels.runtime.frontend`, the
parse the runtime reads signatures from), the kernel's body is checked for

* an index or offset of one of the kernel's pointer parameters (``p[i]``, ``p + i``, ``p - i``,
  ``p += i``) whose integer type is narrower than 64 bits (a literal constant is fine);
* a product of integers narrower than 64 bits whose result is then widened to 64 bits
  (``long long i = blockIdx.x * blockDim.x``): it overflows before it is widened, which clang-tidy
  calls ``bugprone-implicit-widening-of-multiplication-result``.

Pointers the kernel derives (``const float* w = W + offset``) are checked where they are derived:
an index into ``w`` is an offset from a place a 64-bit offset reached.  ``__device__`` helpers are
not looked into.  Each finding is one sentence naming the line and the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kernels.runtime import frontend

#: Bits of each integer kind (clang's TypeKind names) on the device: long is 64 bits, as on the host.
_INTEGER_BITS = {"BOOL": 8, "CHAR_U": 8, "UCHAR": 8, "CHAR_S": 8, "SCHAR": 8, "CHAR16": 16, "CHAR32": 32,
                 "WCHAR": 32, "SHORT": 16, "USHORT": 16, "INT": 32, "UINT": 32, "LONG": 64, "ULONG": 64,
                 "LONGLONG": 64, "ULONGLONG": 64, "INT128": 128, "UINT128": 128}
#: What an implicit conversion or parentheses wrap: looked through to the expression as written.
_WRAPPERS = ("UNEXPOSED_EXPR", "PAREN_EXPR")


def _bits(node) -> int:
    """The width of ``node``'s integer type, 0 if it is no integer (read from the kind: a type's size is not
    asked of an expression clang could not type)."""
    return _INTEGER_BITS.get(node.type.get_canonical().kind.name, 0)


def _written(node):
    """``node`` without the implicit conversions and parentheses around it."""
    while node.kind.name in _WRAPPERS:
        children = list(node.get_children())
        if len(children) != 1:
            break
        node = children[0]
    return node


def _text(node) -> str:
    return " ".join(t.spelling for t in node.get_tokens())


def _operator(node) -> str:
    """The operator token of a binary expression: the first token after its left operand."""
    left = next(iter(node.get_children()), None)
    if left is None:
        return ""
    end = left.extent.end.offset
    return next((t.spelling for t in node.get_tokens() if t.extent.start.offset >= end), "")


def _walk(node) -> Iterator:
    for child in node.get_children():
        if frontend.in_reader_file(child):
            yield child
            yield from _walk(child)


def _narrow_product(node):
    """The first product of narrow integers (not of two literals) inside the narrow sum or product ``node``."""
    node = _written(node)
    if node.kind.name != "BINARY_OPERATOR" or not 0 < _bits(node) < 64:
        return None
    operands = [_written(child) for child in node.get_children()]
    operator = _operator(node)
    if operator == "*" and not all(o.kind.name == "INTEGER_LITERAL" for o in operands):
        return node
    if operator in ("+", "-", "*"):
        return next(filter(None, (_narrow_product(o) for o in operands)), None)
    return None


def narrow_indices(source: str, kernel: str) -> list[tuple[int, str, str]]:
    """``(line, what, text)`` of every place where the kernel ``kernel`` of ``source`` indexes one of its pointer
    parameters with an integer narrower than 64 bits (``what`` names the parameter), or widens a narrow product
    to 64 bits (``what`` is ``"product"``), in the order of the source.  Empty if the kernel is not found (its
    signature is checked apart)."""
    parsed = frontend.parse(source)
    found = [cursor for cursor, _ in frontend.kernels(parsed) if cursor.spelling == kernel and cursor.is_definition()]
    if not found:
        return []
    function = found[0]
    pointers = {p.spelling for p in function.get_children()
                if p.kind.name == "PARM_DECL" and p.type.get_canonical().kind.name == "POINTER"}

    def is_parameter(node) -> bool:
        node = _written(node)
        return (node.kind.name == "DECL_REF_EXPR" and node.spelling in pointers
                and node.referenced is not None and node.referenced.kind.name == "PARM_DECL")

    def narrow_offset(node) -> bool:
        node = _written(node)
        return 0 < _bits(node) < 64 and node.kind.name != "INTEGER_LITERAL"

    findings = []
    for node in _walk(function):
        kind = node.kind.name
        children = list(node.get_children())
        if kind == "ARRAY_SUBSCRIPT_EXPR" and len(children) == 2:
            base, index = children
            if is_parameter(base) and narrow_offset(index):
                findings.append((node.location.line, node.location.column, _written(base).spelling, _text(node)))
        elif kind in ("BINARY_OPERATOR", "COMPOUND_ASSIGNMENT_OPERATOR") and len(children) == 2 \
                and node.type.get_canonical().kind.name == "POINTER":
            for pointer, offset in (children, children[::-1]):
                if is_parameter(pointer) and narrow_offset(offset):
                    findings.append((node.location.line, node.location.column, _written(pointer).spelling, _text(node)))
                    break
        elif kind == "UNEXPOSED_EXPR" and len(children) == 1 and _bits(node) >= 64 and 0 < _bits(children[0]) < 64:
            product = _narrow_product(children[0])
            if product is not None:
                findings.append((node.location.line, node.location.column, "product", _text(product)))
    return [(line, what, text) for line, _, what, text in sorted(set(findings))]


def needs_64_bit_indices(why: str) -> Callable[[str, str], str]:
    """An exercise's ``source_check``: '' when the kernel indexes its arrays in 64 bits, else one sentence
    naming the first place that does not (``why`` says why the exercise needs them)."""

    def check(source: str, kernel: str) -> str:
        findings = narrow_indices(source, kernel)
        if not findings:
            return ""
        line, what, text = findings[0]
        more = f" (and {len(findings) - 1} more place{'s' if len(findings) > 2 else ''})" if len(findings) > 1 else ""
        if what == "product":
            return (f"{kernel} indexes with 32-bit integers: line {line} multiplies 32-bit integers ({text}) and widens "
                    f"the product to 64 bits only after it may have overflowed{more}. {why} Convert a factor first, "
                    f"e.g. (long long)blockIdx.x * blockDim.x.")
        return (f"{kernel} indexes with 32-bit integers: line {line} indexes {what} with a 32-bit int ({text}){more}. "
                f"{why} Compute indices and offsets in 64 bits (long long or size_t).")

    return check
