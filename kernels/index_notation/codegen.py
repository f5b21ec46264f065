"""Checked comprehension + schedule -> CUDA C source and how to launch each of its kernels.

The generated source is meant to be read: index names are the comprehension's
own, every tensor access is a row-major offset written out, and each kernel
starts with a comment quoting the statements it computes.  Names the
generator adds start with ``tc_`` (which comprehensions may not use).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import sizes as S
from .schedule import NAIVE, Schedule
from .semantics import FUNCTIONS, IDENTITY, CheckedDefinition, CheckedStatement, statement_text
from .syntax import Binary, Call, Name, Num, Ternary, Unary

PRELUDE = """\
#include <math.h>

// floor(a / b) for b > 0, also when a is negative (C's '/' rounds towards zero)
__device__ inline int tc_floordiv(int a, int b) { return (a >= 0 ? a : a - b + 1) / b; }
__device__ inline float tc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ inline float tc_relu(float x) { return fmaxf(x, 0.0f); }
"""


@dataclass(frozen=True)
class KernelPlan:
    """One generated kernel: its name, the statements it computes and its launch shape."""

    name: str
    statements: tuple  # indices into CheckedDefinition.statements
    kind: str  # "linear" | "mapped" | "split"
    block: tuple  # (x, y, z)
    #: per kind: linear -> total elements; mapped -> (last, second last, rest) extents and tile; split -> outputs
    tile: tuple = (1, 1)  # outputs per block along x and y (mapped) or outputs per block (split)

    def grid(self, extents: list[int]) -> tuple:
        """Grid for the parallel extents (in left-hand side order) of this kernel's statements."""
        if self.kind == "linear":
            total = _product(extents)
            return (max(1, -(-total // self.block[0])), 1, 1)
        if self.kind == "split":
            total = _product(extents)
            return (max(1, -(-total // self.block[1])), 1, 1)
        x = extents[-1] if extents else 1
        y = extents[-2] if len(extents) >= 2 else 1
        z = _product(extents[:-2]) if len(extents) > 2 else 1
        return (max(1, -(-x // self.tile[0])), max(1, -(-y // self.tile[1])), max(1, z))


@dataclass(frozen=True)
class GeneratedProgram:
    checked: CheckedDefinition
    schedule: Schedule
    source: str
    kernels: tuple  # KernelPlan
    params: tuple  # (kind, name, C type): kind in size | scalar | input | output


def _product(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


# ---------------------------------------------------------------------- expressions
class _Emitter:
    """Emits expressions of one statement; ``lhs_value`` replaces reads of the element being written."""

    def __init__(self, cd: CheckedDefinition, lhs_tensor: str | None = None, lhs_value: str = "tc_acc",
                 staged: dict | None = None):
        self.cd = cd
        self.lhs_tensor = lhs_tensor
        self.lhs_value = lhs_value
        self.staged = staged or {}  # id(access) -> C expression of the shared-memory element

    def dim(self, tensor: str, d: int) -> str:
        t = self.cd.tensors[tensor]
        size = t.dims[d]
        if not t.is_output:
            return str(size)
        return f"tc_{tensor}_{d}" if d else size.c()

    def offset(self, acc: Call) -> str:
        text = ""
        for d, e in enumerate(acc.args):
            idx = self.index(e)
            if d == 0:
                text = idx
            else:
                text = f"({text}) * {self.dim(acc.name, d)} + {idx}" if "+" in text or "-" in text else \
                    f"{text} * {self.dim(acc.name, d)} + {idx}"
        return text or "0"

    def index(self, e) -> str:
        if isinstance(e, Num):
            return str(e.value)
        if isinstance(e, Name):
            return e.name
        if isinstance(e, Call):
            return f"{e.name}[{self.offset(e)}]"
        if isinstance(e, Unary):
            return f"({e.op}{self.index(e.operand)})"
        if isinstance(e, Binary):
            left, right = self.index(e.left), self.index(e.right)
            if e.op == "*":
                return f"{_wrap(left)} * {_wrap(right)}"
            return f"{left} {e.op} {_wrap(right) if e.op != '+' else right}"
        raise AssertionError(e)

    def value(self, e) -> str:
        if isinstance(e, Num):
            return f"{float(e.value)!r}f".replace("inf", "INFINITY")
        if isinstance(e, Name):
            if e.name in self.cd.scalars:
                return e.name if self.cd.scalars[e.name] == "float" else f"(float){e.name}"
            return f"(float){e.name}"
        if isinstance(e, Call):
            if e.name in self.cd.tensors:
                if e.name == self.lhs_tensor:
                    return self.lhs_value
                if id(e) in self.staged:
                    return self.staged[id(e)]
                read = f"{e.name}[{self.offset(e)}]"
                return read if self.cd.tensors[e.name].type == "float" else f"(float){read}"
            fn = FUNCTIONS[e.name][0]
            return f"{fn}({', '.join(self.value(a) for a in e.args)})"
        if isinstance(e, Unary):
            return f"{e.op}{_wrap(self.value(e.operand))}"
        if isinstance(e, Binary):
            left, right = self.value(e.left), self.value(e.right)
            if e.op == "%":
                return f"fmodf({left}, {right})"
            return f"({left} {e.op} {right})"
        if isinstance(e, Ternary):
            return f"({self.value(e.cond)} ? {self.value(e.then)} : {self.value(e.other)})"
        raise AssertionError(e)


def _wrap(text: str) -> str:
    simple = text.replace("_", "").replace(".", "").isalnum() or (text.startswith("(") and text.endswith(")"))
    return text if simple else f"({text})"


def combine(op: str, acc: str, value: str) -> str:
    if op == "+":
        return f"{acc} += {value};"
    if op == "*":
        return f"{acc} *= {value};"
    return f"{acc} = {'fmaxf' if op == 'max' else 'fminf'}({acc}, {value});"


def _guard(em: _Emitter, cs: CheckedStatement) -> str:
    conds = []
    for g in cs.guards:
        e = em.index(g.expr)
        conds.append(f"{e} >= 0 && {e} < {em.dim(g.tensor, g.dim)}")
    return " && ".join(conds)


# ---------------------------------------------------------------------- grouping
def groups(cd: CheckedDefinition, fuse: bool) -> list[list[int]]:
    """Statements that go into one kernel (consecutive, same tensor, same element, at most one reduction)."""
    out: list[list[int]] = []
    for i, cs in enumerate(cd.statements):
        if fuse and out:
            first = cd.statements[out[-1][0]]
            reductions = sum(1 for j in out[-1] if cd.statements[j].reduction) + bool(cs.reduction)
            same = (cs.stmt.tensor == first.stmt.tensor and cs.parallel == first.parallel
                    and all(cs.ranges[v] == first.ranges[v] for v in cs.parallel) and not cs.defines)
            reads_others = _reads_group_outputs(cd, cs, out[-1])
            if same and reductions <= 1 and not reads_others:
                out[-1].append(i)
                continue
        out.append([i])
    return out


def _reads_group_outputs(cd, cs, group) -> bool:
    """A statement may join a group only if it reads no other tensor written in it (none: one tensor per group)."""
    return False


# ---------------------------------------------------------------------- kernels
class _KernelWriter:
    def __init__(self, cd: CheckedDefinition, sched: Schedule, name: str, group: list[int]):
        self.cd = cd
        self.sched = sched
        self.name = name
        self.group = group
        self.stmts = [cd.statements[i] for i in group]
        self.first = self.stmts[0]
        self.tensor = self.first.stmt.tensor
        self.lines: list[str] = []

    def emit(self, text: str, depth: int):
        self.lines.append("    " * depth + text)

    # Shared pieces -----------------------------------------------------------
    def header(self, params: str):
        self.emit("// " + "\n// ".join(statement_text(cs.stmt) for cs in self.stmts), 0)
        self.emit(f"__global__ void {self.name}({params})", 0)
        self.emit("{", 0)
        out = self.cd.tensors[self.tensor]
        for d, size in enumerate(out.dims):
            if d:  # the first dimension's size is never needed for an offset
                self.emit(f"const int tc_{self.tensor}_{d} = {size.c()};", 1)
        # sizes of other outputs read here
        for cs in self.stmts:
            for acc in _accesses(cs.stmt.rhs):
                t = self.cd.tensors[acc.name]
                if t.is_output and acc.name != self.tensor:
                    for d, size in list(enumerate(t.dims))[1:]:
                        line = f"const int tc_{acc.name}_{d} = {size.c()};"
                        if "    " + line not in self.lines:
                            self.emit(line, 1)

    def lhs_offset(self) -> str:
        em = _Emitter(self.cd)
        return em.offset(Call(self.tensor, tuple(Name(v, self.first.stmt.pos) for v in self.first.parallel),
                              self.first.stmt.pos))

    def body(self, acc: str, depth: int, staged: dict | None = None, only=None, reduction_loop=None):
        """The statements of the group, on the register ``acc``, for the current output element."""
        for k, cs in enumerate(self.stmts):
            if only is not None and k not in only:
                continue
            em = _Emitter(self.cd, self.tensor, acc, staged if cs.reduction else None)
            st = cs.stmt
            reads_lhs = any(a.name == self.tensor for a in _accesses(st.rhs))
            if k == 0 and not cs.defines and reads_lhs and (st.op == "=" or st.initialises):
                # the tensor was written by an earlier kernel: its element is the starting value
                self.emit(f"{acc} = {self.tensor}[{self.lhs_offset()}];", depth)
            if st.op == "=":
                value = em.value(st.rhs)
                guard = _guard(em, cs)
                self.emit(f"{acc} = {value};" if not guard else f"{acc} = ({guard}) ? {value} : 0.0f;", depth)
                continue
            op = st.reduction
            if k == 0 and not st.initialises:
                self.emit(f"{acc} = {self.tensor}[{self.lhs_offset()}];", depth)
            if st.initialises:
                self.emit(f"{acc} = {IDENTITY[op]};", depth)
            if reduction_loop is not None and cs.reduction:
                reduction_loop(cs, em, acc, depth)
                continue
            d = depth
            for v in cs.reduction:
                lo, hi = cs.ranges[v]
                if v == cs.reduction[-1] and self.sched.unroll > 1:
                    self.emit(f"#pragma unroll {self.sched.unroll}", d)
                self.emit(f"for (int {v} = {lo.c()}; {v} < {(hi + 1).c()}; ++{v}) {{", d)
                d += 1
            guard = _guard(em, cs)
            update = combine(op, acc, em.value(st.rhs))
            self.emit(update if not guard else f"if ({guard}) {update}", d)
            for _ in cs.reduction:
                d -= 1
                self.emit("}", d)

    # Naive: one thread per element on a 1-D grid ----------------------------------------------
    def linear(self, params: str) -> KernelPlan:
        self.header(params)
        cs = self.first
        self.emit("int tc_linear = blockIdx.x * blockDim.x + threadIdx.x;", 1)
        exts = []
        for v in cs.parallel:
            lo, hi = cs.ranges[v]
            exts.append(f"({(hi - lo + 1).c()})")
        self.emit(f"if (tc_linear >= {' * '.join(exts) or '1'}) return;", 1)
        for v in reversed(cs.parallel):
            lo, hi = cs.ranges[v]
            ext = (hi - lo + 1).c()
            start = "" if S.difference(lo, S.const(0)) == 0 else f"{lo.c()} + "
            self.emit(f"const int {v} = {start}tc_linear % {ext};", 1)
            if v != cs.parallel[0]:
                self.emit(f"tc_linear /= {ext};", 1)
        self.emit("float tc_acc;", 1)
        self.body("tc_acc", 1)
        self.emit(f"{self.tensor}[{self.lhs_offset()}] = tc_acc;", 1)
        self.emit("}", 0)
        return KernelPlan(self.name, tuple(self.group), "linear", (self.sched.threads, 1, 1))

    # Mapped blocks, register blocking, shared-memory tiles ------------------------------------
    def mapped(self, params: str) -> KernelPlan:
        cs = self.first
        bx, by = self.sched.block
        ry, rx = self.sched.regs
        par = list(cs.parallel)
        vx = par[-1] if par else None
        vy = par[-2] if len(par) >= 2 else None
        rest = par[:-2]
        if vy is None:
            by, ry = 1, 1
        self.header(params)
        self.emit(f"// block {bx}x{by} threads, {ry}x{rx} outputs per thread", 1)
        for v, base_expr in ((vx, f"blockIdx.x * {bx * rx}"), (vy, f"blockIdx.y * {by * ry}")):
            if v is None:
                continue
            lo, _ = cs.ranges[v]
            start = "" if S.difference(lo, S.const(0)) == 0 else f"{lo.c()} + "
            self.emit(f"const int tc_{v}0 = {start}{base_expr};  // first {v} of this block", 1)
        if rest:
            self.emit("int tc_z = blockIdx.z;", 1)
            for v in reversed(rest):
                lo, hi = cs.ranges[v]
                ext = (hi - lo + 1).c()
                start = "" if S.difference(lo, S.const(0)) == 0 else f"{lo.c()} + "
                self.emit(f"const int {v} = {start}tc_z % {ext};", 1)
                if v != rest[0]:
                    self.emit(f"tc_z /= {ext};", 1)
        self.emit(f"float tc_acc[{ry}][{rx}];", 1)

        def element(depth, inner):
            """Emit ``inner(depth)`` for each of the thread's ry x rx outputs, with vx, vy defined."""
            self.emit(f"#pragma unroll", depth)
            self.emit(f"for (int tc_ry = 0; tc_ry < {ry}; ++tc_ry) {{", depth)
            self.emit(f"#pragma unroll", depth + 1)
            self.emit(f"for (int tc_rx = 0; tc_rx < {rx}; ++tc_rx) {{", depth + 1)
            d = depth + 2
            if vy is not None:
                self.emit(f"const int {vy} = tc_{vy}0 + threadIdx.y + tc_ry * {by};", d)
            self.emit(f"const int {vx} = tc_{vx}0 + threadIdx.x + tc_rx * {bx};", d)
            inner(d)
            self.emit("}", depth + 1)
            self.emit("}", depth)

        def in_range():
            conds = []
            for v in (vy, vx):
                if v is not None:
                    conds.append(f"{v} <= {cs.ranges[v][1].c()}")
            return " && ".join(conds)

        red_index = next((k for k, c in enumerate(self.stmts) if c.reduction), None)
        tile = self.sched.tile_k if red_index is not None and self.stmts[red_index].stmt.reduction else 0
        staged = {}
        if tile:
            staged = self.plan_tiles(self.stmts[red_index], vx, vy, bx * rx, by * ry, tile)
            if not staged:
                tile = 0
        if red_index is None or sum(1 for c in self.stmts if c.reduction) > 1:
            # No reduction to hoist: every output computed where it stands.
            def whole(d):
                self.emit(f"if ({in_range()}) {{", d)
                self.emit("float tc_v;", d + 1)
                self.body("tc_v", d + 1)
                self.emit(f"{self.tensor}[{self.lhs_offset()}] = tc_v;", d + 1)
                self.emit("}", d)
            element(1, whole)
        else:
            red = self.stmts[red_index]
            pre, post = set(range(red_index)), set(range(red_index + 1, len(self.stmts)))

            def init(d):
                self.emit(f"float &tc_v = tc_acc[tc_ry][tc_rx];", d)
                if pre:
                    self.emit(f"if ({in_range()}) {{", d)
                    self.body("tc_v", d + 1, only=pre)
                    self.emit("}", d)
                    if not red.stmt.initialises:
                        return
                if red.stmt.initialises:
                    self.emit(f"tc_v = {IDENTITY[red.stmt.reduction]};", d)
                elif red_index == 0:
                    self.emit(f"tc_v = ({in_range()}) ? {self.tensor}[{self.lhs_offset()}] : 0.0f;", d)
            element(1, init)
            self.tiled_reduction(red, staged, vx, vy, bx, by, ry, rx, tile, element, in_range)

            def finish(d):
                self.emit(f"if ({in_range()}) {{", d)
                self.emit("float tc_v = tc_acc[tc_ry][tc_rx];", d + 1)
                self.body("tc_v", d + 1, only=post)
                self.emit(f"{self.tensor}[{self.lhs_offset()}] = tc_v;", d + 1)
                self.emit("}", d)
            element(1, finish)
        self.emit("}", 0)
        return KernelPlan(self.name, tuple(self.group), "mapped", (bx, by, 1), (bx * rx, by * ry))

    def plan_tiles(self, cs: CheckedStatement, vx, vy, tx: int, ty: int, tk: int) -> dict:
        """Accesses of the reduction to copy into shared memory: id(access) -> (name, dims, access)."""
        k = cs.reduction[0]
        guarded = {id(g.access) for g in cs.guards}
        uniform = set(cs.parallel) - {vx, vy}
        plans = {}
        for n, acc in enumerate(_accesses(cs.stmt.rhs)):
            t = self.cd.tensors[acc.name]
            if acc.name == self.tensor or id(acc) in guarded or t.type != "float":
                continue
            used = set()
            ok = True
            for e in acc.args:
                names = _names(e)
                if names is None:
                    ok = False
                    break
                used |= names
            if not ok or k not in used or not used <= ({vx, vy, k} | uniform) - {None}:
                continue
            # Stored [k][vy][vx]: threads along x read consecutive words (no bank conflicts), and
            # along y the same word (a broadcast).
            dims = [(v, ext) for v, ext in ((k, tk), (vy, ty), (vx, tx)) if v in used]
            # Copied in the order of global memory: the index of the tensor's last dimension fastest,
            # so that consecutive threads load consecutive addresses.
            last = _names(acc.args[-1]) & {v for v, _ in dims} if acc.args else set()
            fastest = next((v for v, _ in dims if v in last), dims[-1][0])
            order = [d for d in dims if d[0] != fastest] + [d for d in dims if d[0] == fastest]
            pad = 1 if fastest != dims[-1][0] else 0  # a column-wise copy: pad rows against bank conflicts
            plans[id(acc)] = (f"tc_s{n}_{acc.name}", dims, acc, order, pad)
        return plans

    def tiled_reduction(self, cs, plans, vx, vy, bx, by, ry, rx, tk, element, in_range):
        if not tk:
            return self.plain_reduction(cs, element, in_range)
        k = cs.reduction[0]
        lo, hi = cs.ranges[k]
        em_plain = _Emitter(self.cd, self.tensor, "tc_v")
        for name, dims, acc, order, pad in plans.values():
            shape = "".join(f"[{ext + (pad if n == len(dims) - 1 else 0)}]" for n, (_, ext) in enumerate(dims))
            self.emit(f"__shared__ float {name}{shape};  // {acc.name} for this block's tile", 1)
        self.emit(f"const int tc_tid = threadIdx.y * {bx} + threadIdx.x;", 1)
        self.emit(f"for (int tc_{k}0 = {lo.c()}; tc_{k}0 <= {hi.c()}; tc_{k}0 += {tk}) {{", 1)
        bases = {vx: f"tc_{vx}0", vy: f"tc_{vy}0", k: f"tc_{k}0"}
        for name, dims, acc, order, pad in plans.values():
            count = _product(ext for _, ext in dims)
            self.emit(f"// copy the tile of {acc.name} (zeros outside its range)", 2)
            self.emit(f"for (int tc_e = tc_tid; tc_e < {count}; tc_e += {bx * by}) {{", 2)
            rem = "tc_e"
            for n, (v, ext) in enumerate(reversed(order)):
                self.emit(f"const int {v} = {bases[v]} + ({rem} % {ext});" if n < len(order) - 1 else
                          f"const int {v} = {bases[v]} + {rem};", 3)
                rem = f"(tc_e / {_product(e for _, e in list(reversed(order))[:n + 1])})"
            conds = " && ".join(f"{v} <= {(cs.ranges[v][1]).c()}" for v, _ in dims)
            local = "".join(f"[{v} - {bases[v]}]" for v, _ in dims)
            self.emit(f"{name}{local} = ({conds}) ? {acc.name}[{em_plain.offset(acc)}] : 0.0f;", 3)
            self.emit("}", 2)
        self.emit("__syncthreads();", 2)
        self.emit(f"const int tc_kn = min({tk}, {hi.c()} - tc_{k}0 + 1);", 2)
        if self.sched.unroll > 1:
            self.emit(f"#pragma unroll {self.sched.unroll}", 2)
        self.emit(f"for (int tc_kk = 0; tc_kk < tc_kn; ++tc_kk) {{", 2)
        self.emit(f"const int {k} = tc_{k}0 + tc_kk;", 3)
        staged = {}
        for key, (name, dims, acc, order, pad) in plans.items():
            staged[key] = name + "".join(f"[{v} - {bases[v]}]" for v, _ in dims)
        others = cs.reduction[1:]
        # Out-of-range outputs read zeros from the tiles: without other accesses they need no check here.
        all_staged = len(plans) == len([a for a in _accesses(cs.stmt.rhs) if a.name != self.tensor])

        def update(d):
            self.emit("float &tc_v = tc_acc[tc_ry][tc_rx];", d)
            em = _Emitter(self.cd, self.tensor, "tc_v", staged)
            dd = d
            for v in others:
                lo2, hi2 = cs.ranges[v]
                self.emit(f"for (int {v} = {lo2.c()}; {v} < {(hi2 + 1).c()}; ++{v}) {{", dd)
                dd += 1
            guard = " && ".join(c for c in ("" if all_staged else in_range(), _guard(em, cs)) if c)
            upd = combine(cs.stmt.reduction, "tc_v", em.value(cs.stmt.rhs))
            self.emit(upd if not guard else f"if ({guard}) {upd}", dd)
            for _ in others:
                dd -= 1
                self.emit("}", dd)
        element(3, update)
        self.emit("}", 2)
        self.emit("__syncthreads();", 2)
        self.emit("}", 1)

    def plain_reduction(self, cs, element, in_range):
        """Reduction loops outside, the thread's ry x rx outputs inside (operands reused from registers)."""
        em = _Emitter(self.cd, self.tensor, "tc_v")
        d = 1
        for v in cs.reduction:
            lo, hi = cs.ranges[v]
            if v == cs.reduction[-1] and self.sched.unroll > 1:
                self.emit(f"#pragma unroll {self.sched.unroll}", d)
            self.emit(f"for (int {v} = {lo.c()}; {v} < {(hi + 1).c()}; ++{v}) {{", d)
            d += 1

        def update(dd):
            self.emit("float &tc_v = tc_acc[tc_ry][tc_rx];", dd)
            guard = " && ".join(c for c in (in_range(), _guard(em, cs)) if c)
            upd = combine(cs.stmt.reduction, "tc_v", em.value(cs.stmt.rhs))
            self.emit(upd if not guard else f"if ({guard}) {upd}", dd)
        element(d, update)
        for _ in cs.reduction:
            d -= 1
            self.emit("}", d)

    # Reduction across threads ---------------------------------------------------------------
    def split(self, params: str) -> KernelPlan:
        r = self.sched.split
        oy = self.sched.block[1]
        red_index = next(k for k, c in enumerate(self.stmts) if c.reduction)
        red = self.stmts[red_index]
        cs = self.first
        self.header(params)
        self.emit(f"// {r} threads (threadIdx.x) share the reduction of one output; {oy} outputs per block", 1)
        self.emit(f"int tc_linear = blockIdx.x * {oy} + threadIdx.y;", 1)
        exts = [f"({(cs.ranges[v][1] - cs.ranges[v][0] + 1).c()})" for v in cs.parallel]
        self.emit(f"const bool tc_active = tc_linear < {' * '.join(exts) or '1'};", 1)
        self.emit("if (!tc_active) tc_linear = 0;  // idle rows still take part in the shuffles", 1)
        for v in reversed(cs.parallel):
            lo, hi = cs.ranges[v]
            ext = (hi - lo + 1).c()
            start = "" if S.difference(lo, S.const(0)) == 0 else f"{lo.c()} + "
            self.emit(f"const int {v} = {start}tc_linear % {ext};", 1)
            if v != cs.parallel[0]:
                self.emit(f"tc_linear /= {ext};", 1)
        op = red.stmt.reduction
        self.emit(f"float tc_part = {IDENTITY[op]};", 1)
        red_exts = [(v, cs_r) for v, cs_r in ((v, red.ranges[v]) for v in red.reduction)]
        total = " * ".join(f"({(hi - lo + 1).c()})" for _, (lo, hi) in red_exts)
        self.emit(f"for (int tc_r = threadIdx.x; tc_r < {total}; tc_r += {r}) {{", 1)
        self.emit("int tc_rest = tc_r;", 2)
        for n, (v, (lo, hi)) in enumerate(reversed(red_exts)):
            start = "" if S.difference(lo, S.const(0)) == 0 else f"{lo.c()} + "
            if n == len(red_exts) - 1:  # the outermost index needs no '%' (tc_rest is below its extent)
                self.emit(f"const int {v} = {start}tc_rest;", 2)
                continue
            self.emit(f"const int {v} = {start}tc_rest % {(hi - lo + 1).c()};", 2)
            self.emit(f"tc_rest /= {(hi - lo + 1).c()};", 2)
        em = _Emitter(self.cd, self.tensor, "tc_part")
        guard = _guard(em, red)
        upd = combine(op, "tc_part", em.value(red.stmt.rhs))
        self.emit(upd if not guard else f"if ({guard}) {upd}", 2)
        self.emit("}", 1)
        self.emit("// combine the partial results: within each warp, then across the warps of a row", 1)
        self.emit("#pragma unroll", 1)
        self.emit("for (int tc_off = 16; tc_off > 0; tc_off /= 2) {", 1)
        self.emit(combine(op, "tc_part", "__shfl_down_sync(0xffffffffu, tc_part, tc_off)"), 2)
        self.emit("}", 1)
        warps = r // 32
        if warps > 1:
            self.emit(f"__shared__ float tc_warp[{oy}][{warps}];", 1)
            self.emit("if (threadIdx.x % 32 == 0) tc_warp[threadIdx.y][threadIdx.x / 32] = tc_part;", 1)
            self.emit("__syncthreads();", 1)
            self.emit("if (threadIdx.x == 0) {", 1)
            self.emit(f"for (int tc_w = 1; tc_w < {warps}; ++tc_w) {combine(op, 'tc_part', 'tc_warp[threadIdx.y][tc_w]')}", 2)
            self.emit("}", 1)
        self.emit("if (threadIdx.x != 0 || !tc_active) return;", 1)
        self.emit("float tc_v;", 1)
        pre = set(range(red_index))
        post = set(range(red_index + 1, len(self.stmts)))
        if pre:
            self.body("tc_v", 1, only=pre)
            if red.stmt.initialises:
                self.emit("tc_v = tc_part;", 1)
            else:
                self.emit(combine(op, "tc_v", "tc_part"), 1)
        elif red.stmt.initialises:
            self.emit("tc_v = tc_part;", 1)
        else:
            self.emit(f"tc_v = {self.tensor}[{self.lhs_offset()}];", 1)
            self.emit(combine(op, "tc_v", "tc_part"), 1)
        self.body("tc_v", 1, only=post)
        self.emit(f"{self.tensor}[{self.lhs_offset()}] = tc_v;", 1)
        self.emit("}", 0)
        return KernelPlan(self.name, tuple(self.group), "split", (r, oy, 1), (1, oy))


def _accesses(e) -> list:
    """Tensor accesses of an expression, outermost first (function calls are not accesses)."""
    out = []
    if isinstance(e, Call):
        if e.name not in FUNCTIONS:
            out.append(e)
        for a in e.args:
            out += _accesses(a)
    elif isinstance(e, Unary):
        out += _accesses(e.operand)
    elif isinstance(e, Binary):
        out += _accesses(e.left) + _accesses(e.right)
    elif isinstance(e, Ternary):
        out += _accesses(e.cond) + _accesses(e.then) + _accesses(e.other)
    return out


def _names(e):
    """Index and size names of an affine index expression; None if it reads a tensor."""
    if isinstance(e, Num):
        return set()
    if isinstance(e, Name):
        return {e.name}
    if isinstance(e, Call):
        return None
    if isinstance(e, Unary):
        return _names(e.operand)
    if isinstance(e, Binary):
        a, b = _names(e.left), _names(e.right)
        return None if a is None or b is None else a | b
    return None


def parameters(cd: CheckedDefinition) -> tuple:
    params = [("size", n, "int") for n in cd.size_names]
    params += [("scalar", n, t) for n, t in cd.scalars.items()]
    params += [("input", t.name, f"const {t.type}*") for t in cd.inputs]
    params += [("output", t.name, "float*") for t in cd.outputs]
    return tuple(params)


def generate(cd: CheckedDefinition, schedule: Schedule | None = None) -> GeneratedProgram:
    """CUDA C for a checked comprehension under ``schedule`` (the naive one by default)."""
    sched = schedule or NAIVE
    params = parameters(cd)
    # Sizes an output reads (every size) are known to all kernels; '__restrict__' lets the
    # compiler keep loaded values in registers (no output aliases an input).
    decl = ", ".join(f"{t} {'__restrict__ ' if '*' in t else ''}{n}".replace("* __restrict__", "* __restrict__")
                     for _, n, t in params)
    decl = ", ".join(f"{t} {n}" if "*" not in t else f"{t} __restrict__ {n}" for _, n, t in params)
    chunks, plans = [PRELUDE], []
    for g, group in enumerate(groups(cd, sched.fuse and not sched.naive)):
        name = f"{cd.name}_{g}" if len(cd.statements) > 1 else cd.name
        writer = _KernelWriter(cd, sched, name, group)
        has_reduction = any(writer.stmts[k].reduction for k in range(len(group)))
        n_reductions = sum(1 for c in writer.stmts if c.reduction)
        if sched.naive or not writer.first.parallel:
            plan = writer.linear(decl)
        elif sched.split and has_reduction and n_reductions == 1:
            plan = writer.split(decl)
        else:
            if n_reductions > 1:
                writer.sched = sched.with_(tile_k=0)
            plan = writer.mapped(decl)
        chunks.append("\n".join(writer.lines) + "\n")
        plans.append(plan)
    return GeneratedProgram(cd, sched, "\n".join(chunks), tuple(plans), params)
