"""Tile IR -> NPU program.

Mapping (README.md "Compiler" has the long form):
* shared / fragment / local / var buffers -> scratchpad segments, placed
  statically with liveness (buffers never live together share bytes); a
  T.Pipelined loop's prefetched buffers get one segment per stage;
* T.copy with a global side -> `dma` (clipped extents, zero fill for proven-or-not
  partial tiles) completed by `wait` on its token right before the data is used;
  scratchpad-to-scratchpad copies and T.fill -> `vtile`;
* T.gemm -> `mma` instructions, each at most 64x64 outputs and 256 deep;
* T.Parallel -> strip-mined vector code: chunks of up to `vector_chunk`
  elements, index vectors from `viota`, affine accesses as strided `vld`/`vst`,
  anything else as gathers/scatters, `if` as lane masks;
* T.reduce_* -> `vred`, T.cumsum -> `vscan`, atomics -> `dma.add` / `vatom` / `satom`;
* T.Pipelined(num_stages=S>1) -> loop unrolled S times with the copies of
  iteration i+S-1 issued before the compute of iteration i (real tokens);
* blocks -> the grid is spread round-robin over the cores at launch.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N
from tilecore.ir.types import promote
from tilecore.ir.visitor import walk

from . import isa
from .arch import DEFAULT_CONFIG, MATRIX_FORMATS, VECTOR_DTYPES, NPUConfig
from .isa import (NO_REG, SPACE_PARAM, SPACE_SEG, Access, Extents, Instr, MatMul, Program, Reduction,
                  Segment, Transfer)

SEGMENT_ALIGN = 64
FIRST_FREE_REG = 8
ZERO = 0            # r0 holds 0 in kernel code

_BINOP_INDEX = {op: i for i, op in enumerate(isa.BINOPS)}
_UNOP_INDEX = {op: i for i, op in enumerate(isa.UNOPS)}
_COMPARES = {"<", "<=", ">", ">=", "==", "!=", "and", "or"}
_ATOMIC = {"add": 1, "max": 2, "min": 3}


def _prod(xs):
    n = 1
    for x in xs:
        n *= int(x)
    return n


@dataclass
class _PendingDMA:
    token: int                      # register holding the token
    seg_writes: Set[int] = field(default_factory=set)
    seg_reads: Set[int] = field(default_factory=set)
    dram_writes: Set[int] = field(default_factory=set)
    dram_reads: Set[int] = field(default_factory=set)


@dataclass
class _Vec:
    """A per-lane value in a vector slot (inside T.Parallel)."""

    slot: int
    dtype: str


class _VCtx:
    """The state of the T.Parallel being compiled."""

    def __init__(self, par: N.Parallel):
        self.par = par
        self.vars = [v.name for v in par.vars]
        self.extents = tuple(int(e) for e in par.extents)
        self.iota: Dict[str, int] = {}       # parallel var -> slot with its index vector
        self.vlets: Dict[str, _Vec] = {}     # per-lane Let values
        self.mask: Optional[int] = None      # slot of the active-lane mask (None: all lanes)


class Codegen:
    """Compiles one PrimFunc; `run()` returns the Program."""

    def __init__(self, func: N.PrimFunc, analyses=None, config: NPUConfig = DEFAULT_CONFIG, rules=None):
        self.func = func
        self.rules = dict(default_rules())
        self.rules.update(rules or {})
        self.cfg = config
        self.analyses = analyses or {}
        self.source = func.source or ""
        self.prog = Program(ncores=config.cores)
        self.env: Dict[str, int] = {}              # scalar variable name -> register
        self.free_regs = list(range(254, FIRST_FREE_REG - 1, -1))
        self.params = {p.name: i for i, p in enumerate(func.params)}
        self.buffers: Dict[str, N.Buffer] = {p.name: p for p in func.params}
        self.bufseg: Dict[str, int] = {}           # scratchpad buffer name -> segment id (current stage)
        self.stage_segs: Dict[str, List[int]] = {}
        self.pending: List[_PendingDMA] = []
        self.slot_free: List[int] = []
        self.slots: List[int] = []                 # segment ids of vector slots
        self.vctx: Optional[_VCtx] = None
        self.lines: Dict[str, List[int]] = {}
        self.cur_span: N.Span = func.span
        self.strings: Dict[str, int] = {}
        self.pipelined: Dict[int, Tuple[List[int], List[str]]] = {}

    # ------------------------------------------------------------------ basics

    def error(self, message, span=None):
        return TileCompileError(message, span or self.cur_span, self.source)

    def emit(self, op, func=0, dt="none", dt2=0, r=(0, 0, 0, 0), imm=0) -> int:
        info = isa.OPS[op]
        if isinstance(dt, str):
            dt = isa.DTYPE_CODES[dt]
        if isinstance(dt2, str):
            dt2 = isa.DTYPE_CODES[dt2]
        regs = tuple(r) + (0,) * (4 - len(r))
        pc = len(self.prog.instrs)
        self.prog.instrs.append(Instr(info.code, func, dt, dt2, regs, imm))
        if self.cur_span is not None and self.cur_span.line:
            self.lines[str(pc)] = [self.cur_span.line, self.cur_span.col]
        return pc

    def patch(self, pc, target):
        self.prog.instrs[pc].imm = target

    def here(self):
        return len(self.prog.instrs)

    def desc(self, d) -> int:
        words = d.words()
        self.prog.descs.append(words)
        return len(self.prog.descs) - 1

    def reg(self) -> int:
        if not self.free_regs:
            raise self.error("the expression needs more than 247 scalar registers on npu; split it")
        return self.free_regs.pop()

    def release(self, *regs):
        for r in regs:
            if r is not None and r >= FIRST_FREE_REG and r != NO_REG and r not in self.free_regs \
                    and r not in self.env.values():
                self.free_regs.append(r)

    def li(self, value: int) -> int:
        r = self.reg()
        self.emit("li", r=(r,), imm=int(value))
        return r

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.prog.strings)
            self.prog.strings.append(text)
        return self.strings[text]

    def slot(self) -> int:
        if self.slot_free:
            return self.slot_free.pop()
        sid = len(self.prog.segments)
        self.prog.segments.append(Segment(f"vslot{len(self.slots)}", "none",
                                          (self.cfg.vector_chunk * 4,), 0))
        self.slots.append(sid)
        return sid

    def free_slot(self, *sids):
        for s in sids:
            if s is not None and s in self.slots and s not in self.slot_free:
                self.slot_free.append(s)

    # ------------------------------------------------------------------ driver

    def run(self) -> Program:
        func = self.func
        kernel = func.kernel
        self.cur_span = kernel.span
        self.prog.params = [isa.Param(p.name, p.dtype, p.ndim) for p in func.params]
        from tilecore.passes import liveness as _liveness
        self.live = self.analyses.get("liveness") or _liveness.analyze(func)
        self._plan_pipelines(kernel.body)
        self._make_segments(kernel.body)
        self._seg_buffer = {sid: name for name, sids in self.stage_segs.items() for sid in sids}
        # grid program: grid dims into r0..r(rank-1)
        self.prog.grid_pc = self.here()
        self.prog.grid_rank = max(len(kernel.grid), 1)
        self._bind_dyn()
        self._outer_stmts(func)
        vals = [self.sx(g) for g in kernel.grid] or [self.li(1)]
        for i, r in enumerate(vals):
            self.emit("mov", r=(i, r))
        self.emit("halt")
        self.env.clear()
        self.free_regs = list(range(254, FIRST_FREE_REG - 1, -1))
        # kernel program
        self.prog.kernel_pc = self.here()
        self.emit("li", r=(ZERO,), imm=0)
        self._bind_dyn()
        self._outer_stmts(func)
        for k, v in enumerate(kernel.block_vars):
            r = self.reg()
            self.emit("spr", func=0, r=(r,), imm=k)
            self.env[v.name] = r
        self.body(kernel.body)
        self.sync_all()
        self.emit("halt")
        self._place_segments()
        self.prog.debug = {"file": func.span.file if func.span.line else "<kernel>", "lines": self.lines,
                           "source": self.source, "function": func.name,
                           "dyn_vars": [v.name for v in func.dyn_vars]}
        return self.prog

    def _outer_stmts(self, func):
        """Scalar `let`s written before the T.Kernel (evaluated by both the grid and the kernel code)."""
        for st in func.body:
            if isinstance(st, N.Kernel):
                break
            if isinstance(st, N.Let):
                self.s_Let(st)
            elif not isinstance(st, N.Hint):
                raise self.error(f"{type(st).__name__} outside T.Kernel is not supported on npu", st.span)
        after = func.body[func.body.index(func.kernel) + 1:]
        for st in after:
            if not isinstance(st, N.Hint):
                raise self.error(f"{type(st).__name__} after T.Kernel is not supported on npu", st.span)

    def _bind_dyn(self):
        for k, v in enumerate(self.func.dyn_vars):
            r = self.reg()
            self.emit("spr", func=2, r=(r,), imm=k)
            self.env[v.name] = r

    # ------------------------------------------------------------------ scratchpad planning

    def _plan_pipelines(self, body):
        """Find T.Pipelined loops whose global->scratchpad copies can be prefetched."""
        for s in self._all_stmts(body):
            if isinstance(s, N.For) and s.kind == "pipelined" and s.num_stages > 1:
                copies, bufs = [], []
                body_lets = {x.var.name for x in self._all_stmts(s.body) if isinstance(x, N.Let)}
                inner_vars = body_lets | {v.name for x in self._all_stmts(s.body)
                                          for v in getattr(x, "vars", ()) if isinstance(x, N.Parallel)}
                inner_vars |= {x.var.name for x in self._all_stmts(s.body) if isinstance(x, N.For)}
                for i, c in enumerate(s.body):
                    if not (isinstance(c, N.Copy) and c.src.buffer.scope == "global"
                            and c.dst.buffer.scope in ("shared", "fragment", "local")):
                        continue
                    name = c.dst.buffer.name
                    used_vars = {n.name for e in c.src.starts + c.dst.starts for n in walk(e)
                                 if isinstance(n, N.Var)}
                    loads = any(isinstance(n, N.Load) for e in c.src.starts + c.dst.starts for n in walk(e))
                    if used_vars & inner_vars or loads or name in bufs:
                        continue
                    writers = [x for x in self._all_stmts(s.body) if x is not c and name in self._writes(x)]
                    # the prefetch must not see different data than the copy would have:
                    # nothing earlier in the body reads the destination, nothing in the loop
                    # writes the source tensor
                    earlier = [x for x in self._all_stmts(s.body[:i])
                               if any(isinstance(n, N.Buffer) and n.name == name for n in self._stmt_nodes(x))]
                    src_written = [x for x in self._all_stmts(s.body)
                                   if c.src.buffer.name in self._writes(x) or
                                   isinstance(x, N.Atomic) and x.dst.buffer.name == c.src.buffer.name]
                    if writers or earlier or src_written or self._used_outside(body, s, name) or \
                            any(isinstance(x, N.Alloc) and x.buffer.name == name for x in self._all_stmts(s.body)):
                        continue
                    copies.append(i)
                    bufs.append(name)
                if copies:
                    self.pipelined[id(s)] = (copies, bufs)

    def _all_stmts(self, body):
        from tilecore.ir.visitor import walk_stmts
        return list(walk_stmts(body))

    def _writes(self, s) -> Set[str]:
        if isinstance(s, N.Store):
            return {s.buffer.name}
        if isinstance(s, (N.Copy, N.Fill)):
            return {s.dst.buffer.name}
        if isinstance(s, N.Gemm):
            return {s.c.buffer.name}
        if isinstance(s, (N.Reduce, N.Cumsum)):
            return {s.dst.name}
        return set()

    def _used_outside(self, body, loop, name) -> bool:
        inside = {id(x) for x in self._all_stmts(loop.body)}
        for x in self._all_stmts(body):
            if x is loop or id(x) in inside or isinstance(x, (N.Alloc, N.Hint)):
                continue
            if any(isinstance(n, N.Buffer) and n.name == name for n in self._stmt_nodes(x)):
                return True
        return False

    def _stmt_nodes(self, s):
        for fname in ("buffer", "src", "dst", "a", "b", "c", "value", "indices", "cond", "begin",
                      "extent", "starts"):
            v = getattr(s, fname, None)
            if v is None:
                continue
            for item in (v if isinstance(v, tuple) else (v,)):
                if hasattr(item, "__dataclass_fields__"):
                    yield from walk(item)

    def _make_segments(self, body):
        stages = {}
        for s in self._all_stmts(body):
            if isinstance(s, N.For) and id(s) in self.pipelined:
                for b in self.pipelined[id(s)][1]:
                    stages[b] = s.num_stages
        self.allocs: Dict[str, N.Alloc] = {}
        for s in self._all_stmts(body):
            if isinstance(s, N.Alloc):
                buf = s.buffer
                self.buffers[buf.name] = buf
                self.allocs[buf.name] = s
                shape = buf.static_shape()
                if shape is None:
                    raise self.error(f"{buf.name}: on-chip buffers need static shapes", s.span)
                if buf.dtype not in VECTOR_DTYPES:
                    raise self.error(f"{buf.name}: the npu has no {buf.dtype} scratchpad elements", s.span)
                segs = []
                for k in range(stages.get(buf.name, 1)):
                    name = buf.name if k == 0 else f"{buf.name}@stage{k}"
                    segs.append(len(self.prog.segments))
                    self.prog.segments.append(Segment(name, buf.dtype, tuple(shape) or (1,), 0))
                self.bufseg[buf.name] = segs[0]
                self.stage_segs[buf.name] = segs

    def _place_segments(self):
        """Static first-fit placement with liveness; slots go above the buffers."""
        live = self.live
        cap = self.cfg.scratchpad_bytes
        slot_bytes = self.cfg.vector_chunk * 4
        reserve = len(self.slots) * slot_bytes
        order = sorted(self.allocs, key=lambda n: live.interval.get(n, (0, 0))[0])
        placed: List[Tuple[int, int, int, int]] = []        # (lo, hi, t0, t1)
        top = 0
        for name in order:
            t0, t1 = live.interval.get(name, (0, 0))
            for sid in self.stage_segs[name]:
                seg = self.prog.segments[sid]
                size = -(-seg.nbytes // SEGMENT_ALIGN) * SEGMENT_ALIGN
                off = 0
                for lo, hi, a, b in sorted(placed):
                    if a <= t1 and t0 <= b and off < hi and lo < off + size:
                        off = -(-hi // SEGMENT_ALIGN) * SEGMENT_ALIGN
                if off + size > cap - reserve:
                    live_now = sum(hi - lo for lo, hi, a, b in placed if a <= t1 and t0 <= b)
                    stages = len(self.stage_segs[name])
                    raise TileCompileError(
                        f"scratchpad overflow on npu: {name} needs {seg.nbytes} bytes"
                        f"{f' (x{stages} stages for T.Pipelined)' if stages > 1 else ''}, but "
                        f"{live_now} bytes of buffers are live here and compiler temporaries take "
                        f"{reserve}; the core has {cap} bytes of scratchpad",
                        self.allocs[name].span, self.source)
                seg.base = off
                placed.append((off, off + size, t0, t1))
                top = max(top, off + size)
        for i, sid in enumerate(self.slots):
            self.prog.segments[sid].base = top + i * slot_bytes
        if top + reserve > cap:
            raise TileCompileError(f"scratchpad overflow on npu: buffers take {top} bytes and vector "
                                   f"temporaries {reserve}; the core has {cap}", self.func.kernel.span,
                                   self.source)

    # ------------------------------------------------------------------ DMA bookkeeping

    def _space(self, buf: N.Buffer):
        if buf.scope == "global":
            return SPACE_PARAM, self.params[buf.name]
        if buf.name not in self.bufseg:
            raise self.error(f"{buf.name} is used before it is allocated")
        return SPACE_SEG, self.bufseg[buf.name]

    def sync(self, reads=(), writes=()):
        """Wait for in-flight DMAs that conflict with reading `reads` / writing `writes` (Buffers)."""
        if not self.pending:
            return
        rs = {self._space(b) for b in reads}
        ws = {self._space(b) for b in writes}
        keep = []
        for p in self.pending:
            conflict = False
            for sp, sid in rs | ws:
                if sp == SPACE_SEG and self._aliases(sid, p.seg_writes) or \
                        sp == SPACE_PARAM and sid in p.dram_writes:
                    conflict = True
            for sp, sid in ws:
                if sp == SPACE_SEG and self._aliases(sid, p.seg_reads) or \
                        sp == SPACE_PARAM and sid in p.dram_reads:
                    conflict = True
            if conflict:
                self.emit("wait", r=(p.token,))
                self.release(p.token)
            else:
                keep.append(p)
        self.pending = keep

    def _aliases(self, sid, sids) -> bool:
        """Whether segment `sid` may share bytes with any of `sids`.

        Placement happens after code generation, so any two buffers that are not
        live at the same time may be given the same bytes: treat them as aliases.
        """
        if sid in sids:
            return True
        name = self._seg_buffer.get(sid)
        if name is None:
            return False
        lo, hi = self.live.interval.get(name, (0, 0))
        for other in sids:
            oname = self._seg_buffer.get(other)
            if oname is None or oname == name:
                continue
            a, b = self.live.interval.get(oname, (0, 0))
            if not (a <= hi and lo <= b):
                return True
        return False

    def sync_all(self):
        for p in self.pending:
            self.emit("wait", r=(p.token,))
            self.release(p.token)
        self.pending = []

    def _bufs_in(self, *nodes) -> List[N.Buffer]:
        out = []
        for node in nodes:
            if node is None or not hasattr(node, "__dataclass_fields__"):
                continue
            for n in walk(node):
                if isinstance(n, N.Buffer):
                    out.append(n)
        return out

    # ------------------------------------------------------------------ statements

    def body(self, stmts):
        for s in stmts:
            self.stmt(s)

    def stmt(self, s):
        saved = self.cur_span
        if s.span.line:
            self.cur_span = s.span
        try:
            method = self.rules.get(type(s).__name__)
            if method is None:
                raise self.error(f"the npu backend cannot compile {type(s).__name__}")
            if self.vctx is not None:
                vmethod = getattr(self, "v_" + type(s).__name__, None)
                if vmethod is None:
                    raise self.error(f"{type(s).__name__} inside T.Parallel is not supported on npu")
                vmethod(s)
            else:
                method(self, s)
        finally:
            self.cur_span = saved

    def restore_env(self, saved):
        """Leave a scope: forget variables bound inside it and free their registers."""
        dropped = [r for k, r in self.env.items() if k not in saved or saved[k] != r]
        self.env = dict(saved)
        self.release(*dropped)

    def s_Alloc(self, s):
        pass

    def s_Hint(self, s):
        pass

    def s_Kernel(self, s):
        raise self.error("nested T.Kernel")

    def s_Let(self, s):
        v = self.sx(s.value)
        r = self.reg()
        self.emit("mov", r=(r, v))
        self.release(v)
        self.env[s.var.name] = r

    def s_Store(self, s):
        buf = s.buffer
        self.sync(reads=self._bufs_in(*s.indices, s.value), writes=[buf])
        v = self.sx(s.value)
        d, regs = self.access_scalar(buf, s.indices)
        self.emit("sst", dt=s.value.dtype, r=(v,), imm=d)
        self.release(v, *regs)

    def s_If(self, s):
        self.sync(reads=self._bufs_in(s.cond))
        c = self.sx_bool(s.cond)
        self.sync_all()
        jz = self.emit("bz", r=(c,))
        self.release(c)
        env = dict(self.env)
        self.body(s.then_body)
        self.sync_all()
        self.restore_env(env)
        if s.else_body:
            jend = self.emit("br")
            self.patch(jz, self.here())
            self.body(s.else_body)
            self.sync_all()
            self.restore_env(env)
            self.patch(jend, self.here())
        else:
            self.patch(jz, self.here())

    def _loop(self, var, begin, extent, emit_body, step=1):
        """for var in [begin, begin+extent) step `step`: emit_body(var_reg)."""
        b = self.sx(begin)
        e = self.sx(extent)
        end = self.reg()
        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(end, b, e))
        i = self.reg()
        self.emit("mov", r=(i, b))
        self.release(b, e)
        self.sync_all()
        top = self.here()
        c = self.reg()
        self.emit("sop", func=_BINOP_INDEX["<"], dt="int32", r=(c, i, end))
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
        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(i, i, one))
        self.release(one)
        self.emit("br", imm=top)
        self.patch(jz, self.here())
        self.free_regs.extend([r for r in (i, end) if r not in self.free_regs])

    def s_For(self, s):
        if id(s) in self.pipelined:
            return self._pipelined(s)
        self.sync(reads=self._bufs_in(s.begin, s.extent))
        self._loop(s.var.name, s.begin, s.extent, lambda i, end: self.body(s.body))

    def _pipelined(self, s):
        """Software pipeline: S-way unrolled loop; iteration i+S-1's copies issue before i's compute."""
        S = s.num_stages
        copies, bufs = self.pipelined[id(s)]
        copy_stmts = [s.body[i] for i in copies]
        rest = tuple(x for i, x in enumerate(s.body) if i not in copies)
        self.sync(reads=self._bufs_in(s.begin, s.extent))
        self.sync_all()
        b = self.sx(s.begin)
        n = self.sx(s.extent)
        tokens = [[self.reg() for _ in copy_stmts] for _ in range(S)]
        for row in tokens:
            for t in row:
                self.emit("li", r=(t,), imm=0)
        kreg = self.reg()

        def issue(iter_reg, stage):
            # copies of iteration `iter_reg` (an offset from begin) into `stage`'s segments
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(kreg, b, iter_reg))
            saved = dict(self.bufseg)
            for name in bufs:
                self.bufseg[name] = self.stage_segs[name][stage]
            env = dict(self.env)
            self.env[s.var.name] = kreg
            for c, tok in zip(copy_stmts, tokens[stage]):
                span = self.cur_span
                self.cur_span = c.span if c.span.line else span
                self._copy(c, token=tok)
                self.cur_span = span
            self.env = env
            self.bufseg = saved

        def guarded(offset_reg, const, fn):
            t = self.reg()
            k = self.reg()
            self.emit("li", r=(k,), imm=const)
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(t, offset_reg, k))
            c = self.reg()
            self.emit("sop", func=_BINOP_INDEX["<"], dt="int32", r=(c, t, n))
            jz = self.emit("bz", r=(c,))
            self.release(c, k)
            fn(t)
            self.release(t)
            return jz

        zero = self.li(0)
        for j in range(S - 1):           # prologue
            jz = guarded(zero, j, lambda t, j=j: issue(t, j))
            self.patch(jz, self.here())
        i = self.reg()
        self.emit("li", r=(i,), imm=0)
        top = self.here()
        exits = []
        for j in range(S):
            it = self.reg()
            kk = self.reg()
            self.emit("li", r=(kk,), imm=j)
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(it, i, kk))
            c = self.reg()
            self.emit("sop", func=_BINOP_INDEX["<"], dt="int32", r=(c, it, n))
            exits.append(self.emit("bz", r=(c,)))
            self.release(c, kk)
            nxt = (j + S - 1) % S
            jz = guarded(it, S - 1, lambda t, nxt=nxt: issue(t, nxt))
            self.patch(jz, self.here())
            for tok in tokens[j]:
                self.emit("wait", r=(tok,))
            saved = dict(self.bufseg)
            for name in bufs:
                self.bufseg[name] = self.stage_segs[name][j]
            var = self.reg()
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(var, b, it))
            self.env[s.var.name] = var
            env = dict(self.env)
            self.body(rest)
            self.sync_all()
            self.restore_env(env)
            del self.env[s.var.name]
            self.bufseg = saved
            self.release(var, it)
        step = self.li(S)
        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(i, i, step))
        self.release(step)
        self.emit("br", imm=top)
        for x in exits:
            self.patch(x, self.here())
        for row in tokens:       # nothing is left in flight, but never leave a token behind
            for t in row:
                self.emit("wait", r=(t,))
        self.free_regs.extend(r for r in [i, zero, kreg, b, n] + [t for row in tokens for t in row]
                              if r not in self.free_regs and r >= FIRST_FREE_REG)

    # -- tile operations

    def _region_access(self, region: N.Region, iter_ext, pairing) -> Tuple[int, List[int]]:
        """Access descriptor for `region` iterated over `iter_ext`; pairing: buffer dim -> iter dim."""
        buf = region.buffer
        space, sid = self._space(buf)
        dims, regs = [], []
        for d, start in enumerate(region.starts):
            r = self.sx(start)
            regs.append(r)
            coeffs = [0] * len(iter_ext)
            if pairing[d] >= 0:
                coeffs[pairing[d]] = 1
            dims.append((r, NO_REG, tuple(coeffs)))
        return self.desc(Access(space, sid, tuple(iter_ext), tuple(dims))), regs

    def _pairing(self, a: N.Region, b: N.Region):
        sa = [(d, e) for d, e in enumerate(a.extents) if e != 1]
        sb = [(d, e) for d, e in enumerate(b.extents) if e != 1]
        if [e for _, e in sa] != [e for _, e in sb]:
            raise self.error(f"copy shapes differ: {a.buffer.name} {list(a.extents)} vs "
                             f"{b.buffer.name} {list(b.extents)}")
        ext = tuple(e for _, e in sa)
        pa = [-1] * len(a.extents)
        pb = [-1] * len(b.extents)
        for k, (d, _) in enumerate(sa):
            pa[d] = k
        for k, (d, _) in enumerate(sb):
            pb[d] = k
        return ext, pa, pb

    def s_Copy(self, s):
        self._copy(s)

    def _copy(self, s: N.Copy, token: Optional[int] = None):
        src, dst = s.src, s.dst
        ext, ps, pd = self._pairing(src, dst)
        is_dma = src.buffer.scope == "global" or dst.buffer.scope == "global"
        self.sync(reads=[src.buffer] + self._bufs_in(*src.starts, *dst.starts), writes=[dst.buffer])
        ds, rs = self._region_access(src, ext, ps)
        dd, rd = self._region_access(dst, ext, pd)
        tr = self.desc(Transfer(ds, dd))
        if is_dma:
            tok = token if token is not None else self.reg()
            self.emit("dma", func=0, r=(tok, ZERO), imm=tr)
            if token is None:
                self._track(tok, reads=[src.buffer], writes=[dst.buffer])
        else:
            self.emit("vtile", func=0, r=(ZERO,), imm=tr)
        self.release(*rs, *rd)

    def _track(self, tok, reads=(), writes=()):
        p = _PendingDMA(tok)
        for b in reads:
            sp, sid = self._space(b)
            (p.seg_reads if sp == SPACE_SEG else p.dram_reads).add(sid)
        for b in writes:
            sp, sid = self._space(b)
            (p.seg_writes if sp == SPACE_SEG else p.dram_writes).add(sid)
        self.pending.append(p)

    def s_Fill(self, s):
        dst = s.dst
        self.sync(reads=self._bufs_in(s.value, *dst.starts), writes=[dst.buffer])
        ext = tuple(e for e in dst.extents if e != 1)
        pairing, k = [], 0
        for e in dst.extents:
            pairing.append(k if e != 1 else -1)
            k += e != 1
        v = self.sx(s.value)
        dd, rd = self._region_access(dst, ext, pairing)
        tr = self.desc(Transfer(-1, dd))
        if dst.buffer.scope == "global":
            tok = self.reg()
            self.emit("dma", func=0, r=(tok, v), imm=tr)
            self._track(tok, writes=[dst.buffer])
        else:
            self.emit("vtile", func=1, r=(v,), imm=tr)
        self.release(v, *rd)

    def _flat_offset(self, region: N.Region) -> int:
        shape = region.buffer.static_shape()
        acc = self.li(0)
        stride = 1
        strides = []
        for dim in reversed(shape):
            strides.append(stride)
            stride *= dim
        strides.reverse()
        for start, st in zip(region.starts, strides):
            r = self.sx(start)
            k = self.li(st)
            self.emit("sop", func=_BINOP_INDEX["*"], dt="int32", r=(k, k, r))
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(acc, acc, k))
            self.release(r, k)
        return acc

    def s_Gemm(self, s: N.Gemm):
        for reg_ in (s.a, s.b, s.c):
            if reg_.buffer.scope == "global":
                raise self.error(f"T.gemm operand {reg_.buffer.name} must be in shared/fragment memory")
            if len(reg_.extents) < 2 or any(e != 1 for e in reg_.extents[:-2]):
                raise self.error(f"T.gemm operand {reg_.buffer.name} must be a 2-D tile")
        adt, bdt, cdt = s.a.buffer.dtype, s.b.buffer.dtype, s.c.buffer.dtype
        fmt = MATRIX_FORMATS.get(adt)
        if adt != bdt or fmt is None or cdt not in fmt[0]:
            raise self.error(f"the npu matrix engine has no {adt} x {bdt} -> {cdt} format "
                             f"(it has {', '.join(f'{a}->{c}' for a, (cs, _) in MATRIX_FORMATS.items() for c in cs)})")
        ar, ac = s.a.extents[-2:]
        br, bc = s.b.extents[-2:]
        M, K = (ac, ar) if s.transpose_a else (ar, ac)
        K2, Nn = (bc, br) if s.transpose_b else (br, bc)
        if K != K2 or tuple(s.c.extents[-2:]) != (M, Nn):
            raise self.error(f"T.gemm shapes do not agree: A {M}x{K}, B {K2}x{Nn}, C {list(s.c.extents[-2:])}")
        self.sync(reads=[s.a.buffer, s.b.buffer] + ([] if s.clear_accum else [s.c.buffer]),
                  writes=[s.c.buffer])
        lda = s.a.buffer.static_shape()[-1]
        ldb = s.b.buffer.static_shape()[-1]
        ldc = s.c.buffer.static_shape()[-1]
        oa, ob, oc = self._flat_offset(s.a), self._flat_offset(s.b), self._flat_offset(s.c)
        sa, sb, sc = self.bufseg[s.a.buffer.name], self.bufseg[s.b.buffer.name], self.bufseg[s.c.buffer.name]
        T_MN, T_K = self.cfg.matrix_max_mn, self.cfg.matrix_max_k
        ra, rb, rc = self.reg(), self.reg(), self.reg()
        for m0 in range(0, M, T_MN):
            for n0 in range(0, Nn, T_MN):
                for k0 in range(0, K, T_K):
                    m, n, k = min(T_MN, M - m0), min(T_MN, Nn - n0), min(T_K, K - k0)
                    a_delta = (k0 * lda + m0) if s.transpose_a else (m0 * lda + k0)
                    b_delta = (n0 * ldb + k0) if s.transpose_b else (k0 * ldb + n0)
                    c_delta = m0 * ldc + n0
                    for dst, base, delta in ((ra, oa, a_delta), (rb, ob, b_delta), (rc, oc, c_delta)):
                        kreg = self.li(delta)
                        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(dst, base, kreg))
                        self.release(kreg)
                    d = self.desc(MatMul(sa, ra, lda, sb, rb, ldb, sc, rc, ldc, m, n, k,
                                         int(s.transpose_a), int(s.transpose_b)))
                    clear = 1 if (s.clear_accum and k0 == 0) else 0
                    self.emit("mma", dt2=clear, imm=d)
        self.release(ra, rb, rc, oa, ob, oc)

    def _red_desc(self, src: N.Buffer, dst: N.Buffer, dim: int, what: str):
        shape = src.static_shape()
        if shape is None or src.scope == "global" or dst.scope == "global":
            raise self.error(f"{what} operands must be shared/fragment buffers on npu")
        ndim = len(shape)
        if dim < 0:
            dim += ndim
        outer, length, inner = _prod(shape[:dim]), shape[dim], _prod(shape[dim + 1:])
        if _prod(dst.static_shape()) != (outer * inner if what == "reduce" else outer * length * inner):
            raise self.error(f"{what}: {dst.name} has the wrong number of elements for {src.name} along dim {dim}")
        return self.desc(Reduction(self.bufseg[src.name], ZERO, self.bufseg[dst.name], ZERO, outer,
                                   length, inner))

    def s_Reduce(self, s: N.Reduce):
        self.sync(reads=[s.src] + ([] if s.clear else [s.dst]), writes=[s.dst])
        d = self._red_desc(s.src, s.dst, s.dim, "reduce")
        self.emit("vred", func=isa.REDUCE_KINDS.index(s.kind), dt2=1 if s.clear else 0, imm=d)

    def s_Cumsum(self, s: N.Cumsum):
        self.sync(reads=[s.src], writes=[s.dst])
        d = self._red_desc(s.src, s.dst, s.dim, "cumsum")
        self.emit("vscan", dt2=1 if s.reverse else 0, imm=d)

    def s_Atomic(self, s: N.Atomic):
        if s.dst.buffer.scope != "global":
            raise self.error("atomics need a global destination on npu")
        kind = _ATOMIC[s.kind]
        if isinstance(s.value, N.Region):
            ext, pd, ps = self._pairing(s.dst, s.value)
            self.sync(reads=[s.value.buffer] + self._bufs_in(*s.dst.starts, *s.value.starts), writes=[s.dst.buffer])
            ds, rs = self._region_access(s.value, ext, ps)
            dd, rd = self._region_access(s.dst, ext, pd)
            tok = self.reg()
            self.emit("dma", func=kind, r=(tok, ZERO), imm=self.desc(Transfer(ds, dd)))
            self._track(tok, reads=[s.value.buffer], writes=[s.dst.buffer])
            self.release(*rs, *rd)
            return
        self.sync(reads=self._bufs_in(s.value, *s.dst.starts), writes=[s.dst.buffer])
        v = self.sx(s.value)
        d, regs = self.access_scalar(s.dst.buffer, s.dst.starts)
        self.emit("satom", func=kind, dt=s.value.dtype, r=(v,), imm=d)
        self.release(v, *regs)

    def s_Print(self, s: N.Print):
        if isinstance(s.value, N.Buffer):
            buf = s.value
            self.sync(reads=[buf])
            shape = buf.static_shape() or ()
            if buf.scope == "global":
                raise self.error("T.print of a whole global tensor is not supported on npu; print a tile")
            space, sid = self._space(buf)
            dims = tuple((ZERO, NO_REG, tuple(1 if k == d else 0 for k in range(len(shape))))
                         for d in range(len(shape)))
            d = self.desc(Access(space, sid, tuple(shape), dims))
            self.emit("printt", dt2=min(self.string(s.msg) + 1, 255), imm=d)
            return
        self.sync(reads=self._bufs_in(s.value))
        v = self.sx(s.value)
        self.emit("print", dt=s.value.dtype, r=(v,), imm=self.string(s.msg))
        self.release(v)

    def s_Parallel(self, s: N.Parallel):
        self.sync_all()
        total = _prod(s.extents)
        chunk = min(total, self.cfg.vector_chunk)
        ctx = _VCtx(s)
        prev = self.vctx
        if prev is not None:
            raise self.error("nested T.Parallel is not supported on npu")
        env = dict(self.env)

        def one_chunk(e0_reg, vl_reg):
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
            self.emit("sop", func=_BINOP_INDEX["<"], dt="int32", r=(c, e0, limit))
            jz = self.emit("bz", r=(c,))
            rem = self.reg()
            self.emit("sop", func=_BINOP_INDEX["-"], dt="int32", r=(rem, limit, e0))
            ch = self.li(chunk)
            vl = self.reg()
            self.emit("sop", func=_BINOP_INDEX["min"], dt="int32", r=(vl, rem, ch))
            one_chunk(e0, vl)
            self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(e0, e0, ch))
            self.emit("br", imm=top)
            self.patch(jz, self.here())
            self.release(e0, limit, c, rem, ch, vl)
        self.restore_env(env)
        self.sync_all()

    # ------------------------------------------------------------------ vector (T.Parallel) statements

    def v_Alloc(self, s):
        pass

    def v_Hint(self, s):
        pass

    def v_Store(self, s: N.Store):
        val = self.vx(s.value)
        val = self.materialize(val, s.value.dtype)
        d, regs, slots = self.access_vector(s.buffer, s.indices)
        self.emit("vst", dt=val.dtype, r=(val.slot, self._mask()), imm=d)
        self.release(*regs)
        self.free_slot(val.slot, *slots)

    def v_Atomic(self, s: N.Atomic):
        if isinstance(s.value, N.Region) or s.dst.buffer.scope != "global":
            raise self.error("inside T.Parallel only element atomics on global tensors are supported")
        val = self.materialize(self.vx(s.value), s.value.dtype)
        d, regs, slots = self.access_vector(s.dst.buffer, s.dst.starts)
        self.emit("vatom", func=_ATOMIC[s.kind], dt=val.dtype, r=(val.slot, self._mask()), imm=d)
        self.release(*regs)
        self.free_slot(val.slot, *slots)

    def v_Let(self, s: N.Let):
        if self.is_uniform(s.value):
            self.s_Let(s)
            return
        val = self.materialize(self.vx(s.value), s.value.dtype)
        self.vctx.vlets[s.var.name] = val

    def v_If(self, s: N.If):
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
        ctx = self.vctx
        cond = self.materialize(self.vx(s.cond), "bool", convert_to="bool")
        saved = ctx.mask
        then_mask = self._and_mask(saved, cond.slot)
        ctx.mask = then_mask
        self.body(s.then_body)
        if s.else_body:
            inv = self.slot()
            self.emit("vun", func=_UNOP_INDEX["not"], dt="bool", r=(inv, cond.slot))
            else_mask = self._and_mask(saved, inv)
            ctx.mask = else_mask
            self.body(s.else_body)
            self.free_slot(inv, else_mask if else_mask != inv else None)
        ctx.mask = saved
        self.free_slot(cond.slot, then_mask if then_mask != cond.slot else None)

    def _and_mask(self, mask, slot):
        if mask is None:
            return slot
        out = self.slot()
        self.emit("vbin", func=_BINOP_INDEX["and"], dt="bool", r=(out, mask, slot))
        return out

    def _mask(self):
        return self.vctx.mask if self.vctx.mask is not None else NO_REG

    def v_For(self, s: N.For):
        if not (self.is_uniform(s.begin) and self.is_uniform(s.extent)):
            raise self.error("a loop inside T.Parallel must have bounds that do not depend on the "
                             "parallel indices on npu")
        b = self.sx(s.begin)
        e = self.sx(s.extent)
        end = self.reg()
        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(end, b, e))
        i = self.reg()
        self.emit("mov", r=(i, b))
        self.release(b, e)
        top = self.here()
        c = self.reg()
        self.emit("sop", func=_BINOP_INDEX["<"], dt="int32", r=(c, i, end))
        jz = self.emit("bz", r=(c,))
        self.release(c)
        self.env[s.var.name] = i
        lets = dict(self.vctx.vlets)
        self.body(s.body)
        for k in list(self.vctx.vlets):
            if k not in lets:
                self.free_slot(self.vctx.vlets.pop(k).slot)
        one = self.li(1)
        self.emit("sop", func=_BINOP_INDEX["+"], dt="int32", r=(i, i, one))
        self.release(one)
        self.emit("br", imm=top)
        self.patch(jz, self.here())
        del self.env[s.var.name]
        self.release(i, end)

    def v_Print(self, s: N.Print):
        if isinstance(s.value, N.Buffer) or self.is_uniform(s.value):
            return self.s_Print(s)
        val = self.materialize(self.vx(s.value), s.value.dtype)
        self.emit("vprint", dt=val.dtype, dt2=min(self.string(s.msg) + 1, 255), r=(val.slot, self._mask()),
                  imm=self.desc(Extents(self.vctx.extents)))
        self.free_slot(val.slot)

    # ------------------------------------------------------------------ scalar expressions

    def sx_bool(self, e) -> int:
        r = self.sx(e)
        if e.dtype != "bool":
            out = self.reg()
            self.emit("scvt", dt="bool", r=(out, r))
            self.release(r)
            return out
        return r

    def sx(self, e) -> int:
        """Evaluate a uniform expression into a (possibly shared) register; caller releases it."""
        if isinstance(e, N.Const):
            r = self.reg()
            if isinstance(e.value, float) or e.dtype in ("float16", "bfloat16", "float32", "float64"):
                bits = struct.unpack("<q", struct.pack("<d", float(e.value)))[0]
                self.emit("lf", r=(r,), imm=bits)
                if e.dtype != "float64":
                    self.emit("scvt", dt=e.dtype, r=(r, r))
            else:
                self.emit("li", r=(r,), imm=int(e.value))
                if e.dtype != "int32" or not -2**31 <= int(e.value) < 2**31:
                    self.emit("scvt", dt=e.dtype, r=(r, r))
            return r
        if isinstance(e, N.Var):
            if e.name in self.env:
                r = self.reg()
                self.emit("mov", r=(r, self.env[e.name]))
                return r
            raise self.error(f"variable {e.name} has no value here", e.span if e.span.line else None)
        if isinstance(e, N.BinOp):
            if e.op in ("and", "or"):
                return self._short_circuit(e)
            work = promote(e.a.dtype, e.b.dtype) if e.op in _COMPARES else e.dtype
            bool_arith = work == "bool" and e.op in ("+", "-", "*", "/", "//", "%", "pow", "min", "max")
            if bool_arith:
                work = "int32"
            a = self.sx(e.a)
            b = self.sx(e.b)
            self.emit("sop", func=_BINOP_INDEX[e.op], dt=work, r=(a, a, b))
            self.release(b)
            if bool_arith:
                self.emit("scvt", dt="bool", r=(a, a))
            return a
        if isinstance(e, N.UnaryOp):
            a = self.sx(e.a)
            self.emit("sun", func=_UNOP_INDEX[e.op], dt=e.dtype, r=(a, a))
            return a
        if isinstance(e, N.Call):
            if len(e.args) != 1:
                raise self.error(f"T.{e.func} takes one argument")
            a = self.sx(e.args[0])
            self.emit("sun", func=_UNOP_INDEX[e.func], dt=e.dtype, r=(a, a))
            return a
        if isinstance(e, N.Cast):
            a = self.sx(e.value)
            self.emit("scvt", dt=e.dtype, r=(a, a))
            return a
        if isinstance(e, N.Select):
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
        if isinstance(e, N.Load):
            if self.vctx is None:
                self.sync(reads=[e.buffer])
            d, regs = self.access_scalar(e.buffer, e.indices)
            r = self.reg()
            self.emit("sld", r=(r,), imm=d)
            self.release(*regs)
            return r
        raise self.error(f"the npu backend cannot compile the expression {type(e).__name__}")

    def _short_circuit(self, e):
        out = self.sx_bool(e.a)
        j = self.emit("bz" if e.op == "and" else "bnz", r=(out,))
        b = self.sx_bool(e.b)
        self.emit("mov", r=(out, b))
        self.release(b)
        self.patch(j, self.here())
        return out

    def access_scalar(self, buf: N.Buffer, indices):
        if len(indices) != buf.ndim:
            raise self.error(f"{buf.name} has {buf.ndim} dims, indexed with {len(indices)}")
        space, sid = self._space(buf)
        regs = [self.sx(i) for i in indices]
        dims = tuple((r, NO_REG, ()) for r in regs)
        return self.desc(Access(space, sid, (), dims)), regs

    # ------------------------------------------------------------------ vector expressions

    def is_uniform(self, e) -> bool:
        ctx = self.vctx
        if ctx is None:
            return True
        for n in walk(e):
            if isinstance(n, N.Var) and (n.name in ctx.iota or n.name in ctx.vlets):
                return False
        return True

    def materialize(self, v, dtype, convert_to=None) -> _Vec:
        """A vector operand in a slot of `convert_to` (default: `dtype`); broadcasts scalars."""
        want = convert_to or dtype
        if want not in VECTOR_DTYPES:
            raise self.error(f"the npu vector engine has no {want} lanes")
        if isinstance(v, int):          # scalar register
            out = self.slot()
            self.emit("vun", func=_UNOP_INDEX["mov"], dt=want, dt2=1, r=(out, v))
            self.release(v)
            return _Vec(out, want)
        if v.dtype != want:
            out = self.slot()
            self.emit("vcvt", dt=want, dt2=v.dtype, r=(out, v.slot))
            self.free_slot(v.slot)
            return _Vec(out, want)
        return v

    def _own(self, v: _Vec) -> _Vec:
        """A copy of `v` that may be freed (Let values and iotas are shared)."""
        ctx = self.vctx
        if v.slot in ctx.iota.values() or any(v.slot == x.slot for x in ctx.vlets.values()):
            out = self.slot()
            self.emit("vun", func=_UNOP_INDEX["mov"], dt=v.dtype, r=(out, v.slot))
            return _Vec(out, v.dtype)
        return v

    def vx(self, e):
        """Evaluate `e` inside T.Parallel: a register (uniform) or a _Vec (per lane, caller frees)."""
        if self.is_uniform(e):
            return self.sx(e)
        ctx = self.vctx
        if isinstance(e, N.Var):
            if e.name in ctx.iota:
                return self._own(_Vec(ctx.iota[e.name], "int32"))
            return self._own(ctx.vlets[e.name])
        if isinstance(e, N.BinOp):
            if e.op in ("and", "or"):
                a = self.materialize(self.vx(e.a), e.a.dtype, "bool")
                saved = ctx.mask
                live = a.slot
                if e.op == "or":
                    live = self.slot()
                    self.emit("vun", func=_UNOP_INDEX["not"], dt="bool", r=(live, a.slot))
                m = self._and_mask(saved, live)
                ctx.mask = m
                b = self.materialize(self.vx(e.b), e.b.dtype, "bool")
                ctx.mask = saved
                out = self.slot()
                self.emit("vbin", func=_BINOP_INDEX[e.op], dt="bool", r=(out, a.slot, b.slot))
                self.free_slot(a.slot, b.slot, m if m != a.slot else None, live if live != a.slot else None)
                return _Vec(out, "bool")
            work = promote(e.a.dtype, e.b.dtype) if e.op in _COMPARES else e.dtype
            bool_arith = work == "bool" and e.op in ("+", "-", "*", "/", "//", "%", "pow", "min", "max")
            if bool_arith:
                work = "int32"
            a = self._operand(self.vx(e.a), e.a.dtype, work)
            b = self._operand(self.vx(e.b), e.b.dtype, work)
            flags = (1 if isinstance(a, int) else 0) | (2 if isinstance(b, int) else 0)
            out = self.slot()
            ra = a if isinstance(a, int) else a.slot
            rb = b if isinstance(b, int) else b.slot
            self.emit("vbin", func=_BINOP_INDEX[e.op], dt=work, dt2=flags, r=(out, ra, rb))
            self._drop(a, b)
            res = _Vec(out, "bool" if e.op in _COMPARES else work)
            if bool_arith:
                return self.materialize(res, "bool")
            return res
        if isinstance(e, N.UnaryOp) or isinstance(e, N.Call):
            op = e.op if isinstance(e, N.UnaryOp) else e.func
            arg = e.a if isinstance(e, N.UnaryOp) else e.args[0]
            src_dt = "bool" if op == "not" else e.dtype
            a = self._operand(self.vx(arg), arg.dtype, src_dt)
            out = self.slot()
            self.emit("vun", func=_UNOP_INDEX[op], dt=e.dtype if op != "not" else "bool",
                      dt2=1 if isinstance(a, int) else 0, r=(out, a if isinstance(a, int) else a.slot))
            self._drop(a)
            return _Vec(out, "bool" if op == "not" else e.dtype)
        if isinstance(e, N.Cast):
            return self.materialize(self.vx(e.value), e.value.dtype, e.dtype)
        if isinstance(e, N.Select):
            c = self.materialize(self.vx(e.cond), e.cond.dtype, "bool")
            saved = ctx.mask
            m1 = self._and_mask(saved, c.slot)
            ctx.mask = m1
            a = self._operand(self.vx(e.a), e.a.dtype, e.dtype)
            inv = self.slot()
            self.emit("vun", func=_UNOP_INDEX["not"], dt="bool", r=(inv, c.slot))
            m2 = self._and_mask(saved, inv)
            ctx.mask = m2
            b = self._operand(self.vx(e.b), e.b.dtype, e.dtype)
            ctx.mask = saved
            out = self.slot()
            flags = (2 if isinstance(a, int) else 0) | (4 if isinstance(b, int) else 0)
            self.emit("vsel", dt=e.dtype, dt2=flags, r=(out, c.slot, a if isinstance(a, int) else a.slot,
                                                         b if isinstance(b, int) else b.slot))
            self._drop(a, b)
            self.free_slot(c.slot, inv, m1 if m1 != c.slot else None, m2 if m2 != inv else None)
            return _Vec(out, e.dtype)
        if isinstance(e, N.Load):
            d, regs, slots = self.access_vector(e.buffer, e.indices)
            out = self.slot()
            self.emit("vld", r=(out, self._mask()), imm=d)
            self.release(*regs)
            self.free_slot(*slots)
            return _Vec(out, e.buffer.dtype)
        raise self.error(f"the npu backend cannot compile the expression {type(e).__name__}")

    def _operand(self, v, have_dtype, want):
        """Convert an operand to `want`: registers convert in the scalar unit, slots with vcvt."""
        if isinstance(v, int):
            if have_dtype != want:
                self.emit("scvt", dt=want, r=(v, v))
            return v
        return self.materialize(v, want)

    def _drop(self, *ops):
        for o in ops:
            if isinstance(o, int):
                self.release(o)
            elif o is not None:
                self.free_slot(o.slot)

    def _affine(self, e):
        """(uniform base expr or None, {parallel var: coeff}) when `e` is affine in the parallel vars."""
        ctx = self.vctx
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
                base = b[0] if base is None and sign == 1 else N.BinOp(
                    e.op, base if base is not None else N.Const(0, "int32"), b[0], "int32")
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
        if isinstance(e, N.Cast) and e.dtype in ("int32", "int64", "int16") and e.value.dtype in ("int32", "int64", "int16"):
            return self._affine(e.value)
        return None

    def access_vector(self, buf: N.Buffer, indices):
        """Access descriptor over the Parallel's space; affine indices need no index vectors."""
        ctx = self.vctx
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


_RULE_OPS = ("Alloc", "Hint", "Kernel", "Let", "Store", "If", "For", "Copy", "Fill", "Gemm", "Reduce",
             "Cumsum", "Atomic", "Print", "Parallel")


def default_rules():
    """Statement class name -> rule(codegen, stmt): how each op lowers outside T.Parallel.

    Exposed through the `tilecore_lowering_rules` hook: a third-party plugin can
    replace one (e.g. rules["Gemm"] = my_gemm) and the codegen uses it.
    """
    return {name: getattr(Codegen, "s_" + name) for name in _RULE_OPS}


def compile_func(func: N.PrimFunc, analyses=None, config: NPUConfig = DEFAULT_CONFIG) -> Program:
    """Compile a PrimFunc (after the core passes) to an NPU Program."""
    return Codegen(func, analyses, config).run()
