"""Build the worker executable of a module with g++, and cache it.

The executable is the reader's translation unit (see :mod:`.rewrite`) linked
with the emulator's runtime (``runtime.cpp``), built with AddressSanitizer
where the compiler has it.  Builds are cached like PyCUDA's: in
``$DLK_CACHE_DIR`` (default ``~/.cache/dlk-emulator``), keyed by a hash of the
prelude, runtime, translation unit, options and compiler version.  A cached
file is used only if its bytes still hash to what was recorded beside it
(``<file>.sha256``) when it was built: anything else found under the expected
name is removed and built again, never trusted.  A build may write at most
``$DLK_BUILD_MAX_BYTES`` (64 MiB): a source made to fill the executable with
ballast fails to build and leaves nothing behind.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import KernelCompileError
from .rewrite import GENERATED_NAME

HERE = Path(__file__).resolve().parent
PRELUDE = HERE / "prelude.h"
RUNTIME = HERE / "runtime.cpp"
GLOBAL_RACES = HERE / "global_races.h"
INCLUDE = HERE / "include"

# -fno-tree-sra keeps a copy of a struct or vector value (float4 v = p[i]) a copy of all its bytes: split
# into its fields, a field the code uses only under a bounds test is read only there, and a float4 read
# past the end of an array (which a GPU makes whole, in one 16-byte load) would go unreported
WHOLE_VALUE_READS = ("-fno-tree-sra",)
BASE_FLAGS = ("-std=gnu++17", "-g", "-gdwarf-4", "-O1", "-fno-omit-frame-pointer", "-w", "-fdiagnostics-color=never",
              "-pthread") + WHOLE_VALUE_READS
# a check that fails calls __asan_report_*_noabort, which the runtime defines: the argument
# buffers a launch may write are poisoned while it runs, and their accesses tracked for races
ASAN_FLAGS = ("-fsanitize=address", "-fsanitize-recover=address")
# The sanitizer's static library where the compiler has one: its thread-local data is then reached directly, not
# through __tls_get_addr at every switch of fibers (a launch of 1056 blocks of 256 threads with 9 barriers each ran
# in a third of the time).  The runtime's report hooks (global_races.h) then cannot take the place of the
# library's own by name: the linker sends the kernel's calls to them to __wrap_<hook> instead.
REPORT_HOOKS = tuple(f"__asan_report_{kind}{size}_noabort" for kind in ("load", "store")
                     for size in ("1", "2", "4", "8", "16", "_n"))
STATIC_ASAN_FLAGS = ("-static-libasan", "-DDLK_STATIC_ASAN=1", "-Wl,--wrap=" + ",--wrap=".join(REPORT_HOOKS))
PATTERN_INIT = ("-ftrivial-auto-var-init=pattern",)
# The profiling build (profiler.h): ThreadSanitizer's instrumentation calls a hook at every load and store
# and coverage's at every basic block; the runtime defines the hooks, so no sanitizer library is linked
PROFILE_FLAGS = ("-fsanitize=thread", "-fsanitize-coverage=trace-pc")
PROFILER = HERE / "profiler.h"


def cache_dir() -> Path:
    root = os.environ.get("DLK_CACHE_DIR")
    path = Path(root) / "emulator" if root else Path.home() / ".cache" / "dlk-emulator"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiler(env=None) -> str:
    """The C++ compiler a process with environment ``env`` (default: this one's) builds with."""
    return (os.environ if env is None else env).get("CXX", "g++")


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelCompileError(
            f"the CPU emulator needs a C++ compiler ({cxx}), which could not be run: {exc}. "
            f"Install g++ (apt-get install g++) or set CXX."
        ) from None
    return out.stdout.splitlines()[0] if out.stdout else cxx


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode() if not isinstance(part, (bytes, str)) else (part.encode() if isinstance(part, str) else part))
        h.update(b"\0")
    return h.hexdigest()[:24]


#: the most bytes one compile or link may write (an executable of a kernel is a few MB)
DEFAULT_BUILD_MAX_BYTES = 64 * 2**20


