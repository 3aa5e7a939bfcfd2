"""Scalar code generation: uniform expressions in registers and statements outside T.Parallel."""

from __future__ import annotations

import struct

from tilecore.ir import nodes as N

from ..isa import NO_REG, Access
from .emitter import BINOP_INDEX, UNOP_INDEX, binop_work_dtype
from .host import NpuHost
from .registers import ZERO


class ScalarCodegen(NpuHost):
    """Compiles uniform expressions (`sx`) and the scalar statements (`s_Let`, `s_Store`, `s_If`, ...)."""

    def s_Alloc(self, s):
        """Nothing to emit: allocations were placed before code generation."""
        pass

    def s_Hint(self, s):
        """Nothing to emit: hints only steer the core passes."""
        pass

    def s_Kernel(self, s):
        """A T.Kernel inside the kernel is an error."""
        raise self.error("nested T.Kernel")

    def s_Let(self, s):
        """Bind a scalar variable to a register of its own."""
        v = self.sx(s.value)
        r = self.reg()
        self.emit("mov", r=(r, v))
        self.release(v)
        self.env[s.var.name] = r

    def s_Store(self, s):
        """Scalar store `buf[indices] = value` after the DMAs it conflicts with."""
        buf = s.buffer
        self.sync(reads=self._bufs_in(*s.indices, s.value), writes=[buf])
        v = self.sx(s.value)
        d, regs = self.access_scalar(buf, s.indices)
        self.emit("sst", dt=s.value.dtype, r=(v,), imm=d)
        self.release(v, *regs)

    def s_If(self, s):
        """Branch on a uniform condition; DMAs are settled at both joins."""
        self.sync(reads=self._bufs_in(s.cond))
        c = self.sx_bool(s.cond)
        self.sync_all()
        jz = self.emit("bz", r=(c,))
        self.release(c)
        env = dict(self.env)
        self._settled_body(s.then_body, env)
        if s.else_body:
            jend = self.emit("br")
            self.patch(jz, self.here())
            self._settled_body(s.else_body, env)
            self.patch(jend, self.here())
        else:
            self.patch(jz, self.here())

    def _settled_body(self, stmts, env):
        """A branch or loop body, every DMA settled at its end, its names dropped (`env`: before)."""
        self.body(stmts)
        self.sync_all()
        self.restore_env(env)

    def _loop(self, var, begin, extent, emit_body, step=1):
        """for var in [begin, begin+extent) step `step`: emit_body(var_reg)."""
        b = self.sx(begin)
        e = self.sx(extent)
        end = self.reg()
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(end, b, e))
        i = self.reg()
        self.emit("mov", r=(i, b))
        self.release(b, e)
        self.sync_all()
        top = self.here()
        c = self.reg()
        self.emit("sop", func=BINOP_INDEX["<"], dt="int32", r=(c, i, end))
        jz = self.emit("bz", r=(c,))
        self.release(c)
        self.env[var] = i
        env = dict(self.env)
        emit_body(i, end)
        self.sync_all()
        self.restore_env(env)
        del self.env[var]
        one = self.reg()
        self.emit("li", r=(one,), imm=step)
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(i, i, one))
        self.release(one)
        self.emit("br", imm=top)
        self.patch(jz, self.here())
        self.free_regs.extend([r for r in (i, end) if r not in self.free_regs])

    def s_For(self, s):
        """A serial loop, or the software pipeline for planned T.Pipelined loops."""
        if id(s) in self.pipelined:
            return self._pipelined(s)
        self.sync(reads=self._bufs_in(s.begin, s.extent))
        self._loop(s.var.name, s.begin, s.extent, lambda i, end: self.body(s.body))

    def s_While(self, s: N.While):
        """`while cond: body`: the condition is computed at the top of every iteration (every DMA
        settled there, as at the end of each pass through the body), and its exit branch jumps
        past the body's back branch."""
        self.sync_all()
        top = self.here()
        c = self.sx_bool(s.cond)
        jz = self.emit("bz", r=(c,))
        self.release(c)
        self._settled_body(s.body, dict(self.env))
        self.emit("br", imm=top)
        self.patch(jz, self.here())

    def s_Print(self, s: N.Print):
        """T.print of a scalar, or of a whole on-chip tile (`printt`)."""
        if isinstance(s.value, N.Buffer):
            buf = s.value
            self.sync(reads=[buf])
            shape = buf.static_shape() or ()
            if buf.scope == "global":
                raise self.error("T.print of a whole global tensor is not supported on npu; print a tile")
            space, sid = self._space(buf)
            dims = tuple(
                (ZERO, NO_REG, tuple(1 if k == d else 0 for k in range(len(shape)))) for d in range(len(shape))
            )
            d = self.desc(Access(space, sid, tuple(shape), dims))
            self.emit("printt", dt2=min(self.string(s.msg) + 1, 255), imm=d)
            return
        self.sync(reads=self._bufs_in(s.value))
        v = self.sx(s.value)
        self.emit("print", dt=s.value.dtype, r=(v,), imm=self.string(s.msg))
        self.release(v)

    def sx_bool(self, e) -> int:
        """Like `sx`, converted to bool when the expression is not already one."""
        r = self.sx(e)
        if e.dtype != "bool":
            out = self.reg()
            self.emit("scvt", dt="bool", r=(out, r))
            self.release(r)
            return out
        return r

    def sx(self, e) -> int:
        """Evaluate a uniform expression into a (possibly shared) register; caller releases it."""
        method = self.handler("_sx_", e)
        if method is None:
            raise self.error(f"the npu backend cannot compile the expression {type(e).__name__}")
        return method(self, e)

    def _sx_Const(self, e: N.Const) -> int:
        """A constant: `li` for integers, `lf` (float64 bits) and a conversion for floats."""
        r = self.reg()
        if isinstance(e.value, float) or e.dtype in ("float16", "bfloat16", "float32", "float64"):
            bits = struct.unpack("<q", struct.pack("<d", float(e.value)))[0]
            self.emit("lf", r=(r,), imm=bits)
            if e.dtype != "float64":
                self.emit("scvt", dt=e.dtype, r=(r, r))
        else:
            self.emit("li", r=(r,), imm=int(e.value))
            if e.dtype != "int32" or not -(2**31) <= int(e.value) < 2**31:
                self.emit("scvt", dt=e.dtype, r=(r, r))
        return r

    def _sx_Var(self, e: N.Var) -> int:
        """A copy of a bound variable's register."""
        if e.name in self.env:
            r = self.reg()
            self.emit("mov", r=(r, self.env[e.name]))
            return r
        raise self.error(f"variable {e.name} has no value here", e.span if e.span.line else None)

    def _sx_BinOp(self, e: N.BinOp) -> int:
        """A binary op in the scalar unit (bool arithmetic goes through int32)."""
        if e.op in ("and", "or"):
            return self._short_circuit(e)
        work, bool_arith = binop_work_dtype(e)
        a = self.sx(e.a)
        b = self.sx(e.b)
        self.emit("sop", func=BINOP_INDEX[e.op], dt=work, r=(a, a, b))
        self.release(b)
        if bool_arith:
            self.emit("scvt", dt="bool", r=(a, a))
        return a

    def _sx_UnaryOp(self, e: N.UnaryOp) -> int:
        """A unary op in the scalar unit."""
        a = self.sx(e.a)
        self.emit("sun", func=UNOP_INDEX[e.op], dt=e.dtype, r=(a, a))
        return a

    def _sx_Call(self, e: N.Call) -> int:
        """A one-argument math call in the scalar unit."""
        if len(e.args) != 1:
            raise self.error(f"T.{e.func} takes one argument")
        a = self.sx(e.args[0])
        self.emit("sun", func=UNOP_INDEX[e.func], dt=e.dtype, r=(a, a))
        return a

    def _sx_Cast(self, e: N.Cast) -> int:
        """A conversion in the scalar unit."""
        a = self.sx(e.value)
        self.emit("scvt", dt=e.dtype, r=(a, a))
        return a

    def _sx_Select(self, e: N.Select) -> int:
        """T.if_then_else on uniform values, evaluating only the chosen side."""
        out = self.reg()
        c = self.sx_bool(e.cond)
        jz = self.emit("bz", r=(c,))
        self.release(c)
        a = self.sx(e.a)
        self.emit("scvt", dt=e.dtype, r=(out, a))
        self.release(a)
        jend = self.emit("br")
        self.patch(jz, self.here())
        b = self.sx(e.b)
        self.emit("scvt", dt=e.dtype, r=(out, b))
        self.release(b)
        self.patch(jend, self.here())
        return out

    def _sx_Load(self, e: N.Load) -> int:
        """A scalar load, after the DMAs writing the buffer (outside T.Parallel)."""
        if self.vctx is None:
            self.sync(reads=[e.buffer])
        d, regs = self.access_scalar(e.buffer, e.indices)
        r = self.reg()
        self.emit("sld", r=(r,), imm=d)
        self.release(*regs)
        return r

    def _short_circuit(self, e):
        """`and` / `or` of uniform values, evaluating the right side only when needed."""
        out = self.sx_bool(e.a)
        j = self.emit("bz" if e.op == "and" else "bnz", r=(out,))
        b = self.sx_bool(e.b)
        self.emit("mov", r=(out, b))
        self.release(b)
        self.patch(j, self.here())
        return out

    def access_scalar(self, buf: N.Buffer, indices):
        """(Access descriptor, index registers to release) for one element of `buf`."""
        if len(indices) != buf.ndim:
            raise self.error(f"{buf.name} has {buf.ndim} dims, indexed with {len(indices)}")
        space, sid = self._space(buf)
        regs = [self.sx(i) for i in indices]
        dims = tuple((r, NO_REG, ()) for r in regs)
        return self.desc(Access(space, sid, (), dims)), regs
