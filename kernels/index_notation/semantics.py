"""Semantic checks and range inference: a syntax tree -> a :class:`CheckedDefinition`.

Range inference follows Tensor Comprehensions: every index of a statement
gets the largest rectangular range for which every tensor access of the
statement is in bounds, found from the accesses themselves.  An access
``I(i + x)`` of a tensor of size M, with x already known to lie in [0, N-1],
gives i in [0, M-N]; a ``where x in lo:hi`` clause sets a range instead.
Output shapes follow from the ranges of the statement that first writes them.

Every error names the line and column of the TC text it is about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from . import sizes as S
from .errors import TcSemanticError
from .syntax import Binary, Call, Definition, Name, Num, Pos, Statement, Ternary, Unary

#: Functions a comprehension may call, and the CUDA C function each becomes.
FUNCTIONS = {
    "fmaxf": ("fmaxf", 2), "fminf": ("fminf", 2), "fmax": ("fmaxf", 2), "fmin": ("fminf", 2),
    "max": ("fmaxf", 2), "min": ("fminf", 2),
    "expf": ("expf", 1), "exp": ("expf", 1), "logf": ("logf", 1), "log": ("logf", 1),
    "sqrtf": ("sqrtf", 1), "sqrt": ("sqrtf", 1), "rsqrtf": ("rsqrtf", 1), "tanhf": ("tanhf", 1), "tanh": ("tanhf", 1),
    "fabsf": ("fabsf", 1), "fabs": ("fabsf", 1), "abs": ("fabsf", 1),
    "sigmoid": ("tc_sigmoid", 1), "relu": ("tc_relu", 1),
    "powf": ("powf", 2), "pow": ("powf", 2),
}

#: Names a comprehension may not use: they would clash with C in the generated kernel.
RESERVED = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true",
    "false", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "def", "where", "in", "half",
}

IDENTITY = {"+": "0.0f", "*": "1.0f", "max": "-INFINITY", "min": "INFINITY"}


@dataclass(frozen=True)
class Tensor:
    name: str
    type: str  # "float" | "int"
    dims: tuple  # Sizes
    is_output: bool
    pos: Pos


@dataclass(frozen=True)
class Constraint:
    """0 <= sum(coeffs[v] * v) + const <= extent - 1, from dimension ``dim`` of an access."""

    tensor: str
    dim: int
    coeffs: tuple  # ((index, coefficient), ...)
    const: S.Size
    extent: S.Size
    access: Call
    expr: object

    @property
    def indices(self) -> set:
        return {v for v, _ in self.coeffs}

    @property
    def is_direct(self) -> bool:
        return len(self.coeffs) == 1 and self.coeffs[0][1] == 1 and S.difference(self.const, S.const(0)) == 0


@dataclass
class CheckedStatement:
    stmt: Statement
    index: int  # position in the definition
    ranges: dict  # index -> (lo, hi), Sizes, both inclusive
    parallel: tuple  # left-hand side indices, in order
    reduction: tuple  # the other indices, in order of first use
    guards: list  # Constraints the ranges do not prove (checked at run time)
    unchecked: list  # accesses with data-dependent indices (e.g. X(I(i,j))), not bounds-checked
    origin: dict = field(default_factory=dict)  # index -> text saying where its range came from
    defines: bool = False  # first statement writing its tensor


@dataclass
class CheckedDefinition:
    definition: Definition
    tensors: dict  # name -> Tensor (inputs in parameter order, then outputs)
    scalars: dict  # name -> type
    size_names: tuple  # in order of first appearance in the parameters
    statements: list

    name = property(attrgetter("definition.name"), doc="The definition's name.")
    text = property(attrgetter("definition.text"), doc="The definition's source text.")

    @property
    def inputs(self) -> list:
        return [t for t in self.tensors.values() if not t.is_output]

    @property
    def outputs(self) -> list:
        return [self.tensors[n] for n in self.definition.outputs]

    def describe_ranges(self) -> str:
        """The inferred ranges and output shapes, one line each, as the chapter prints them."""
        lines = []
        for cs in self.statements:
            lines.append(statement_text(cs.stmt))
            for v in cs.parallel + cs.reduction:
                lo, hi = cs.ranges[v]
                kind = "parallel" if v in cs.parallel else "reduction"
                lines.append(f"    {v:>3} in [{lo}, {hi}]   ({kind}; {cs.origin.get(v, '')})")
            for g in cs.guards:
                lines.append(f"    checked at run time: 0 <= {_show(g.expr)} < {g.extent}  (in {_show(g.access)})")
            for acc in cs.unchecked:
                lines.append(f"    not checked: {_show(acc)} (its index is read from a tensor)")
        for t in self.outputs:
            lines.append(f"output {t.name}: ({', '.join(str(d) for d in t.dims)})")
        return "\n".join(lines)


def statement_text(st: Statement) -> str:
    """A statement as one line of text: ``C(i) +=! A(i,k) * x(k)``."""
    text = f"{st.tensor}({','.join(_show(e) for e in st.indices)}) {st.op} {_show(st.rhs)}"
    if st.where:
        text += " where " + ", ".join(f"{r.index} in {_show(r.lo)}:{_show(r.hi)}" for r in st.where)
    return text


def _show(e) -> str:
    """An expression as text (for messages)."""
    if isinstance(e, Num):
        return repr(e.value) if not e.is_int else str(e.value)
    if isinstance(e, Name):
        return e.name
    if isinstance(e, Call):
        return f"{e.name}({','.join(_show(a) for a in e.args)})"
    if isinstance(e, Unary):
        return f"{e.op}{_show(e.operand)}"
    if isinstance(e, Binary):
        op = e.op
        return f"{_show(e.left)} {op} {_show(e.right)}" if op in "+-" else f"{_show(e.left)}{op}{_show(e.right)}"
    if isinstance(e, Ternary):
        return f"{_show(e.cond)} ? {_show(e.then)} : {_show(e.other)}"
    return str(e)


class _Checker:
    def __init__(self, d: Definition):
        self.d = d
        self.text = d.text
        self.tensors: dict[str, Tensor] = {}
        self.scalars: dict[str, str] = {}
        self.size_names: list[str] = []
        self.defined: set[str] = set()

    def error(self, message: str, pos: Pos, hint: str = ""):
        raise TcSemanticError(message, pos.line, pos.column, self.text, hint)

    # ------------------------------------------------------------------ declarations
    def declarations(self):
        seen: dict[str, Pos] = {}

        def claim(name, pos, what):
            if name in RESERVED or name.startswith("tc_"):
                self.error(f"'{name}' cannot be used as a name (it is reserved in the generated CUDA C)", pos)
            if name in seen:
                self.error(f"'{name}' is declared twice (first at line {seen[name].line}, column {seen[name].column})",
                           pos)
            seen[name] = pos

        for p in self.d.params:
            claim(p.name, p.pos, "parameter")
            if p.is_scalar:
                self.scalars[p.name] = p.type
        sizes_seen: dict[str, Pos] = {}
        for p in self.d.params:
            if p.is_scalar:
                continue
            dims = []
            for dim, dpos in zip(p.dims, p.dim_pos):
                if isinstance(dim, int):
                    if dim < 1:
                        self.error(f"a dimension must be at least 1, not {dim}", dpos)
                    dims.append(S.const(dim))
                    continue
                if dim in self.scalars or (dim in seen and dim not in sizes_seen):
                    self.error(f"'{dim}' is used as a size here but is also a tensor or scalar name", dpos)
                if dim not in sizes_seen:
                    if dim in RESERVED or dim.startswith("tc_"):
                        self.error(f"'{dim}' cannot be used as a name (it is reserved in the generated CUDA C)", dpos)
                    sizes_seen[dim] = dpos
                    self.size_names.append(dim)
                dims.append(S.sym(dim))
            self.tensors[p.name] = Tensor(p.name, p.type, tuple(dims), False, p.pos)
        for name, pos in zip(self.d.outputs, self.d.output_pos):
            if name in sizes_seen:
                self.error(f"'{name}' is an output here but a size in the parameters", pos)
            claim(name, pos, "output")
        self.sizes_seen = sizes_seen
        if not self.d.outputs:
            self.error(f"'{self.d.name}' has no outputs: list them after '->', e.g. -> (C)", self.d.pos)

    # ------------------------------------------------------------------ statements
    def statement(self, index: int, st: Statement) -> CheckedStatement:
        name = st.tensor
        if name not in self.d.outputs:
            if name in self.tensors:
                self.error(f"'{name}' is an input; only the outputs listed after '->' can be written", st.pos)
            self.error(f"'{name}' is not an output of '{self.d.name}' (outputs: {', '.join(self.d.outputs)})", st.pos)
        lhs = []
        for e in st.indices:
            if not isinstance(e, Name) or e.name in self.scalars or e.name in self.sizes_seen:
                self.error("the indices of the left-hand side must be plain index names (like i, j)", _pos_of(e))
            if e.name in lhs:
                self.error(f"index '{e.name}' appears twice on the left-hand side", e.pos)
            lhs.append(e.name)
        defined = name in self.defined
        if not defined and st.op != "=" and not st.initialises:
            self.error(f"'{st.op}' adds to {name}, but {name} has not been written yet",
                       st.op_pos, hint=f"start the reduction with '{st.op}!' (from the operator's identity), "
                                       f"or write {name} with '=' in an earlier statement")
        if defined and len(lhs) != len(self.tensors[name].dims):
            self.error(f"{name} has {len(self.tensors[name].dims)} dimensions but is written with {len(lhs)} indices",
                       st.pos)
        # The right-hand side: names, accesses, functions.
        order: list[str] = []
        accesses: list[Call] = []
        self.walk_value(st.rhs, st, lhs, order, accesses)
        for r in st.where:
            for bound in (r.lo, r.hi):
                self.size_expr(bound)
        where_names = {r.index for r in st.where}
        for r in st.where:
            if r.index in lhs or r.index in order:
                continue
            self.error(f"'where' gives a range to '{r.index}', which the statement does not use", r.pos)
        reduction = tuple(v for v in order if v not in lhs)
        if st.op == "=" and reduction:
            first = _first_use(st.rhs, reduction[0])
            self.error(f"index '{reduction[0]}' is not on the left-hand side, so it would be summed over, but '=' "
                       f"has no reduction operator", first or st.op_pos,
                       hint=f"write '{name}({','.join(lhs)}) +=! ...' to sum over {', '.join(reduction)} "
                            f"(or 'max=!' for a maximum)")
        # Range inference.
        lhs_access = Call(name, st.indices, st.pos)
        constraints, unchecked = [], []
        if defined:
            self.constraints(lhs_access, constraints, unchecked, st)
        for acc in accesses:
            self.constraints(acc, constraints, unchecked, st)
        ranges, origin, used = {}, {}, set()
        for r in st.where:
            lo, hi = self.size_expr(r.lo), self.size_expr(r.hi)
            ranges[r.index] = (lo, hi - 1)
            origin[r.index] = f"where, line {r.pos.line}"
        all_indices = list(dict.fromkeys(lhs + order))
        while True:
            candidates: dict[str, list] = {}
            for ci, c in enumerate(constraints):
                free = [v for v in c.indices if v not in ranges]
                if len(free) == 1:
                    candidates.setdefault(free[0], []).append((ci, c))
            if not candidates:
                break
            for v, found in candidates.items():
                lo = hi = None
                direct = None
                for ci, c in found:
                    clo, chi = self.bounds(v, c, ranges)
                    used.add(ci)
                    if c.is_direct:
                        if direct is not None and S.difference(direct[1].extent, c.extent) != 0:
                            prev = direct[1]
                            self.error(
                                f"index '{v}' ranges over 0:{prev.extent} in {_show(prev.access)} (line "
                                f"{prev.access.pos.line}, column {prev.access.pos.column}) but over 0:{c.extent} "
                                f"in {_show(c.access)}", _pos_of(c.expr),
                                hint="an index must have one range; use separate indices, or sizes with one name")
                        direct = (ci, c)
                    lo = clo if lo is None else S.larger(lo, clo)
                    hi = chi if hi is None else S.smaller(hi, chi)
                ranges[v] = (lo, hi)
                src = found[0][1]
                origin[v] = f"from {_show(src.access)}" + (f" and {len(found) - 1} more" if len(found) > 1 else "")
        for v in all_indices:
            if v not in ranges:
                first = _first_use(st.rhs, v) or next((e.pos for e in st.indices if e.name == v), st.pos)
                self.error(f"cannot infer the range of index '{v}': no tensor access bounds it",
                           first, hint=f"add a range clause, e.g. 'where {v} in 0:N'")
        guards = [c for ci, c in enumerate(constraints) if ci not in used]
        cs = CheckedStatement(st, index, ranges, tuple(lhs), reduction, guards, unchecked, origin, not defined)
        if not defined:
            dims = []
            for v in lhs:
                lo, hi = ranges[v]
                if S.difference(lo, S.const(0)) != 0:
                    self.error(f"the output index '{v}' would start at {lo}, not 0, so {name} would have elements "
                               f"no statement writes", _lhs_pos(st, v),
                               hint=f"give it a range starting at 0 with 'where {v} in 0:...'")
                dims.append(hi + 1)
            self.tensors[name] = Tensor(name, "float", tuple(dims), True, st.pos)
            self.defined.add(name)
        return cs

    def bounds(self, v: str, c: Constraint, ranges: dict):
        coeff = dict(c.coeffs)[v]
        rest_min, rest_max = c.const, c.const
        for u, k in c.coeffs:
            if u == v:
                continue
            lo, hi = ranges[u]
            rest_min = rest_min + (S.scale(lo, k) if k > 0 else S.scale(hi, k))
            rest_max = rest_max + (S.scale(hi, k) if k > 0 else S.scale(lo, k))
        top = c.extent - 1
        if coeff > 0:
            return S.ceildiv(S.scale(rest_min, -1), coeff), S.floordiv(top - rest_max, coeff)
        d = -coeff
        return S.ceildiv(rest_max - top, d), S.floordiv(rest_min, d)

    def walk_value(self, e, st: Statement, lhs: list, order: list, accesses: list):
        """Check a value expression; collect index names (in order) and tensor accesses."""
        if isinstance(e, Num):
            return
        if isinstance(e, Name):
            if e.name in self.scalars or e.name in self.sizes_seen:
                return
            if e.name in self.tensors or e.name in self.d.outputs:
                self.error(f"'{e.name}' is a tensor: access it with indices, e.g. {e.name}(i)", e.pos)
            if e.name in FUNCTIONS:
                self.error(f"'{e.name}' is a function: call it with arguments", e.pos)
            if e.name not in order:
                order.append(e.name)
            return
        if isinstance(e, Call):
            if e.name in self.tensors or e.name in self.d.outputs:
                self.access(e, st, lhs, order, accesses)
                return
            if e.name not in FUNCTIONS:
                self.error(f"unknown function or tensor '{e.name}'", e.pos,
                           hint="functions: " + ", ".join(sorted(FUNCTIONS)))
            arity = FUNCTIONS[e.name][1]
            if len(e.args) != arity:
                self.error(f"{e.name} takes {arity} argument{'s' if arity > 1 else ''}, not {len(e.args)}", e.pos)
            for a in e.args:
                self.walk_value(a, st, lhs, order, accesses)
            return
        if isinstance(e, Unary):
            self.walk_value(e.operand, st, lhs, order, accesses)
            return
        if isinstance(e, Binary):
            self.walk_value(e.left, st, lhs, order, accesses)
            self.walk_value(e.right, st, lhs, order, accesses)
            return
        if isinstance(e, Ternary):
            for part in (e.cond, e.then, e.other):
                self.walk_value(part, st, lhs, order, accesses)
            return
        raise AssertionError(f"unexpected node {e!r}")

    def access(self, e: Call, st: Statement, lhs: list, order: list, accesses: list):
        name = e.name
        if name in self.d.outputs and name not in self.defined:
            if name == st.tensor:
                self.error(f"{name} is read here before any statement has written it", e.pos,
                           hint=f"pass {name} as an input (e.g. 'float(N,K) {name}0' and read {name}0), or start "
                                f"with '+=!' if the statement meant to accumulate from 0")
            self.error(f"{name} is read here before any statement has written it", e.pos,
                       hint="write it in an earlier statement")
        if name == st.tensor:
            same = len(e.args) == len(st.indices) and all(
                isinstance(a, Name) and a.name == b.name for a, b in zip(e.args, st.indices))
            if not same:
                self.error(f"{name} is written as {name}({','.join(v.name for v in st.indices)}) and read here as "
                           f"{_show(e)}: a statement may not read other elements of the tensor it writes (in-place "
                           f"updates are not allowed)", e.pos, hint="write the result into a new output tensor")
        tensor = self.tensors[name]
        if len(e.args) != len(tensor.dims):
            self.error(f"{name} has {len(tensor.dims)} dimension{'s' if len(tensor.dims) != 1 else ''} but is "
                       f"accessed with {len(e.args)} ind{'ices' if len(e.args) != 1 else 'ex'}", e.pos)
        accesses.append(e)
        for a in e.args:
            self.index_names(a, st, lhs, order, accesses)

    def index_names(self, e, st, lhs, order, accesses):
        """Check an index expression (integer valued), collect its indices and nested accesses."""
        if isinstance(e, Num):
            if not e.is_int:
                self.error(f"an index must be an integer, not {e.value!r}", e.pos)
            return
        if isinstance(e, Name):
            if e.name in self.scalars:
                if self.scalars[e.name] != "int":
                    self.error(f"'{e.name}' is a float scalar and cannot be used in an index", e.pos)
                return
            if e.name in self.sizes_seen:
                return
            if e.name in self.tensors or e.name in self.d.outputs:
                self.error(f"'{e.name}' is a tensor: access it with indices, e.g. {e.name}(i)", e.pos)
            if e.name not in order:
                order.append(e.name)
            return
        if isinstance(e, Call):
            if e.name in self.tensors and self.tensors[e.name].type != "int":
                self.error(f"{e.name} holds floats and cannot give an index (only int tensors can)", e.pos)
            if e.name not in self.tensors:
                self.error(f"'{e.name}(...)' cannot be used in an index: only int tensors can give indices", e.pos)
            self.access(e, st, lhs, order, accesses)
            return
        if isinstance(e, Unary) and e.op in "+-":
            self.index_names(e.operand, st, lhs, order, accesses)
            return
        if isinstance(e, Binary) and e.op in ("+", "-", "*", "/", "%"):
            self.index_names(e.left, st, lhs, order, accesses)
            self.index_names(e.right, st, lhs, order, accesses)
            return
        self.error("this cannot be used in an index (indices are integer expressions)", _pos_of(e))

    def constraints(self, acc: Call, out: list, unchecked: list, st: Statement):
        tensor = self.tensors[acc.name]
        data_dependent = False
        for dim, e in enumerate(acc.args):
            form = self.affine(e)
            if form is None:
                data_dependent = True
                continue
            coeffs, c0 = form
            out.append(Constraint(acc.name, dim, tuple(sorted(coeffs.items())), c0, tensor.dims[dim], acc, e))
        if data_dependent:
            unchecked.append(acc)

    def affine(self, e):
        """(coefficients, constant) of an affine index expression, None if it reads a tensor."""
        if isinstance(e, Num):
            return {}, S.const(e.value)
        if isinstance(e, Name):
            if e.name in self.scalars:
                self.error(f"the runtime scalar '{e.name}' cannot take part in range inference", e.pos,
                           hint="write the stride as a literal (e.g. 2 * h + kh for a stride of 2): the inference "
                                "divides by it, so it must be known before the kernel runs")
            if e.name in self.sizes_seen:
                return {}, S.sym(e.name)
            return {e.name: 1}, S.const(0)
        if isinstance(e, Call):
            return None
        if isinstance(e, Unary):
            inner = self.affine(e.operand)
            if inner is None or e.op == "+":
                return inner
            return {v: -k for v, k in inner[0].items()}, S.scale(inner[1], -1)
        if isinstance(e, Binary):
            left, right = self.affine(e.left), self.affine(e.right)
            if e.op in "+-" and left is not None and right is not None:
                sign = 1 if e.op == "+" else -1
                coeffs = dict(left[0])
                for v, k in right[0].items():
                    coeffs[v] = coeffs.get(v, 0) + sign * k
                return {v: k for v, k in coeffs.items() if k}, left[1] + S.scale(right[1], sign)
            if e.op == "*" and left is not None and right is not None:
                for a, b in ((left, right), (right, left)):
                    if not a[0] and isinstance(a[1], S.Lin) and not a[1].terms:
                        k = a[1].const
                        return {v: c * k for v, c in b[0].items() if c * k}, S.scale(b[1], k)
            if left is None or right is None:
                return None
            self.error("index expressions must be affine: sums of indices times integer literals", e.pos)
        raise AssertionError(e)

    def size_expr(self, e) -> S.Size:
        """A range bound of a 'where' clause: integers and size names."""
        if isinstance(e, Num) and e.is_int:
            return S.const(e.value)
        if isinstance(e, Name) and e.name in self.sizes_seen:
            return S.sym(e.name)
        if isinstance(e, Name) and e.name in self.scalars:
            self.error(f"the runtime scalar '{e.name}' cannot bound a range; use a literal or a size name", e.pos)
        if isinstance(e, Unary) and e.op == "-":
            return S.scale(self.size_expr(e.operand), -1)
        if isinstance(e, Binary) and e.op in "+-":
            left, right = self.size_expr(e.left), self.size_expr(e.right)
            return left + right if e.op == "+" else left - right
        if isinstance(e, Binary) and e.op == "*":
            left, right = self.size_expr(e.left), self.size_expr(e.right)
            for a, b in ((left, right), (right, left)):
                if isinstance(a, S.Lin) and not a.terms:
                    return S.scale(b, a.const)
        self.error("a range bound must be an integer expression of literals and size names", _pos_of(e))

    def run(self) -> CheckedDefinition:
        self.declarations()
        statements = [self.statement(i, st) for i, st in enumerate(self.d.statements)]
        for name, pos in zip(self.d.outputs, self.d.output_pos):
            if name not in self.defined:
                self.error(f"the output '{name}' is never written", pos)
        tensors = {n: t for n, t in self.tensors.items() if not t.is_output}
        tensors.update({n: self.tensors[n] for n in self.d.outputs})
        return CheckedDefinition(self.d, tensors, dict(self.scalars), tuple(self.size_names), statements)


def _pos_of(e) -> Pos:
    return getattr(e, "pos", Pos(1, 1))


def _lhs_pos(st: Statement, v: str) -> Pos:
    return next((e.pos for e in st.indices if isinstance(e, Name) and e.name == v), st.pos)


def _first_use(e, name: str):
    """Position of the first occurrence of index ``name`` in an expression."""
    if isinstance(e, Name):
        return e.pos if e.name == name else None
    children = ()
    if isinstance(e, Call):
        children = e.args
    elif isinstance(e, Unary):
        children = (e.operand,)
    elif isinstance(e, Binary):
        children = (e.left, e.right)
    elif isinstance(e, Ternary):
        children = (e.cond, e.then, e.other)
    for c in children:
        p = _first_use(c, name)
        if p is not None:
            return p
    return None


def check(definition: Definition) -> CheckedDefinition:
    """Check one parsed definition and infer its ranges; :class:`TcSemanticError` on the first problem."""
    return _Checker(definition).run()