@functools.lru_cache(maxsize=1)
def nvcc_defines() -> tuple[str, ...]:
    """What nvcc's device pass defines, as ``-DNAME=VALUE`` options: the block of the prelude that defines
    them for the emulator (one list, so that the source policy checks a source under the same macros)."""
    text = PRELUDE.read_text()
    block = text[text.index("// nvcc identity begins"):text.index("// nvcc identity ends")]
    return tuple(f"-D{name}={value}" for name, value in re.findall(r"^#define (\w+) (\S+)$", block, re.M))


#: The options nvcc's device pass gives the host compiler's preprocessor (``nvcc --dryrun``: ``-E -x c++ -m64``
#: and its own -D's): no optimisation, no sanitizer, no threads, so none of the macros those options predefine.
NVCC_PREPROCESSOR_FLAGS = ("-x", "c++", "-m64")


@functools.lru_cache(maxsize=None)
def _predefined_macros(cxx: str, flags: tuple[str, ...]) -> dict[str, str]:
    """The object-like macros ``cxx`` predefines with ``flags`` (``-dM``), name -> value."""
    result = subprocess.run([cxx, *flags, "-x", "c++", "-E", "-dM", os.devnull], capture_output=True, text=True)
    if result.returncode != 0:
        raise KernelCompileError(f"the CPU emulator's compiler ({cxx}) cannot list its macros:\n{result.stderr[-2000:]}")
    return {m.group(1): m.group(2) for m in re.finditer(r"^#define ([A-Za-z_]\w*) ?(.*)$", result.stdout, re.M)}


def identity_flags(cxx: str, flags: tuple[str, ...]) -> tuple[str, ...]:
    """``-U``/``-D`` options after ``flags`` that leave a reader's translation unit with exactly the macros the
    same compiler predefines for nvcc's device pass: the emulator's own options (``-O1``, AddressSanitizer,
    ``-pthread``) predefine ``__OPTIMIZE__``, ``__SANITIZE_ADDRESS__`` and ``_REENTRANT`` and drop
    ``__NO_INLINE__``, each a test by which a kernel could tell the emulator from nvcc.  Derived from the
    compiler itself, so that an option added to the emulator's build cannot open another."""
    ours = _predefined_macros(cxx, tuple(flags))
    nvcc = _predefined_macros(cxx, NVCC_PREPROCESSOR_FLAGS)
    return (tuple(f"-U{name}" for name in sorted(ours.keys() - nvcc.keys()))
            + tuple(f"-D{name}={value}" for name, value in sorted(nvcc.items()) if ours.get(name) != value))


def build_max_bytes() -> int:
    try:
        return max(2**20, int(os.environ.get("DLK_BUILD_MAX_BYTES", DEFAULT_BUILD_MAX_BYTES)))
    except ValueError:
        return DEFAULT_BUILD_MAX_BYTES


def _capped(cmd: list[str]) -> list[str]:
    """``cmd`` under a file-size limit (util-linux ``prlimit``; where it is missing, the limit of
    the calling process, which the grader sets, still holds)."""
    tool = shutil.which("prlimit")
    return [tool, f"--fsize={build_max_bytes()}", "--", *cmd] if tool else cmd


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _record(path: Path) -> None:
    """Write beside a fresh build the hash of its bytes (checked by :func:`_verified`)."""
    side = Path(f"{path}.sha256")
    tmp = _atomic_output(side)
    tmp.write_text(_file_hash(path))
    os.replace(tmp, side)


def _verified(path: Path, remove_stale: bool = True) -> bool:
    """A cached build that may be used: a regular file (no link) whose bytes hash to the
    recorded hash.  Anything else under that name is removed, to be built again (unless
    ``remove_stale`` is false: a folder of builds this process only reads)."""
    side = Path(f"{path}.sha256")
    try:
        if path.is_symlink() or not path.is_file() or side.is_symlink():
            raise ValueError
        if side.read_text().strip() == _file_hash(path):
            return True
    except (OSError, ValueError):
        pass
    if not remove_stale:
        return False
    for stale in (path, side):
        try:
            stale.unlink()
        except OSError:
            pass
    return False


