"""The syntax tree of a comprehension: plain dataclasses, each with the position it came from."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pos:
    line: int
    column: int


@dataclass(frozen=True)
class Num:
    value: int | float
    is_int: bool
    pos: Pos


@dataclass(frozen=True)
class Name:
    """An identifier in an expression: an index, a scalar parameter or a size."""

    name: str
    pos: Pos


@dataclass(frozen=True)
class Call:
    """``name(args)``: a tensor access or a function call (told apart by the semantic checks)."""

    name: str
    args: tuple
    pos: Pos


@dataclass(frozen=True)
class Unary:
    op: str
    operand: object
    pos: Pos


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object
    pos: Pos


@dataclass(frozen=True)
class Ternary:
    cond: object
    then: object
    other: object
    pos: Pos


@dataclass(frozen=True)
class Param:
    """``float(M, K) A``, ``int(N) I``, ``float a`` or ``int sh``."""

    type: str  # "float" | "int"
    name: str
    dims: tuple | None  # tuple of str (size names) or int (literal sizes); None for a scalar
    pos: Pos
    dim_pos: tuple = ()

    @property
    def is_scalar(self) -> bool:
        return self.dims is None


@dataclass(frozen=True)
class RangeClause:
    """``where kh in 0:2``: the index takes the values lo, lo+1, ..., hi-1."""

    index: str
    lo: object
    hi: object
    pos: Pos


@dataclass(frozen=True)
class Statement:
    """``C(i) +=! A(i,k) * x(k) where ...``."""

    tensor: str
    indices: tuple  # expressions as written; the checks require plain index names
    op: str  # "=", "+=", "+=!", "*=", "*=!", "max=", "max=!", "min=", "min=!"
    rhs: object
    where: tuple
    pos: Pos
    op_pos: Pos

    @property
    def reduction(self) -> str | None:
        """'+', '*', 'max' or 'min' for a reduction statement, None for '='."""
        return None if self.op == "=" else self.op.rstrip("!").rstrip("=")

    @property
    def initialises(self) -> bool:
        """True for ``+=!`` and friends: the accumulator starts at the operator's identity."""
        return self.op.endswith("!")


@dataclass(frozen=True)
class Definition:
    name: str
    params: tuple
    outputs: tuple  # names
    output_pos: tuple
    statements: tuple
    pos: Pos
    text: str = field(default="", compare=False, repr=False)
