"""Hints that name the cause a kernel's source and launch line point to, where the symptom alone misleads.

The checker's hints read the symptom (which elements are wrong, what the
emulator caught); some causes look like another one from there: a
non-power-of-two block in a tree reduction loses elements like a wrong loop
bound, dynamic shared memory too small for the block overruns like a missing
``if (i < n)``, a tree step without its ``if (tid < stride)`` overruns the
block's shared array like too little shared memory (the threads at and
above the stride read past the live half, and past the array's end), a tree
without any barrier reads unwritten shared memory, a
grid-stride loop that steps by one block races on global memory (the
emulator stops it there, before any wrong element is seen).
:func:`refine_hint` looks at the source and the launch integers and, when
they show one of those causes, says it instead.
"""

from __future__ import annotations

import re

from kernels.runtime.signature import strip_comments

_SHARED_OVERRUN = re.compile(r"dynamic shared memory \((\d+) bytes asked for at launch\) at byte (\d+)")
# A loop that starts at the thread's index in the whole grid but steps by one block only.
_ONE_BLOCK_STEP = re.compile(r"for\s*\([^;]*blockIdx\.x[^;]*;[^;]*;\s*\w+\s*\+=\s*blockDim\.x\s*\)")
_HALVING = re.compile(r"(/=\s*2\b|>>=\s*1\b|=\s*\w+\s*/\s*2\b|=\s*\w+\s*>>\s*1\b)")
# The variable of a loop that halves it every step: a tree reduction's stride.
_HALVING_LOOP = re.compile(r"for\s*\(\s*(?:(?:unsigned|int|long|size_t|auto|const)\s+)*(\w+)\s*=[^;]*;[^;]*;\s*"
                           r"\1\s*(?:/=\s*2\b|>>=\s*1\b|=\s*\1\s*/\s*2\b|=\s*\1\s*>>\s*1\b)\s*\)")
# The emulator's report of an access to an argument's buffer before its first element.
_BEFORE_START = re.compile(r"out-of-bounds (read|write) of .*? (?:from|to) argument '(\w+)' .*?at element (-\d+)")
# The emulator's report of an access past a shared array: the line, its statement and the thread.
_SHARED_OUT_OF_BOUNDS = re.compile(r"out-of-bounds (?:read|write) of .*? (?:from|to) (?:dynamic shared memory|shared array)"
                                   r".*?line (\d+): `([^`]*)`.*?thread \((\d+),")


def _power_of_two(k: int) -> bool:
    return k > 0 and k & (k - 1) == 0


def _indexes_by_thread(code: str) -> bool:
    """Whether ``code`` indexes an array by threadIdx.x, directly or through a name given its value
    (``const int t = threadIdx.x; ... partial[t]``)."""
    names = ["threadIdx\\.x", *(re.escape(name) for name in re.findall(r"\b(\w+)\s*=\s*threadIdx\.x\s*;", code))]
    return bool(re.search(r"\[\s*(?:" + "|".join(names) + r")\b", code))