#: A folder of builds made by the grader's own process before any student's code ran (the emulator's
#: runtime), which a sandboxed grading reads but cannot write: a build found there under the name it
#: would have is used as it is; anything else is built into the student's own cache, as without it.
PREBUILT_ENV = "DLK_EMULATOR_PREBUILT"


def _prebuilt(name: str) -> Path | None:
    folder = os.environ.get(PREBUILT_ENV)
    if folder and _verified(Path(folder) / name, remove_stale=False):
        return Path(folder) / name
    return None


def _atomic_output(final: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=final.name + ".", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return Path(tmp)


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    version: str
    flags: tuple[str, ...]
    asan: bool
    runtime_object: Path


_warned_no_asan = False


@functools.lru_cache(maxsize=None)
def _toolchain_for(cxx: str, cache: str, use_asan: bool = True, ucontext: bool = False) -> Toolchain:
    global _warned_no_asan
    version = compiler_version(cxx)
    directory = Path(cache)
    sources = (PRELUDE.read_text(), RUNTIME.read_text(), GLOBAL_RACES.read_text(), PROFILER.read_text(),
               *(p.read_text() for p in sorted(INCLUDE.rglob("*.h"))))
    errors = []
    candidates = [
        (BASE_FLAGS + PATTERN_INIT + ASAN_FLAGS + STATIC_ASAN_FLAGS, True),
        (BASE_FLAGS + PATTERN_INIT + ASAN_FLAGS, True),
        (BASE_FLAGS + ASAN_FLAGS, True),
        (BASE_FLAGS + PATTERN_INIT, False),
        (BASE_FLAGS, False),
    ]
    if not use_asan:
        candidates = [c for c in candidates if not c[1]]
    for flags, asan in candidates:
        # the runtime: optimised, not instrumented (only the reader's code needs checking)
        runtime_flags = tuple(f for f in flags if f not in ASAN_FLAGS + STATIC_ASAN_FLAGS + WHOLE_VALUE_READS
                              and f not in ("-O0", "-O1")) + ("-O2",)
        if asan:
            runtime_flags += ("-DDLK_WITH_ASAN=1",) + tuple(f for f in flags if f == "-DDLK_STATIC_ASAN=1")
        if ucontext:
            runtime_flags += ("-DDLK_FORCE_UCONTEXT=1",)
        name = f"runtime-{_digest(version, runtime_flags, *sources)}.o"
        prebuilt = _prebuilt(name)  # built by the grader before any student's code ran
        obj = prebuilt or directory / name
        if prebuilt is None and not _verified(obj):
            tmp = _atomic_output(obj)
            cmd = [cxx, *runtime_flags, "-I", str(HERE), "-c", str(RUNTIME), "-o", str(tmp)]
            result = subprocess.run(_capped(cmd), capture_output=True, text=True)
            ok = result.returncode == 0
            if ok and asan:
                ok = _asan_links(cxx, flags, tmp, directory)
            if not ok:
                tmp.unlink(missing_ok=True)
                errors.append(result.stderr[-2000:])
                continue
            os.replace(tmp, obj)
            _record(obj)
        if not asan and use_asan and not _warned_no_asan:
            _warned_no_asan = True
            warnings.warn(
                "the CPU emulator could not build with AddressSanitizer; out-of-bounds accesses will "
                "not be reported (install the compiler's libasan)",
                RuntimeWarning,
                stacklevel=3,
            )
        return Toolchain(cxx, version, flags, asan, obj)
    raise KernelCompileError("the CPU emulator's runtime does not compile:\n" + "\n".join(errors))


def _asan_links(cxx: str, flags, obj: Path, directory: Path) -> bool:
    """A test link of the runtime: is libasan installed?"""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        stub = Path(tmp) / "stub.cpp"
        stub.write_text(
            '#include "prelude.h"\n'
            'extern "C" const __dlk_kernel_entry __dlk_kernels[] = {{0, 0}};\n'
            'extern "C" const __dlk_variable_entry __dlk_variables[] = {{0, 0, 0, 0, 0}};\n'
            'extern "C" const __dlk_variable_entry __dlk_file_shared[] = {{0, 0, 0, 0, 0}};\n'
        )
        cmd = [cxx, *flags, "-I", str(HERE), str(stub), str(obj), "-o", str(Path(tmp) / "stub")]
        return subprocess.run(cmd, capture_output=True).returncode == 0


def toolchain(directory: Path | None = None, env=None, profile: bool = False) -> Toolchain:
    """The compiler, its flags and the emulator's runtime built with them, in ``directory`` (default: the
    build cache), unless a prebuilt one is found (``$DLK_EMULATOR_PREBUILT``); chosen as a process with
    environment ``env`` (default: this one's) chooses them, so that a grader can build a child's runtime.
    ``profile``: the toolchain of the profiling build (no AddressSanitizer, which ThreadSanitizer's
    instrumentation excludes)."""
    env = os.environ if env is None else env
    # DLK_EMULATOR_ASAN=0 builds without AddressSanitizer (faster; out-of-bounds accesses go unnoticed)
    use_asan = env.get("DLK_EMULATOR_ASAN", "1").strip().lower() not in ("0", "false", "no", "off") and not profile
    # DLK_EMULATOR_UCONTEXT=1 switches fibers with the C library's ucontext (the portable path)
    ucontext = env.get("DLK_EMULATOR_UCONTEXT", "0").strip().lower() in ("1", "true", "yes", "on")
    return _toolchain_for(compiler(env), str(directory or cache_dir()), use_asan, ucontext)


def _usable_options(options: tuple[str, ...], include_dirs: tuple[str, ...]) -> list[str]:
    """Keep the options g++ understands the same way (-D, -U, -I); drop nvcc's own (-arch, -O3, ...)."""
    kept: list[str] = []
    pending = None
    for opt in options:
        if pending:
            kept += [pending, str(Path(opt).resolve()) if pending == "-I" else opt]
            pending = None
        elif opt in ("-D", "-U", "-I"):
            pending = opt
        elif opt.startswith(("-D", "-U", "-I")):
            kept.append(opt)
        elif opt.startswith("-std=c++"):
            kept.append(opt.replace("-std=c++", "-std=gnu++"))
    for d in include_dirs:
        kept += ["-I", str(Path(d).resolve())]
    return kept


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def _included_files(text: str, search: list[Path], seen: dict[Path, str] | None = None, depth: int = 0) -> dict[Path, str]:
    """Headers the source includes from its include directories (recursively), with their text:
    part of the cache key, so that editing a header rebuilds (system headers are left out)."""
    seen = {} if seen is None else seen
    if depth > 8:
        return seen
    for name in _INCLUDE.findall(text):
        for directory in search:
            path = (directory / name).resolve()
            if path.is_file():
                if path not in seen:
                    try:
                        seen[path] = path.read_text(errors="replace")
                    except OSError:
                        break
                    _included_files(seen[path], search, seen, depth + 1)
                break
    return seen


@dataclass(frozen=True)
class Built:
    executable: Path
    from_cache: bool
    asan: bool


def build(unit_text: str, source: str, source_name: str, options: tuple[str, ...], include_dirs: tuple[str, ...],
          profile: bool = False) -> Built:
    """The worker executable of a translation unit; ``profile``: its profiling build (profiler.h), which
    runs launches only to count their memory accesses and branches."""
    tc = toolchain(profile=profile)
    user_flags = _usable_options(options, include_dirs)
    search = [Path(f[2:]) if f.startswith("-I") and len(f) > 2 else None for f in user_flags]
    search = [p for p in search if p] + [Path(user_flags[i + 1]) for i, f in enumerate(user_flags[:-1]) if f == "-I"]
    headers = _included_files(unit_text, search)
    compile_flags = tc.flags + (PROFILE_FLAGS if profile else ())
    compile_flags += identity_flags(tc.cxx, compile_flags)  # the reader's code sees nvcc's macros, not g++'s
    key = _digest(tc.version, compile_flags, tc.runtime_object.name, unit_text, user_flags,
                  *(f"{p}\n{t}" for p, t in sorted(headers.items())))
    directory = cache_dir()
    exe = directory / f"module-{key}"
    if _verified(exe):
        try:
            os.utime(exe)  # most recently used: kept longest when the cache is pruned
        except OSError:
            pass
        return Built(exe, True, tc.asan)
    tmp = _atomic_output(exe)
    with tempfile.TemporaryDirectory(dir=directory) as work:
        tu = Path(work) / "unit.cpp"
        tu.write_text(unit_text)
        if profile:
            # compiled instrumented, linked without the sanitizer's library (the runtime has the hooks)
            obj = Path(work) / "unit.o"
            cmd = [tc.cxx, *compile_flags, "-I", str(HERE), "-I", str(INCLUDE), *user_flags, "-c", str(tu), "-o", str(obj)]
            result = subprocess.run(_capped(cmd), capture_output=True, text=True, cwd=work)
            if result.returncode == 0:
                cmd = [tc.cxx, *tc.flags, str(obj), str(tc.runtime_object), "-o", str(tmp), "-lm"]
                result = subprocess.run(_capped(cmd), capture_output=True, text=True, cwd=work)
        else:
            cmd = [
                tc.cxx, *compile_flags, "-I", str(HERE), "-I", str(INCLUDE), *user_flags,
                str(tu), str(tc.runtime_object), "-o", str(tmp), "-lm",
            ]
            result = subprocess.run(_capped(cmd), capture_output=True, text=True, cwd=work)
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        if result.returncode in (-25, 153) or "File too large" in result.stderr or "File size limit" in result.stderr:
            raise KernelCompileError(
                f"{source_name} builds into more than {build_max_bytes() // 2**20} MB (a very large initialised "
                f"array, or assembler data?); the build was stopped and nothing of it kept.",
                log=result.stderr, source_name=source_name)
        raise compile_error(result.stderr, source, source_name)
    os.replace(tmp, exe)
    _record(exe)
    _prune(directory)
    return Built(exe, False, tc.asan)


#: builds kept in the cache; beyond it the least recently used are removed
MAX_CACHED_MODULES = 400


def _prune(directory: Path) -> None:
    modules = [p for p in directory.glob("module-*") if not p.name.endswith((".tmp", ".sha256"))]
    if len(modules) <= MAX_CACHED_MODULES:
        return

    def last_used(p: Path) -> float:
        try:
            st = p.stat()
            return max(st.st_atime, st.st_mtime)
        except OSError:
            return 0.0

    for old in sorted(modules, key=last_used)[: len(modules) - MAX_CACHED_MODULES * 3 // 4]:
        for stale in (old, Path(f"{old}.sha256")):
            try:
                stale.unlink()  # a running worker keeps its (unlinked) executable
            except OSError:
                pass


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<kind>fatal error|error|warning|note):\s*(?P<msg>.*)$")
_WHERE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:\d+:)?\s")


