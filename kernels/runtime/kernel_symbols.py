"""Which kernel of a compiled module (a cubin) is which kernel of the reader's source.

nvcc names a kernel in its cubin by its C++ mangled name (``_Z10vector_addPKfS0_Pfi``; an
``extern "C"`` kernel by its plain name), while readers ask for kernels by their source names
(``vector_add``, ``sgemm<64, 64, 8>``, ``block_reduce<float>`` made by an explicit instantiation).
clang's front end mangles each kernel by the same C++ ABI (Itanium's) as nvcc: each signature carries
that name (:attr:`KernelSignature.symbol`), and it is looked for among the cubin's entry functions.
Where it is not there (a kernel in an anonymous namespace, which nvcc names after the file), the
entries are demangled and matched by their qualified names, template arguments included.

The cubin is an ELF file: its kernels are the FUNC symbols marked as entry points (``STO_CUDA_ENTRY``
in ``st_other``), so a ``__device__`` function that was not inlined is never taken for a kernel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
import shutil
import struct
import subprocess

#: ``st_other`` bit of a kernel's symbol in a cubin (cuobjdump shows it as STO_ENTRY)
STO_CUDA_ENTRY = 0x10
_SHT_SYMTAB = 2
_STT_FUNC = 2


def entry_functions(image: bytes) -> list[str]:
    """The names of the kernels (entry functions) in an ELF64 image (a cubin), in symbol-table order."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        return []
    section_offset, = struct.unpack_from("<Q", image, 0x28)
    entry_size, count = struct.unpack_from("<HH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, section_offset + k * entry_size) for k in range(count)]
    names = []
    for section in sections:
        if section[1] != _SHT_SYMTAB:
            continue
        offset, size, link, symbol_size = section[4], section[5], section[6], section[9] or 24
        strings = sections[link][4]
        for k in range(size // symbol_size):
            name_at, info, other = struct.unpack_from("<IBB", image, offset + k * symbol_size)
            if info & 0xF == _STT_FUNC and other & STO_CUDA_ENTRY:
                start = strings + name_at
                names.append(image[start : image.index(b"\0", start)].decode())
    return names


@functools.lru_cache(maxsize=1)
def _cxa_demangle():
    try:
        runtime = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    function = runtime.__cxa_demangle
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return function, libc.free


def demangle(name: str) -> str:
    """``name`` demangled by the C++ runtime's own ``__cxa_demangle`` (libstdc++), or as it is."""
    runtime = _cxa_demangle()
    if runtime is None:
        return name
    function, free = runtime
    status = ctypes.c_int()
    pointer = function(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return name
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        free(ctypes.c_void_p(pointer))


def demangle_all(names: list[str]) -> list[str]:
    """Each name demangled: by the C++ runtime first (it writes template arguments as C++ does; cu++filt of
    CUDA 13 writes ``scale<double, (int)64>``, and nvcc from PyPI ships no cu++filt), then by ``c++filt`` or
    ``cu++filt`` where one is installed, for what the runtime could not read."""
    readable = [demangle(name) for name in names]
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    unread = [k for k, (r, n) in enumerate(zip(readable, names)) if r == n and n.startswith("_Z")]
    if tool and unread:
        filtered = subprocess.run([tool], input="\n".join(names[k] for k in unread), capture_output=True, text=True,
                                  timeout=60).stdout.splitlines()
        for k, text in zip(unread, filtered):
            readable[k] = text
    return readable


def qualified_name(demangled: str) -> str:
    """``void nn::scale<float, 128>(float const*, float*)`` -> ``nn::scale<float, 128>``: the name without
    the return type and the parameter list (kernels return void)."""
    depth = 0
    for k, ch in enumerate(demangled):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not demangled.startswith("(anonymous namespace)", k):
            demangled = demangled[:k]
            break
    return re.sub(r"^\s*void\s+", "", demangled).strip()


def comparable_name(name: str) -> str:
    """A kernel's name as compared with another: no spaces, no anonymous namespaces, no suffixes on integer template arguments
    (``64u``, ``64ul``), no leading ``::``."""
    name = re.sub(r"\s+", "", name).replace("(anonymousnamespace)::", "")
    return re.sub(r"(?<=\d)[uUlL]+\b", "", name).lstrip(":")


def kernel_symbols(image: bytes, signatures) -> dict[str, str]:
    """``{"vector_add": "_Z10vector_addPKfS0_Pfi", "sgemm<64, 64, 8>": "_Z5sgemm...", ...}``: the cubin's name
    of each kernel of ``signatures`` (an iterable of :class:`~kernels.runtime.signature.KernelSignature`)
    found in ``image``; a kernel that is not there is left out."""
    entries = entry_functions(image)
    present = set(entries)
    found: dict[str, str] = {}
    missing = []
    for signature in signatures:
        symbol = getattr(signature, "symbol", "")
        if symbol and symbol in present:
            found[signature.name] = symbol
        elif signature.name in present:  # extern "C", or a signature made by hand
            found[signature.name] = signature.name
        else:
            missing.append(signature)
    if missing:
        readable = [comparable_name(qualified_name(name)) for name in demangle_all(entries)]
        for signature in missing:
            wanted = comparable_name(signature.qualified_name)
            exact = [entry for entry, name in zip(entries, readable) if name == wanted]
            # an inline namespace the front end did not name, say
            within = [entry for entry, name in zip(entries, readable) if name.endswith("::" + wanted)]
            if exact or within:
                found[signature.name] = (exact or within)[0]
    return found


def source_name(symbol: str) -> str:
    """A kernel's name as its source writes it, from its name in a cubin: ``_ZN2nn8softplusEPKfPfi`` ->
    ``softplus``, ``_Z5scaleIfLi128EEvPKT_PS0_S0_i`` -> ``scale<float, 128>`` (namespaces left out)."""
    name = qualified_name(demangle(symbol)) if symbol.startswith("_Z") else symbol
    depth, start = 0, 0
    for k, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and name.startswith("::", k):
            start = k + 2
    return name[start:]