def refine_hint(hint: str, *, source: str, launch: dict, error: str = "", wrong_result: bool = False,
                shape: dict | None = None) -> str:
    """``hint``, or a hint naming the cause that ``source`` and ``launch`` show."""
    code = strip_comments(source)
    block = int(launch.get("block", 0) or 0)
    threads = block * int(launch.get("grid", 0) or 0)
    n = int((shape or {}).get("n", 0) or 0)
    if wrong_result and threads and n > threads and "gridDim" not in code:
        return (f"No grid-stride loop: the grid has grid x block = {threads} threads and n = {n} is larger, so with one "
                f"element per thread the last {n - threads} elements are never touched. Loop over i with "
                f"i += blockDim.x * gridDim.x so any grid covers any n.")
    if (wrong_result or "race" in error) and _ONE_BLOCK_STEP.search(code):
        return ("The grid-stride step is one block (i += blockDim.x): the blocks' index ranges overlap, so elements "
                "are processed by several blocks -- the grid-stride step must be the whole grid, "
                "i += blockDim.x * gridDim.x, not one block.")
    unguarded = _unguarded_tree_step(code, error, wrong_result)
    if unguarded:
        return unguarded
    m = _SHARED_OVERRUN.search(error)
    if m:
        asked, at = int(m.group(1)), int(m.group(2))
        if block and asked >= 4 * block:  # one float per thread fits: the index, not the size, is off
            return (f"A thread used byte {at} of dynamic shared memory, past the {asked} bytes asked for at launch "
                    f"(shared={asked} on the %%cuda line, {asked // block} bytes per thread of block={block}): check "
                    f"the index on that line against what the block stores, or ask for as many bytes as the kernel "
                    f"really indexes.")
        need = f" (one float per thread: shared={4 * block} for block={block})" if block else ""
        return (f"The dynamic shared memory asked for at launch (shared={asked} bytes on the %%cuda line) is too small "
                f"for the block: a thread used byte {at}. Ask for as many bytes as the block uses{need}.")
    asked = int(launch.get("shared", 0) or 0)
    if ("outside every buffer" in error and block and asked < 4 * block and re.search(r"extern\s+__shared__", code)
            and _indexes_by_thread(code)):
        # The GPU only says that an address was illegal; the launch line shows why.
        return (f"The dynamic shared memory asked for at launch (shared={asked} bytes on the %%cuda line) is too small "
                f"for the block: the kernel indexes it by threadIdx.x, which needs {4 * block} bytes for "
                f"block={block} (one float per thread). Ask for as many bytes as the block uses.")
    if "shared memory that no thread" in error and "__shared__" in code and "__syncthreads" not in code:
        return ("The kernel has no __syncthreads() at all: threads read shared memory that other threads of the block "
                "have not written yet. Put a __syncthreads() after the stores to shared memory and after every level "
                "of the tree reduction, outside any if.")
    if wrong_result and block and not _power_of_two(block) and "__shared__" in code and _HALVING.search(code):
        return (f"The block size {block} is not a power of two: a tree reduction that halves the stride "
                f"({block} -> {block // 2} -> ... ) drops an element whenever the count is odd. Launch a power-of-two "
                f"block (e.g. block=128 or 256), or let the tree handle odd counts.")
    return _before_the_start(error) or hint


def _before_the_start(error: str) -> str:
    """The hint for an access the emulator caught at a negative element of an argument: a check of the lower end
    missing, which a check ``if (i < n)`` does not make."""
    m = _BEFORE_START.search(error)
    if not m:
        return ""
    rw, name, at = m.groups()
    return (f"The {rw} at element {at} of '{name}' falls before its first element: an index that went below 0 (a "
            f"neighbour i - 1 of the first element, a pixel of the padding above or left of the map) was used with "
            f"no check that it is >= 0. A bounds check covers both ends: 0 <= i < n (for a map, 0 <= y < H and "
            f"0 <= x < W).")


def _unguarded_tree_step(code: str, error: str, wrong_result: bool = False) -> str:
    """The hint for a tree reduction's step that threads at or above the stride take too (no, or a wrong,
    ``if (tid < stride)``): when the emulator caught one reading ``[tid + stride]`` past a shared array, or, where
    a GPU shows only an illegal address or a wrong result, when the source has such a step and no guard; else ''."""
    m = _SHARED_OUT_OF_BOUNDS.search(error)
    if not m and not (wrong_result or "outside every buffer" in error):
        return ""
    statement = m.group(2) if m else code
    for stride in dict.fromkeys(_HALVING_LOOP.findall(code)):
        name = re.escape(stride)
        index = re.search(r"\[([^\]]*\+\s*" + name + r"\b[^\]]*|\s*" + name + r"\s*\+[^\]]*)\]", statement)
        guarded = re.search(r"\bif\s*\([^)]*\b" + name + r"\b", code)
        if not index or (guarded and not m):
            continue
        what = "its guard lets threads at or above the stride through" if guarded else "every thread takes it"
        where = (f"at line {m.group(1)} (`{m.group(2)}`) is missing its guard if (threadIdx.x < {stride}): {what}, "
                 f"so thread {m.group(3)}, at or above the stride," if m else
                 f"(`[{index.group(1).strip()}]`) is missing its guard if (threadIdx.x < {stride}): {what}, so the "
                 f"threads at or above the stride")
        return (f"The tree step {where} read [{index.group(1).strip()}] past the live half of the partial sums and "
                f"past the end of the shared array -- the array's size is not the problem. Only the threads below the "
                f"stride add: put the step inside if (threadIdx.x < {stride}), with the __syncthreads() after it, "
                f"outside the if.")
    return ""