def _reader_line_near(log_lines: list[str], index: int, want: str) -> int | None:
    """The reader's line a diagnostic inside the prelude is about: the mention of the reader's
    file that belongs to it (a following "in expansion of macro" note, else a preceding
    "required from here")."""

    def is_error(line: str) -> bool:
        m = _DIAG.match(line)
        return bool(m and m.group("kind") in ("error", "fatal error"))

    for k in range(index + 1, len(log_lines)):
        if is_error(log_lines[k]):
            break
        m = _WHERE.match(log_lines[k])
        if m and Path(m.group("file")).name == want:
            return int(m.group("line"))
    for k in range(index - 1, -1, -1):
        if is_error(log_lines[k]):
            break
        m = _WHERE.match(log_lines[k])
        if m and Path(m.group("file")).name == want:
            return int(m.group("line"))
    return None


#: headers of the CUDA toolkit the emulator does not provide, and what they are for
GPU_ONLY_HEADERS = {
    "cuda_fp8.h": "8-bit floating-point types",
    "cuda/pipeline": "asynchronous copies (cuda::pipeline)",
    "cuda/barrier": "asynchronous barriers (cuda::barrier)",
    "curand_kernel.h": "cuRAND's device random-number generators",
    "cub/cub.cuh": "the CUB library",
    "cublas_v2.h": "cuBLAS",
    "texture_fetch_functions.h": "texture fetches",
}

