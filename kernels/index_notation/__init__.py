"""Index notation -> CUDA C: a small Tensor-Comprehensions-style language.

    from kernels.index_notation import compile_tc
    mv = compile_tc("def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }")
    print(mv.ranges)     # i in [0, M - 1], k in [0, K - 1]; output C: (M)
    print(mv.source)     # the generated CUDA C
    C = mv(A, x)         # runs through kernels.runtime (GPU or CPU emulator)

Modules, in the order a comprehension goes through them: ``parser`` (lark
grammar -> ``syntax`` tree), ``semantics`` (checks and range inference over
``sizes``), ``codegen`` (CUDA C under a ``schedule``), ``runner`` (launches),
``autotune`` (searches schedules on a GPU).  ``examples`` holds the
comprehensions of the chapter, and ``generated`` the records (``KERNELS``) of
the kernels generated for its exercises.
"""

from __future__ import annotations

from operator import attrgetter

from .codegen import GeneratedProgram, generate
from .errors import TcError, TcSemanticError, TcShapeError, TcSyntaxError
from .parser import parse
from .runner import run
from .schedule import NAIVE, Schedule
from .semantics import CheckedDefinition, check


class Comprehension:
    """A checked comprehension with a schedule: its ranges, its CUDA C source, and a callable that runs it."""

    def __init__(self, checked: CheckedDefinition, schedule: Schedule):
        self.checked = checked
        self.schedule = schedule
        self.program = generate(checked, schedule)

    name = property(attrgetter("checked.name"), doc="The definition's name.")
    source = property(attrgetter("program.source"), doc="The generated CUDA C.")

    @property
    def ranges(self) -> str:
        return self.checked.describe_ranges()

    def with_schedule(self, schedule: Schedule) -> "Comprehension":
        return Comprehension(self.checked, schedule)

    def __call__(self, *args, **kwargs):
        return run(self.program, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<Comprehension {self.name}: {self.schedule.describe()}>"


def check_text(text: str, name: str | None = None) -> CheckedDefinition:
    """Parse and check ``text``; the definition called ``name`` (or the only / first one)."""
    definitions = parse(text)
    if name is None:
        return check(definitions[0])
    for d in definitions:
        if d.name == name:
            return check(d)
    raise KeyError(f"no definition '{name}' in the text (it defines {', '.join(d.name for d in definitions)})")


def compile_tc(text: str, schedule: Schedule | None = None, name: str | None = None) -> Comprehension:
    """Parse, check, infer ranges and generate CUDA C for ``text`` (naive schedule unless given)."""
    return Comprehension(check_text(text, name), schedule or NAIVE)


__all__ = ["Comprehension", "compile_tc", "check_text", "parse", "check", "generate", "run", "Schedule", "NAIVE",
           "TcError", "TcSyntaxError", "TcSemanticError", "TcShapeError", "GeneratedProgram", "CheckedDefinition"]
