"""Tile IR -> runnable DSL text (`import tilecore.language as T` + a `@T.prim_func`).

Parsing the printed text gives an IR equal to the printed one (spans aside),
for every IR the frontend can produce: constants are written bare only where
the frontend's literal rule ("a literal adopts the other operand's dtype")
gives them back with the same dtype, and as `T.float16(2.0)` elsewhere;
regions are written as start points where the other operand determines them
and as slices otherwise. `Copy.predicated` is an analysis result (the bounds
pass clears it) and has no DSL spelling: a proven copy is printed with a
comment saying so, and parses back as predicated.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

from . import nodes as N
from .types import INDEX_DTYPE
from .visitor import Dispatcher

INDENT = "    "

# Python precedence of what we print (higher binds tighter).
PRECEDENCE = {
    "or": 1,
    "and": 2,
    "not": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "==": 4,
    "!=": 4,
    "|": 5,
    "^": 6,
    "&": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "//": 10,
    "%": 10,
    "neg": 11,
    "~": 11,
}
ATOM = 12
CALL_OPS = ("min", "max", "pow")
ALLOC_FUNCS = {"shared": "alloc_shared", "fragment": "alloc_fragment", "local": "alloc_local", "global": "alloc_global"}


def adopted_dtype(value: object, other: str) -> str:
    """The frontend's literal rule (kept in one place: tilecore.frontend.exprs)."""
    from ..frontend.exprs import adopted_dtype as rule

    return rule(value, other)


def to_source(func: N.PrimFunc) -> str:
    """The DSL text of `func`."""
    return _Printer(func).program()


def expr_to_source(e: N.Expr) -> str:
    """One expression as DSL text (for messages and IR dumps)."""
    return _Printer(None).expr(e)