_MISSING_HEADER = re.compile(r"^(?P<header>[^:]+): No such file or directory$")


def missing_header_message(header: str) -> str:
    """One sentence for an #include the emulator cannot satisfy."""
    feature = GPU_ONLY_HEADERS.get(header) or next(
        (what for name, what in GPU_ONLY_HEADERS.items() if header.startswith(name.split("/")[0] + "/")), None)
    if feature or header.startswith(("cuda", "cu", "thrust/", "cooperative_groups/")):
        what = f"{feature}, " if feature else ""
        return (f"#include <{header}>: the CPU emulator does not provide {header} ({what}a part of the CUDA toolkit "
                f"it does not emulate); this kernel runs on a GPU only (DLK_BACKEND=gpu).")
    return (f"#include <{header}>: no header '{header}' was found; the CPU emulator provides the CUDA runtime "
            f"headers and the C and C++ standard libraries, and your own headers through include_dirs=[...].")


def compile_error(log: str, source: str, source_name: str) -> KernelCompileError:
    """g++'s messages about the reader's file, each with the line it is about quoted.

    Errors g++ finds inside the emulator's prelude (a CUDA built-in used with the
    wrong types, say) are shown at the reader's line that used the built-in.
    """
    lines = source.splitlines()
    want = Path(source_name).name
    log_lines = log.splitlines()
    shown: list[str] = []
    seen = set()
    for index, raw in enumerate(log_lines):
        m = _DIAG.match(raw)
        if not m:
            if "undefined reference to" in raw:
                shown.append(raw.split(": ", 1)[-1].strip())
            continue
        kind = m.group("kind")
        message = m.group("msg")
        if Path(m.group("file")).name == want:
            lineno = int(m.group("line"))
            if kind == "note" and ("in expansion of macro" in message or "prelude.h" in message):
                continue
            missing = _MISSING_HEADER.match(message) if kind == "fatal error" else None
            if missing:
                kind, message = "unsupported", missing_header_message(missing.group("header"))
        elif kind in ("error", "fatal error"):
            if m.group("file") == GENERATED_NAME:
                shown.append(f"in the emulator's launch code: {message}")
                continue
            lineno = _reader_line_near(log_lines, index, want)
            if lineno is None:
                shown.append(f"{kind}: {message}")
                continue
            message += " (in the emulator's definition of a CUDA built-in used here)"
        else:
            continue
        key = (lineno, message)
        if key in seen:
            continue
        seen.add(key)
        text = f"{source_name}:{lineno}: {kind}: {message}"
        if 1 <= lineno <= len(lines):
            text += f"\n  {lineno:4d} | {lines[lineno - 1]}"
        shown.append(text)
    if not shown:
        tail = "\n".join(log.strip().splitlines()[-20:])
        shown.append(tail or "the C++ compiler failed without a message")
    message = f"{source_name} does not compile (the CPU emulator compiles it with g++):\n" + "\n".join(shown[:25])
    return KernelCompileError(message, log=log, source_name=source_name)


def describe_toolchain() -> dict:
    try:
        tc = toolchain()
    except Exception as exc:  # pragma: no cover - reported, not raised
        return {"compiler": f"unavailable ({exc})"}
    return {"compiler": tc.version, "sanitizer": "AddressSanitizer" if tc.asan else "none", "flags": " ".join(tc.flags)}

