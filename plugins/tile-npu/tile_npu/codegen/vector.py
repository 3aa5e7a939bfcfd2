"""Vector code generation: T.Parallel strip-mined over the vector engine, with lane masks for `if`,
for a `while` whose condition differs between lanes and for a `for` whose bounds do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk

from ..arch import VECTOR_DTYPES
from ..isa import NO_REG, SPACE_SEG, Access, Extents, Segment
from .emitter import ATOMIC, BINOP_INDEX, COMPARES, UNOP_INDEX, binop_work_dtype, prod
from .host import NpuHost
from .registers import ZERO


@dataclass
class Vec:
    """A per-lane value in a vector slot (inside T.Parallel)."""

    slot: int
    dtype: str


class VectorContext:
    """The state of the T.Parallel being compiled."""

    def __init__(self, par: N.Parallel):
        self.par = par
        self.vars = [v.name for v in par.vars]
        self.extents = tuple(int(e) for e in par.extents)
        self.iota: Dict[str, int] = {}  # parallel var -> slot with its index vector
        self.vlets: Dict[str, Vec] = {}  # per-lane Let values
        self.mask: Optional[int] = None  # slot of the active-lane mask (None: all lanes)


class VectorCodegen(NpuHost):
    """Compiles T.Parallel (`s_Parallel`), its statements (`v_*`) and per-lane expressions (`vx`)."""

    def vector_context(self) -> VectorContext:
        """The T.Parallel chunk being compiled; outside one this is an internal error."""
        if self.vctx is None:
            raise AssertionError("a per-lane statement outside T.Parallel")
        return self.vctx

    def s_Parallel(self, s: N.Parallel):
        """T.Parallel strip-mined in chunks of at most `vector_chunk` lanes."""
        self.sync_all()
        total = prod(s.extents)
        chunk = min(total, self.cfg.vector_chunk)
        ctx = VectorContext(s)
        prev = self.vctx
        if prev is not None:
            raise self.error("nested T.Parallel is not supported on npu")
        env = dict(self.env)

        def one_chunk(e0_reg, vl_reg):
            """One strip of `vl_reg` lanes starting at element `e0_reg`."""
            self.emit("setvl", r=(vl_reg, e0_reg))
            self.vctx = ctx
            ext = self.desc(Extents(ctx.extents))
            for d, v in enumerate(s.vars):
                sl = self.slot()
                self.emit("viota", func=d, r=(sl,), imm=ext)
                ctx.iota[v.name] = sl
            try:
                self.body(s.body)
            finally:
                self.vctx = None
                self.free_slot(*ctx.iota.values(), *[v.slot for v in ctx.vlets.values()])
                ctx.iota.clear()
                ctx.vlets.clear()

        if total <= chunk:
            e0 = self.li(0)
            vl = self.li(total)
            one_chunk(e0, vl)
            self.release(e0, vl)
        else:
            e0 = self.li(0)
            top = self.here()
            limit = self.li(total)
            c = self.reg()
            self.emit("sop", func=BINOP_INDEX["<"], dt="int32", r=(c, e0, limit))
            jz = self.emit("bz", r=(c,))
            rem = self.reg()
            self.emit("sop", func=BINOP_INDEX["-"], dt="int32", r=(rem, limit, e0))
            ch = self.li(chunk)
            vl = self.reg()
            self.emit("sop", func=BINOP_INDEX["min"], dt="int32", r=(vl, rem, ch))
            one_chunk(e0, vl)
            self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(e0, e0, ch))
            self.emit("br", imm=top)
            self.patch(jz, self.here())
            self.release(e0, limit, c, rem, ch, vl)
        self.restore_env(env)
        self.sync_all()

    def v_Alloc(self, s):
        """Nothing to emit inside T.Parallel either."""
        pass

    def v_Hint(self, s):
        """Nothing to emit inside T.Parallel either."""
        pass

    def v_Store(self, s: N.Store):
        """Per-lane store under the active mask (strided when the indices are affine)."""
        val = self.vx(s.value)
        val = self.materialize(val, s.value.dtype)
        d, regs, slots = self.access_vector(s.buffer, s.indices)
        self.emit("vst", dt=val.dtype, r=(val.slot, self._mask()), imm=d)
        self.release(*regs)
        self.free_slot(val.slot, *slots)

    def v_Atomic(self, s: N.Atomic):
        """Per-lane atomic on a global tensor (`vatom`)."""
        if isinstance(s.value, N.Region) or s.dst.buffer.scope != "global":
            raise self.error("inside T.Parallel only element atomics on global tensors are supported")
        val = self.materialize(self.vx(s.value), s.value.dtype)
        d, regs, slots = self.access_vector(s.dst.buffer, s.dst.starts)
        self.emit("vatom", func=ATOMIC[s.kind], dt=val.dtype, r=(val.slot, self._mask()), imm=d)
        self.release(*regs)
        self.free_slot(val.slot, *slots)

    def v_Let(self, s: N.Let):
        """A uniform Let stays scalar; a per-lane one keeps its vector slot until the chunk ends."""
        if self.is_uniform(s.value):
            self.s_Let(s)
            return
        val = self.materialize(self.vx(s.value), s.value.dtype)
        self.vector_context().vlets[s.var.name] = val

    def v_If(self, s: N.If):
        """A branch for uniform conditions, lane masks for per-lane ones."""
        if self.is_uniform(s.cond):
            c = self.sx_bool(s.cond)
            jz = self.emit("bz", r=(c,))
            self.release(c)
            self.body(s.then_body)
            if s.else_body:
                jend = self.emit("br")
                self.patch(jz, self.here())
                self.body(s.else_body)
                self.patch(jend, self.here())
            else:
                self.patch(jz, self.here())
            return
        ctx = self.vector_context()
        cond = self.materialize(self.vx(s.cond), "bool", convert_to="bool")
        saved = ctx.mask
        then_mask = self._and_mask(saved, cond.slot)
        ctx.mask = then_mask
        self.body(s.then_body)
        if s.else_body:
            inv = self.slot()
            self.emit("vun", func=UNOP_INDEX["not"], dt="bool", r=(inv, cond.slot))
            else_mask = self._and_mask(saved, inv)
            ctx.mask = else_mask
            self.body(s.else_body)
            self.free_slot(inv, else_mask if else_mask != inv else None)
        ctx.mask = saved
        self.free_slot(cond.slot, then_mask if then_mask != cond.slot else None)

    def _and_mask(self, mask, slot):
        """The slot of `mask AND slot` (just `slot` when there is no mask)."""
        if mask is None:
            return slot
        out = self.slot()
        self.emit("vbin", func=BINOP_INDEX["and"], dt="bool", r=(out, mask, slot))
        return out

    def _mask(self):
        """The active-lane mask slot, or NO_REG for all lanes."""
        return self.vector_context().mask if self.vector_context().mask is not None else NO_REG

    def v_For(self, s: N.For):
        """A serial loop inside T.Parallel: a scalar counter for uniform bounds; else each lane
        counts its own `[begin, begin + extent)` in a vector slot, run as a masked loop whose lanes
        leave when their counter reaches their end (`_masked_loop`)."""
        if not (self.is_uniform(s.begin) and self.is_uniform(s.extent)):
            self._lane_for(s)
            return
        b = self.sx(s.begin)
        e = self.sx(s.extent)
        end = self.reg()
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(end, b, e))
        i = self.reg()
        self.emit("mov", r=(i, b))
        self.release(b, e)
        top = self.here()
        c = self.reg()
        self.emit("sop", func=BINOP_INDEX["<"], dt="int32", r=(c, i, end))
        jz = self.emit("bz", r=(c,))
        self.release(c)
        self.env[s.var.name] = i
        self._lane_body(s.body)
        one = self.li(1)
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(i, i, one))
        self.release(one)
        self.emit("br", imm=top)
        self.patch(jz, self.here())
        del self.env[s.var.name]
        self.release(i, end)

    def v_While(self, s: N.While):
        """A `while` inside T.Parallel: a scalar loop for a uniform condition; else every lane runs
        its own loop: `live` (the lanes still looping, under the enclosing mask) loses the lanes
        whose condition fails, the body runs masked to it, and the loop ends when no lane is left
        (a masked store of 1 into a cleared scratch word, read back by the scalar unit)."""
        if self.is_uniform(s.cond):
            top = self.here()
            c = self.sx_bool(s.cond)
            jz = self.emit("bz", r=(c,))
            self.release(c)
            self._lane_body(s.body)
            self.emit("br", imm=top)
            self.patch(jz, self.here())
            return
        self._masked_loop(lambda: self.materialize(self.vx(s.cond), "bool", convert_to="bool").slot, s.body)

    def _lane_for(self, s: N.For):
        """A `for` whose bounds differ between lanes: the loop variable is a per-lane value."""
        ctx = self.vector_context()
        dt = s.var.dtype
        i = self.materialize(self.vx(s.begin), s.begin.dtype, dt)
        extent = self.materialize(self.vx(s.extent), s.extent.dtype, dt)
        end = self.slot()
        self.emit("vbin", func=BINOP_INDEX["+"], dt=dt, r=(end, i.slot, extent.slot))
        self.free_slot(extent.slot)
        ctx.vlets[s.var.name] = i

        def below_end() -> int:
            c = self.slot()
            self.emit("vbin", func=BINOP_INDEX["<"], dt=dt, r=(c, i.slot, end))
            return c

        def step():
            one = self.li(1)
            self.emit("vbin", func=BINOP_INDEX["+"], dt=dt, dt2=2, r=(i.slot, i.slot, one))
            self.release(one)

        self._masked_loop(below_end, s.body, step)
        del ctx.vlets[s.var.name]
        self.free_slot(i.slot, end)

    def _masked_loop(self, cond, body, step=None):
        """Every lane runs its own loop: `live` (the lanes still looping, under the enclosing mask)
        loses the lanes whose `cond()` (a bool slot, freed here) fails, `body` and then `step()`
        run masked to it, and the loop ends when no lane is left (a masked store of 1 into a
        cleared scratch word, read back by the scalar unit)."""
        ctx = self.vector_context()
        saved = ctx.mask
        live = self.slot()
        if saved is None:
            one = self.li(1)
            self.emit("vun", func=UNOP_INDEX["mov"], dt="bool", dt2=1, r=(live, one))
            self.release(one)
        else:
            self.emit("vun", func=UNOP_INDEX["mov"], dt="bool", r=(live, saved))
        cell = self._any_cell()
        word = self.desc(Access(SPACE_SEG, cell, (), ((ZERO, NO_REG, ()),)))
        lanes = self.desc(Access(SPACE_SEG, cell, ctx.extents, ((ZERO, NO_REG, tuple(0 for _ in ctx.vars)),)))
        top = self.here()
        ctx.mask = live  # the condition is read by the lanes still looping only
        c = cond()
        self.emit("vbin", func=BINOP_INDEX["and"], dt="bool", r=(live, live, c))
        self.free_slot(c)
        zero, one = self.li(0), self.li(1)
        self.emit("sst", dt="int32", r=(zero,), imm=word)
        ones = self.materialize(one, "int32")
        self.emit("vst", dt="int32", r=(ones.slot, live), imm=lanes)
        self.free_slot(ones.slot)
        anyone = self.reg()
        self.emit("sld", r=(anyone,), imm=word)
        jz = self.emit("bz", r=(anyone,))
        self.release(zero, anyone)
        self._lane_body(body)
        if step is not None:
            step()
        self.emit("br", imm=top)
        self.patch(jz, self.here())
        ctx.mask = saved
        self.free_slot(live)

    def _lane_body(self, body):
        """A loop body inside T.Parallel; the per-lane Lets it binds end with each pass."""
        lets = dict(self.vector_context().vlets)
        self.body(body)
        for k in list(self.vector_context().vlets):
            if k not in lets:
                self.free_slot(self.vector_context().vlets.pop(k).slot)

    def _any_cell(self) -> int:
        """The int32 scratch slot that `_masked_loop` tests for a lane still looping (one per program)."""
        cell = getattr(self, "_while_cell", None)
        if cell is None:
            cell = len(self.prog.segments)
            self.prog.segments.append(Segment("while_any", "int32", (self.cfg.vector_chunk,), 0))
            self.slots.append(cell)  # placed with the vector slots, never handed out as one
            self._while_cell = cell
        return cell

    def v_Print(self, s: N.Print):
        """T.print per lane (`vprint`), or the scalar print for uniform values."""
        if isinstance(s.value, N.Buffer) or self.is_uniform(s.value):
            return self.s_Print(s)
        val = self.materialize(self.vx(s.value), s.value.dtype)
        self.emit(
            "vprint",
            dt=val.dtype,
            dt2=min(self.string(s.msg) + 1, 255),
            r=(val.slot, self._mask()),
            imm=self.desc(Extents(self.vector_context().extents)),
        )
        self.free_slot(val.slot)

    def is_uniform(self, e) -> bool:
        """Whether `e` has the same value in every lane (no parallel index, no per-lane Let)."""
        ctx = self.vector_context()
        if ctx is None:
            return True
        for n in walk(e):
            if isinstance(n, N.Var) and (n.name in ctx.iota or n.name in ctx.vlets):
                return False
        return True

    def materialize(self, v, dtype, convert_to=None) -> Vec:
        """A vector operand in a slot of `convert_to` (default: `dtype`); broadcasts scalars."""
        want = convert_to or dtype
        if want not in VECTOR_DTYPES:
            raise self.error(f"the npu vector engine has no {want} lanes")
        if isinstance(v, int):  # scalar register
            out = self.slot()
            self.emit("vun", func=UNOP_INDEX["mov"], dt=want, dt2=1, r=(out, v))
            self.release(v)
            return Vec(out, want)
        if v.dtype != want:
            out = self.slot()
            self.emit("vcvt", dt=want, dt2=v.dtype, r=(out, v.slot))
            self.free_slot(v.slot)
            return Vec(out, want)
        return v

    def _own(self, v: Vec) -> Vec:
        """A copy of `v` that may be freed (Let values and iotas are shared)."""
        ctx = self.vector_context()
        if v.slot in ctx.iota.values() or any(v.slot == x.slot for x in ctx.vlets.values()):
            out = self.slot()
            self.emit("vun", func=UNOP_INDEX["mov"], dt=v.dtype, r=(out, v.slot))
            return Vec(out, v.dtype)
        return v

    def vx(self, e):
        """Evaluate `e` inside T.Parallel: a register (uniform) or a Vec (per lane, caller frees)."""
        if self.is_uniform(e):
            return self.sx(e)
        method = self.handler("_vx_", e)
        if method is None:
            raise self.error(f"the npu backend cannot compile the expression {type(e).__name__}")
        return method(self, e)

    def _vx_Var(self, e: N.Var):
        """A parallel index or a per-lane Let value (as a slot the caller may free)."""
        ctx = self.vector_context()
        if e.name in ctx.iota:
            return self._own(Vec(ctx.iota[e.name], "int32"))
        return self._own(ctx.vlets[e.name])

    def _vx_BinOp(self, e: N.BinOp):
        """A binary op per lane; scalar operands are broadcast by the instruction's flags."""
        if e.op in ("and", "or"):
            return self._vector_logic(e)
        work, bool_arith = binop_work_dtype(e)
        a = self._operand(self.vx(e.a), e.a.dtype, work)
        b = self._operand(self.vx(e.b), e.b.dtype, work)
        flags = (1 if isinstance(a, int) else 0) | (2 if isinstance(b, int) else 0)
        out = self.slot()
        ra = a if isinstance(a, int) else a.slot
        rb = b if isinstance(b, int) else b.slot
        self.emit("vbin", func=BINOP_INDEX[e.op], dt=work, dt2=flags, r=(out, ra, rb))
        self._drop(a, b)
        res = Vec(out, "bool" if e.op in COMPARES else work)
        if bool_arith:
            return self.materialize(res, "bool")
        return res

    def _vector_logic(self, e: N.BinOp) -> Vec:
        """`and` / `or` per lane: the right side is evaluated only in the lanes that need it."""
        ctx = self.vector_context()
        a = self.materialize(self.vx(e.a), e.a.dtype, "bool")
        saved = ctx.mask
        live = a.slot
        if e.op == "or":
            live = self.slot()
            self.emit("vun", func=UNOP_INDEX["not"], dt="bool", r=(live, a.slot))
        m = self._and_mask(saved, live)
        ctx.mask = m
        b = self.materialize(self.vx(e.b), e.b.dtype, "bool")
        ctx.mask = saved
        out = self.slot()
        self.emit("vbin", func=BINOP_INDEX[e.op], dt="bool", r=(out, a.slot, b.slot))
        self.free_slot(a.slot, b.slot, m if m != a.slot else None, live if live != a.slot else None)
        return Vec(out, "bool")

    def _vx_UnaryOp(self, e):
        """A unary op or math call per lane."""
        op = e.op if isinstance(e, N.UnaryOp) else e.func
        arg = e.a if isinstance(e, N.UnaryOp) else e.args[0]
        src_dt = "bool" if op == "not" else e.dtype
        a = self._operand(self.vx(arg), arg.dtype, src_dt)
        out = self.slot()
        self.emit(
            "vun",
            func=UNOP_INDEX[op],
            dt=e.dtype if op != "not" else "bool",
            dt2=1 if isinstance(a, int) else 0,
            r=(out, a if isinstance(a, int) else a.slot),
        )
        self._drop(a)
        return Vec(out, "bool" if op == "not" else e.dtype)

    _vx_Call = _vx_UnaryOp  # a math call is a unary op of the vector engine

    def _vx_Cast(self, e: N.Cast):
        """A conversion per lane."""
        return self.materialize(self.vx(e.value), e.value.dtype, e.dtype)

    def _vx_Select(self, e: N.Select):
        """T.if_then_else per lane; each side is evaluated under its own mask."""
        ctx = self.vector_context()
        c = self.materialize(self.vx(e.cond), e.cond.dtype, "bool")
        saved = ctx.mask
        m1 = self._and_mask(saved, c.slot)
        ctx.mask = m1
        a = self._operand(self.vx(e.a), e.a.dtype, e.dtype)
        inv = self.slot()
        self.emit("vun", func=UNOP_INDEX["not"], dt="bool", r=(inv, c.slot))
        m2 = self._and_mask(saved, inv)
        ctx.mask = m2
        b = self._operand(self.vx(e.b), e.b.dtype, e.dtype)
        ctx.mask = saved
        out = self.slot()
        flags = (2 if isinstance(a, int) else 0) | (4 if isinstance(b, int) else 0)
        self.emit(
            "vsel",
            dt=e.dtype,
            dt2=flags,
            r=(out, c.slot, a if isinstance(a, int) else a.slot, b if isinstance(b, int) else b.slot),
        )
        self._drop(a, b)
        self.free_slot(c.slot, inv, m1 if m1 != c.slot else None, m2 if m2 != inv else None)
        return Vec(out, e.dtype)

    def _vx_Load(self, e: N.Load):
        """A per-lane load under the active mask."""
        d, regs, slots = self.access_vector(e.buffer, e.indices)
        out = self.slot()
        self.emit("vld", r=(out, self._mask()), imm=d)
        self.release(*regs)
        self.free_slot(*slots)
        return Vec(out, e.buffer.dtype)

    def _operand(self, v, have_dtype, want):
        """Convert an operand to `want`: registers convert in the scalar unit, slots with vcvt."""
        if isinstance(v, int):
            if have_dtype != want:
                self.emit("scvt", dt=want, r=(v, v))
            return v
        return self.materialize(v, want)

    def _drop(self, *ops):
        """Release registers and free vector slots among `ops`."""
        for o in ops:
            if isinstance(o, int):
                self.release(o)
            elif o is not None:
                self.free_slot(o.slot)

    def _affine(self, e):
        """(uniform base expr or None, {parallel var: coeff}) when `e` is affine in the parallel vars."""
        ctx = self.vector_context()
        if self.is_uniform(e):
            return e, {}
        if isinstance(e, N.Var) and e.name in ctx.iota:
            return None, {e.name: 1}
        if isinstance(e, N.BinOp) and e.op in ("+", "-"):
            a, b = self._affine(e.a), self._affine(e.b)
            if a is None or b is None:
                return None
            sign = 1 if e.op == "+" else -1
            coeffs = dict(a[1])
            for k, v in b[1].items():
                coeffs[k] = coeffs.get(k, 0) + sign * v
            base = a[0]
            if b[0] is not None:
                base = (
                    b[0]
                    if base is None and sign == 1
                    else N.BinOp(e.op, base if base is not None else N.Const(0, "int32"), b[0], "int32")
                )
            return base, coeffs
        if isinstance(e, N.BinOp) and e.op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, N.Const) and isinstance(y.value, int) and not isinstance(y.value, bool):
                    a = self._affine(x)
                    if a is None:
                        return None
                    base = None if a[0] is None else N.BinOp("*", a[0], y, "int32")
                    return base, {k: v * y.value for k, v in a[1].items()}
            return None
        integers = ("int32", "int64", "int16")
        if isinstance(e, N.Cast) and e.dtype in integers and e.value.dtype in integers:
            return self._affine(e.value)
        return None

    def access_vector(self, buf: N.Buffer, indices):
        """Access descriptor over the Parallel's space; affine indices need no index vectors."""
        ctx = self.vector_context()
        if len(indices) != buf.ndim:
            raise self.error(f"{buf.name} has {buf.ndim} dims, indexed with {len(indices)}")
        space, sid = self._space(buf)
        dims, regs, slots = [], [], []
        for ix in indices:
            aff = self._affine(ix)
            if aff is not None:
                base, coeffs = aff
                r = self.sx(base) if base is not None else ZERO
                if r != ZERO:
                    if ix.dtype != "int32":
                        self.emit("scvt", dt="int32", r=(r, r))
                    regs.append(r)
                dims.append((r, NO_REG, tuple(coeffs.get(v, 0) for v in ctx.vars)))
            else:
                v = self.materialize(self.vx(ix), ix.dtype, "int32")
                slots.append(v.slot)
                dims.append((ZERO, v.slot, tuple(0 for _ in ctx.vars)))
        return self.desc(Access(space, sid, ctx.extents, tuple(dims))), regs, slots