class _Printer(Dispatcher):
    """Writes one PrimFunc (or expression) as DSL text; a `stmt_`/`expr_` method per node class."""

    def __init__(self, func: Optional[N.PrimFunc]) -> None:
        self.func = func
        self.T = "T"
        if func is not None:
            names = {p.name for p in func.params} | {v.name for v in func.dyn_vars}
            names |= {n.name for n in _all_named(func)}
            while self.T in names:
                self.T += "_"
        self.lines: List[str] = []

    # ------------------------------------------------------------------ program

    def program(self) -> str:
        """The whole module text of the PrimFunc given at construction."""
        f = self.func
        if f is None:
            raise TypeError("the printer was made for one expression, not a PrimFunc")
        out = [f"import tilecore.language as {self.T}", ""]
        scalars = set(f.scalar_names)
        dims = [v for v in f.dyn_vars if v.name not in scalars]
        for v in dims:
            out.append(f'{v.name} = {self.T}.dynamic("{v.name}", "{v.dtype}")')
        if dims:
            out.append("")
        params = [f'{p.name}: {self.T}.Tensor({self.shape(p.shape)}, "{p.dtype}")' for p in f.params]
        for position, v in f.scalar_params:
            params.insert(position, f"{v.name}: {self.T}.{v.dtype}")
        out += [f"@{self.T}.prim_func", f"def {f.name}({', '.join(params)}):"]
        self.body(f.body, 1)
        return "\n".join(out + self.lines) + "\n"

    def shape(self, shape: Sequence[object]) -> str:
        parts = [d.name if isinstance(d, N.Var) else str(d) for d in shape]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    def body(self, body: Sequence[N.Stmt], depth: int) -> None:
        if not body:
            self.emit(depth, "pass")
        for s in body:
            self.dispatch("stmt_", s, depth)

    # ------------------------------------------------------------------ expressions

    def expr(self, e: N.Expr, need: int = 0) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < need else text

    def _expr(self, e: N.Expr) -> Tuple[str, int]:
        text, prec = self.dispatch("expr_", e)
        return str(text), int(prec)

    def no_handler(self, prefix: str, node: object, *args: Any) -> Any:
        """Printing a node class the printer does not know is a TypeError naming it."""
        raise TypeError(f"cannot print {type(node).__name__}")

    def expr_Const(self, e: N.Const) -> Tuple[str, int]:
        return self.explicit_const(e), ATOM

    def expr_Var(self, e: N.Var) -> Tuple[str, int]:
        return e.name, ATOM

    def expr_Load(self, e: N.Load) -> Tuple[str, int]:
        if e.buffer.scope == "var" and e.indices == (N.Const(0, INDEX_DTYPE),):
            return e.buffer.name, ATOM
        return f"{e.buffer.name}[{self.indices(e.indices)}]", ATOM

    def expr_BinOp(self, e: N.BinOp) -> Tuple[str, int]:
        return self.binop(e)

    def expr_UnaryOp(self, e: N.UnaryOp) -> Tuple[str, int]:
        if e.op == "not":
            return f"not {self.expr(e.a, PRECEDENCE['not'])}", PRECEDENCE["not"]
        sign = "-" if e.op == "neg" else "~"
        return f"{sign}{self.expr(e.a, PRECEDENCE['neg'])}", PRECEDENCE["neg"]

    def expr_Call(self, e: N.Call) -> Tuple[str, int]:
        return f"{self.T}.{e.func}({', '.join(self.expr(a) for a in e.args)})", ATOM

    def expr_Cast(self, e: N.Cast) -> Tuple[str, int]:
        return f'{self.T}.cast({self.expr(e.value)}, "{e.dtype}")', ATOM

    def expr_Select(self, e: N.Select) -> Tuple[str, int]:
        a, b = self.operand_pair(e.a, e.b)
        return f"{self.T}.if_then_else({self.expr(e.cond)}, {a}, {b})", ATOM

    def explicit_const(self, c: N.Const) -> str:
        if isinstance(c.value, float) and not math.isfinite(c.value):
            if c.value > 0:
                return f'{self.T}.infinity("{c.dtype}")'
            return f'{self.T}.{c.dtype}("{c.value!r}")'
        return f"{self.T}.{c.dtype}({c.value!r})"

    def bare_ok(self, c: N.Expr, other_dtype: str) -> bool:
        """Whether `c` may be written as a plain literal next to an operand of `other_dtype`."""
        if not isinstance(c, N.Const):
            return False
        if isinstance(c.value, float) and not math.isfinite(c.value):
            return False
        return adopted_dtype(c.value, other_dtype) == c.dtype

    def literal(self, c: N.Expr) -> Tuple[str, int]:
        assert isinstance(c, N.Const), c
        text = repr(c.value)
        return text, (PRECEDENCE["neg"] if text.startswith("-") else ATOM)

    def operand(self, e: N.Expr, other: N.Expr, need: int) -> str:
        if not isinstance(other, N.Const) and self.bare_ok(e, other.dtype):
            text, prec = self.literal(e)
            return f"({text})" if prec < need else text
        return self.expr(e, need)

    def operand_pair(self, a: N.Expr, b: N.Expr, need_a: int = 0, need_b: int = 0) -> Tuple[str, str]:
        return self.operand(a, b, need_a), self.operand(b, a, need_b)

    def binop(self, e: N.BinOp) -> Tuple[str, int]:
        if e.op in CALL_OPS:
            a, b = self.operand_pair(e.a, e.b)
            return f"{self.T}.{e.op}({a}, {b})", ATOM
        prec = PRECEDENCE[e.op]
        if e.op in ("and", "or"):
            return f"{self.expr(e.a, prec)} {e.op} {self.expr(e.b, prec + 1)}", prec
        compare = prec == PRECEDENCE["<"]
        a, b = self.operand_pair(e.a, e.b, prec + 1 if compare else prec, prec + 1)
        return f"{a} {e.op} {b}", prec

    def index(self, e: N.Expr) -> str:
        if isinstance(e, N.Const) and e.dtype == INDEX_DTYPE:
            return repr(e.value)
        return self.expr(e)

    def indices(self, indices: Sequence[N.Expr]) -> str:
        return ", ".join(self.index(i) for i in indices)

    def value_for(self, e: N.Expr, dtype: str) -> str:
        """A value stored into / combined with a `dtype` buffer (literals adopt it)."""
        if self.bare_ok(e, dtype):
            return self.literal(e)[0]
        return self.expr(e)

    # ------------------------------------------------------------------ regions

    def is_whole(self, r: N.Region) -> bool:
        zero = N.Const(0, INDEX_DTYPE)
        return all(s == zero for s in r.starts) and tuple(r.extents) == tuple(r.buffer.shape)

    def region(self, r: N.Region) -> str:
        """A region with its own extents: the bare buffer or a slice form."""
        if self.is_whole(r):
            return r.buffer.name
        dims = []
        for axis, (start, extent) in enumerate(zip(r.starts, r.extents)):
            dims.append(self.slice_dim(r, axis, start, extent))
        if not any(":" in d for d in dims):  # every extent is 1: keep it a slice form
            start = r.starts[-1]
            dims[-1] = self.slice_text(start, 1)
        return f"{r.buffer.name}[{', '.join(dims)}]"

    def slice_dim(self, r: N.Region, axis: int, start: N.Expr, extent: int) -> str:
        if extent == 1:
            return self.index(start)
        if start == N.Const(0, INDEX_DTYPE) and r.buffer.shape[axis] == extent:
            return ":"
        return self.slice_text(start, extent)

    def slice_text(self, start: N.Expr, extent: int) -> str:
        if isinstance(start, N.Const) and start.dtype == INDEX_DTYPE:
            return f"{start.value}:{start.value + extent}"
        return f"{self.expr(start, PRECEDENCE['+'])}:{self.expr(start, PRECEDENCE['+'])} + {extent}"

    def region_pair(self, a: N.Region, b: N.Region) -> Tuple[str, str]:
        """Two regions covering the same tile; one side as a start point where that is exact."""
        from ..frontend.regions import fit_extents

        def start_point_ok(x: N.Region, other: N.Region) -> bool:
            if not self.is_whole(other):
                return False
            try:
                return bool(fit_extents(other.extents, len(x.starts)) == tuple(x.extents))
            except ValueError:
                return False

        if start_point_ok(a, b) and not self.is_whole(a):
            return f"{a.buffer.name}[{self.indices(a.starts)}]", b.buffer.name
        if start_point_ok(b, a) and not self.is_whole(b):
            return a.buffer.name, f"{b.buffer.name}[{self.indices(b.starts)}]"
        return self.region(a), self.region(b)

    # ------------------------------------------------------------------ statements

    def stmt_Kernel(self, s: N.Kernel, depth: int) -> None:
        grid = ", ".join(self.index(g) for g in s.grid)
        threads = str(s.threads[0]) if len(s.threads) == 1 else "(" + ", ".join(map(str, s.threads)) + ")"
        names = ", ".join(v.name for v in s.block_vars)
        target = names if len(s.block_vars) == 1 else f"({names})"
        self.emit(depth, f"with {self.T}.Kernel({grid}, threads={threads}) as {target}:")
        self.body(s.body, depth + 1)

    def stmt_Alloc(self, s: N.Alloc, depth: int) -> None:
        b = s.buffer
        if b.scope == "var":
            self.emit(depth, f'{b.name} = {self.T}.alloc_var("{b.dtype}")')
        else:
            self.emit(depth, f'{b.name} = {self.T}.{ALLOC_FUNCS[b.scope]}({self.shape(b.shape)}, "{b.dtype}")')

    def stmt_Store(self, s: N.Store, depth: int) -> None:
        value = self.value_for(s.value, s.buffer.dtype)
        if s.buffer.scope == "var" and s.indices == (N.Const(0, INDEX_DTYPE),):
            self.emit(depth, f"{s.buffer.name} = {value}")
        else:
            self.emit(depth, f"{s.buffer.name}[{self.indices(s.indices)}] = {value}")

    def stmt_Let(self, s: N.Let, depth: int) -> None:
        self.emit(depth, f"{s.var.name} = {self.expr(s.value)}")

    def stmt_For(self, s: N.For, depth: int) -> None:
        func = {"serial": "serial", "unroll": "unroll", "pipelined": "Pipelined"}[s.kind]
        args = self.loop_bounds(s.begin, s.extent)
        if s.kind == "pipelined":
            args += f", num_stages={s.num_stages}"
        self.emit(depth, f"for {s.var.name} in {self.T}.{func}({args}):")
        self.body(s.body, depth + 1)

    def loop_bounds(self, begin: N.Expr, extent: N.Expr) -> str:
        """Arguments that the frontend's `(start[, stop])` turns back into begin and extent."""
        if begin == N.Const(0, INDEX_DTYPE):
            return self.index(extent)
        if isinstance(begin, N.Const) and isinstance(extent, N.Const) and begin.dtype == extent.dtype == INDEX_DTYPE:
            return f"{begin.value}, {begin.value + extent.value}"
        if (
            isinstance(extent, N.BinOp)
            and extent.op == "-"
            and extent.b == begin
            and not (isinstance(extent.a, N.BinOp) and extent.a.op == "+" and extent.a.a == begin)
        ):
            return f"{self.index(begin)}, {self.index(extent.a)}"
        end = N.BinOp("+", begin, extent, begin.dtype)
        return f"{self.index(begin)}, {self.expr(end)}"

    def stmt_Parallel(self, s: N.Parallel, depth: int) -> None:
        names = ", ".join(v.name for v in s.vars)
        self.emit(depth, f"for {names} in {self.T}.Parallel({', '.join(map(str, s.extents))}):")
        self.body(s.body, depth + 1)

    def stmt_If(self, s: N.If, depth: int) -> None:
        self.emit(depth, f"if {self.expr(s.cond)}:")
        self.body(s.then_body, depth + 1)
        if s.else_body:
            self.emit(depth, "else:")
            self.body(s.else_body, depth + 1)

    def stmt_While(self, s: N.While, depth: int) -> None:
        self.emit(depth, f"while {self.expr(s.cond)}:")
        self.body(s.body, depth + 1)

    def stmt_Copy(self, s: N.Copy, depth: int) -> None:
        src, dst = self.region_pair(s.src, s.dst)
        note = "" if s.predicated else "  # in bounds (proven: no edge guards)"
        self.emit(depth, f"{self.T}.copy({src}, {dst}){note}")

    def stmt_Fill(self, s: N.Fill, depth: int) -> None:
        dst = self.region(s.dst)
        if s.value == N.Const(0, s.dst.buffer.dtype):
            self.emit(depth, f"{self.T}.clear({dst})")
        else:
            self.emit(depth, f"{self.T}.fill({dst}, {self.value_for(s.value, s.dst.buffer.dtype)})")

    def stmt_Gemm(self, s: N.Gemm, depth: int) -> None:
        args = [self.region(s.a), self.region(s.b), self.region(s.c)]
        if s.transpose_a:
            args.append("transpose_A=True")
        if s.transpose_b:
            args.append("transpose_B=True")
        if s.clear_accum:
            args.append("clear_accum=True")
        if s.policy != "square":
            policy = {"full_row": "FullRow", "full_col": "FullCol"}[s.policy]
            args.append(f"policy={self.T}.GemmWarpPolicy.{policy}")
        self.emit(depth, f"{self.T}.gemm({', '.join(args)})")

    def stmt_Reduce(self, s: N.Reduce, depth: int) -> None:
        clear = "" if s.clear else ", clear=False"
        self.emit(depth, f"{self.T}.reduce_{s.kind}({s.src.name}, {s.dst.name}, dim={s.dim}{clear})")

    def stmt_Cumsum(self, s: N.Cumsum, depth: int) -> None:
        reverse = ", reverse=True" if s.reverse else ""
        self.emit(depth, f"{self.T}.cumsum({s.src.name}, {s.dst.name}, dim={s.dim}{reverse})")

    def stmt_Atomic(self, s: N.Atomic, depth: int) -> None:
        func = f"{self.T}.atomic_{s.kind}"
        if isinstance(s.value, N.Region):
            dst, value = self.region_pair(s.dst, s.value)
            self.emit(depth, f"{func}({dst}, {value})")
        else:
            dst = f"{s.dst.buffer.name}[{self.indices(s.dst.starts)}]"
            self.emit(depth, f"{func}({dst}, {self.value_for(s.value, s.dst.buffer.dtype)})")

    def stmt_Print(self, s: N.Print, depth: int) -> None:
        value = s.value.name if isinstance(s.value, N.Buffer) else self.expr(s.value)
        msg = f", msg={s.msg!r}" if s.msg else ""
        self.emit(depth, f"{self.T}.print({value}{msg})")

    def stmt_Hint(self, s: N.Hint, depth: int) -> None:
        if s.kind == "use_swizzle":
            args = ", ".join(f"{k}={v!r}" for k, v in s.params)
            self.emit(depth, f"{self.T}.use_swizzle({args})")
        elif s.kind == "annotate_layout":
            items = ", ".join(f"{b.name}: {self.T}.make_swizzled_layout({b.name})" for b in s.buffers)
            self.emit(depth, f"{self.T}.annotate_layout({{{items}}})")
        else:
            raise TypeError(f"cannot print the hint {s.kind!r}")


def _all_named(func: N.PrimFunc) -> Iterator[Union[N.Var, N.Buffer]]:
    from .visitor import walk

    for node in walk(func):
        if isinstance(node, (N.Var, N.Buffer)):
            yield node
