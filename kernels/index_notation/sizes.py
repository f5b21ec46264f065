"""Symbolic sizes: what range inference computes with, before any array is seen.

A size is an affine combination of size names (``M - N + 1``), possibly under
a floor division by a positive integer or a min / max of two sizes.  Sizes
print as a reader would write them, evaluate for given dimensions, and emit
as C expressions over the kernel's integer size parameters.
"""

from __future__ import annotations

from dataclasses import dataclass


class Size:
    """Base of the size expressions; build them with :func:`const`, :func:`sym` and the operators."""

    def __add__(self, other):
        return add(self, as_size(other))

    def __radd__(self, other):
        return add(as_size(other), self)

    def __sub__(self, other):
        return add(self, scale(as_size(other), -1))

    def __rsub__(self, other):
        return add(as_size(other), scale(self, -1))

    def __neg__(self):
        return scale(self, -1)


@dataclass(frozen=True)
class Lin(Size):
    """sum of coeff * name, plus const."""

    terms: tuple  # sorted ((name, coeff), ...), no zero coefficients
    const: int

    def eval(self, env: dict) -> int:
        return self.const + sum(c * int(env[n]) for n, c in self.terms)

    def names(self) -> set:
        return {n for n, _ in self.terms}

    def __str__(self) -> str:
        parts = []
        for n, c in sorted(self.terms, key=lambda t: (t[1] < 0, t[0])):  # H - KH, not -KH + H
            term = n if abs(c) == 1 else f"{abs(c)}*{n}"
            parts.append((c < 0, term))
        if self.const or not parts:
            parts.append((self.const < 0, str(abs(self.const))))
        text = ("-" if parts[0][0] else "") + parts[0][1]
        for neg, term in parts[1:]:
            text += (" - " if neg else " + ") + term
        return text

    def c(self) -> str:
        return f"({self})" if len(self.terms) + bool(self.const) > 1 else str(self)


@dataclass(frozen=True)
class FloorDiv(Size):
    num: Size
    den: int

    def eval(self, env):
        return self.num.eval(env) // self.den

    def names(self):
        return self.num.names()

    def __str__(self):
        return f"floor(({self.num}) / {self.den})"

    def c(self):
        # floor, also for a negative numerator (an empty range), unlike C's '/'
        return f"tc_floordiv({self.num.c()}, {self.den})"


@dataclass(frozen=True)
class Extreme(Size):
    kind: str  # "min" | "max"
    a: Size
    b: Size

    def eval(self, env):
        return (min if self.kind == "min" else max)(self.a.eval(env), self.b.eval(env))

    def names(self):
        return self.a.names() | self.b.names()

    def __str__(self):
        return f"{self.kind}({self.a}, {self.b})"

    def c(self):
        return f"{self.kind}({self.a.c()}, {self.b.c()})"


@dataclass(frozen=True)
class Sum(Size):
    """A non-affine size plus another size: an affine one (floor(M/2) - 1) or a non-affine one."""

    a: Size
    b: Size

    def eval(self, env):
        return self.a.eval(env) + self.b.eval(env)

    def names(self):
        return self.a.names() | self.b.names()

    def __str__(self):
        b = str(self.b)
        # an affine b that starts negative reads as a difference: floor(M/2) - 1, not floor(M/2) + -1
        return f"{self.a} - {b[1:]}" if isinstance(self.b, Lin) and b.startswith("-") else f"{self.a} + {b}"

    def c(self):
        return f"({self.a.c()} + {self.b.c()})"


@dataclass(frozen=True)
class Scaled(Size):
    a: Size
    factor: int

    def eval(self, env):
        return self.factor * self.a.eval(env)

    def names(self):
        return self.a.names()

    def __str__(self):
        return f"{self.factor}*({self.a})"

    def c(self):
        return f"({self.factor} * {self.a.c()})"


def const(value: int) -> Lin:
    return Lin((), int(value))


def sym(name: str) -> Lin:
    return Lin(((name, 1),), 0)


def as_size(value) -> Size:
    if isinstance(value, Size):
        return value
    if isinstance(value, int):
        return const(value)
    raise TypeError(f"not a size: {value!r}")


def _lin(terms: dict, c: int) -> Lin:
    return Lin(tuple(sorted((n, k) for n, k in terms.items() if k)), int(c))


def add(a: Size, b: Size) -> Size:
    if isinstance(a, Lin) and isinstance(b, Lin):
        terms = dict(a.terms)
        for n, k in b.terms:
            terms[n] = terms.get(n, 0) + k
        return _lin(terms, a.const + b.const)
    if isinstance(a, Lin):
        a, b = b, a
    if isinstance(b, Lin):
        if not b.terms and b.const == 0:
            return a
        if isinstance(a, Sum) and isinstance(a.b, Lin):
            return add(a.a, add(a.b, b))  # one affine part: (floor(M/2) - 1) + 1 is floor(M/2)
    return Sum(a, b)


def scale(a: Size, k: int) -> Size:
    if k == 1:
        return a
    if isinstance(a, Lin):
        return _lin({n: c * k for n, c in a.terms}, a.const * k)
    return Scaled(a, k)


def floordiv(a: Size, d: int) -> Size:
    """floor(a / d) for d > 0, simplified where the division is exact."""
    if d == 1:
        return a
    if isinstance(a, Lin) and all(c % d == 0 for _, c in a.terms) and a.const % d == 0:
        return _lin({n: c // d for n, c in a.terms}, a.const // d)
    return FloorDiv(a, d)


def ceildiv(a: Size, d: int) -> Size:
    """ceil(a / d) = -floor(-a / d)."""
    return scale(floordiv(scale(a, -1), d), -1) if d != 1 else a


def difference(a: Size, b: Size) -> int | None:
    """a - b when it is a constant whatever the sizes, else None."""
    if a == b:
        return 0
    diff = add(a, scale(b, -1))
    if isinstance(diff, Lin) and not diff.terms:
        return diff.const
    return None


def smaller(a: Size, b: Size) -> Size:
    d = difference(a, b)
    if d is not None:
        return a if d <= 0 else b
    return Extreme("min", a, b)


def larger(a: Size, b: Size) -> Size:
    d = difference(a, b)
    if d is not None:
        return a if d >= 0 else b
    return Extreme("max", a, b)
