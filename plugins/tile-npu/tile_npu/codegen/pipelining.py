"""Software pipelining of T.Pipelined loops: which copies can be prefetched, and the unrolled loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Set, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk, walk_stmts

from .emitter import BINOP_INDEX
from .host import NpuHost
from .registers import FIRST_FREE_REG


@dataclass
class _PipelineState:
    """Registers and statements of the pipelined loop being emitted."""

    loop: N.For
    stages: int
    bufs: List[str]  # prefetched buffers (one segment per stage)
    copy_stmts: List[N.Copy]
    rest: Tuple[N.Stmt, ...]  # the body without the prefetched copies
    begin: int  # register: the loop's begin
    count: int  # register: the trip count
    tokens: List[List[int]]  # [stage][copy] -> register holding the DMA token
    kreg: int  # register: the loop variable of the iteration being prefetched


class Pipelining(NpuHost):
    """Plans prefetchable copies per pipelined loop and emits the S-stage software pipeline."""

    def _plan_pipelines(self, body):
        """Find T.Pipelined loops whose global->scratchpad copies can be prefetched."""
        for s in self._all_stmts(body):
            if isinstance(s, N.For) and s.kind == "pipelined" and s.num_stages > 1:
                copies, bufs = self._prefetchable_copies(body, s)
                if copies:
                    self.pipelined[id(s)] = (copies, bufs)

    def _prefetchable_copies(self, body, s):
        """(indices in `s.body`, destination names) of the copies the pipeline may issue early."""
        copies, bufs = [], []
        body_lets = {x.var.name for x in self._all_stmts(s.body) if isinstance(x, N.Let)}
        inner_vars = body_lets | {
            v.name for x in self._all_stmts(s.body) for v in getattr(x, "vars", ()) if isinstance(x, N.Parallel)
        }
        inner_vars |= {x.var.name for x in self._all_stmts(s.body) if isinstance(x, N.For)}
        for i, c in enumerate(s.body):
            if not (
                isinstance(c, N.Copy)
                and c.src.buffer.scope == "global"
                and c.dst.buffer.scope in ("shared", "fragment", "local")
            ):
                continue
            name = c.dst.buffer.name
            used_vars = {n.name for e in c.src.starts + c.dst.starts for n in walk(e) if isinstance(n, N.Var)}
            loads = any(isinstance(n, N.Load) for e in c.src.starts + c.dst.starts for n in walk(e))
            if used_vars & inner_vars or loads or name in bufs:
                continue
            if self._prefetch_sees_same_data(body, s, i, c):
                copies.append(i)
                bufs.append(name)
        return copies, bufs

    def _prefetch_sees_same_data(self, body, s, i, c) -> bool:
        """Whether copy `c` (= s.body[i]) may run an iteration early without changing what it copies."""
        name = c.dst.buffer.name
        writers = [x for x in self._all_stmts(s.body) if x is not c and name in self._writes(x)]
        # the prefetch must not see different data than the copy would have:
        # nothing earlier in the body reads the destination, nothing in the loop
        # writes the source tensor
        earlier = [
            x
            for x in self._all_stmts(s.body[:i])
            if any(isinstance(n, N.Buffer) and n.name == name for n in self._stmt_nodes(x))
        ]
        src_written = [
            x
            for x in self._all_stmts(s.body)
            if c.src.buffer.name in self._writes(x)
            or isinstance(x, N.Atomic)
            and x.dst.buffer.name == c.src.buffer.name
        ]
        return not (
            writers
            or earlier
            or src_written
            or self._used_outside(body, s, name)
            or any(isinstance(x, N.Alloc) and x.buffer.name == name for x in self._all_stmts(s.body))
        )

    def _all_stmts(self, body):
        """Every statement of `body`, pre-order, nested bodies included."""
        return list(walk_stmts(body))

    def _writes(self, s) -> Set[str]:
        """Names of the buffers statement `s` writes (itself, not its nested bodies)."""
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
        """Whether buffer `name` is referenced in `body` outside `loop`'s body."""
        inside = {id(x) for x in self._all_stmts(loop.body)}
        for x in self._all_stmts(body):
            if x is loop or id(x) in inside or isinstance(x, (N.Alloc, N.Hint)):
                continue
            if any(isinstance(n, N.Buffer) and n.name == name for n in self._stmt_nodes(x)):
                return True
        return False

    def _stmt_nodes(self, s):
        """Every IR node below the fields of statement `s` (not its nested bodies)."""
        for fname in ("buffer", "src", "dst", "a", "b", "c", "value", "indices", "cond", "begin", "extent", "starts"):
            v = getattr(s, fname, None)
            if v is None:
                continue
            for item in v if isinstance(v, tuple) else (v,):
                if hasattr(item, "__dataclass_fields__"):
                    yield from walk(item)

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
        st = _PipelineState(s, S, bufs, copy_stmts, rest, b, n, tokens, kreg)
        zero = self.li(0)
        for j in range(S - 1):  # prologue
            jz = self._guarded(st, zero, j, lambda t, j=j: self._issue_copies(st, t, j))
            self.patch(jz, self.here())
        i = self.reg()
        self.emit("li", r=(i,), imm=0)
        top = self.here()
        exits = [self._pipeline_stage(st, i, j) for j in range(S)]
        step = self.li(S)
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(i, i, step))
        self.release(step)
        self.emit("br", imm=top)
        for x in exits:
            self.patch(x, self.here())
        for row in tokens:  # nothing is left in flight, but never leave a token behind
            for t in row:
                self.emit("wait", r=(t,))
        self.free_regs.extend(
            r
            for r in [i, zero, kreg, b, n] + [t for row in tokens for t in row]
            if r not in self.free_regs and r >= FIRST_FREE_REG
        )

    def _issue_copies(self, st: _PipelineState, iter_reg: int, stage: int):
        """The prefetched copies of iteration `iter_reg` (an offset from begin) into `stage`'s segments."""
        kreg = st.kreg
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(kreg, st.begin, iter_reg))
        saved = dict(self.bufseg)
        for name in st.bufs:
            self.bufseg[name] = self.stage_segs[name][stage]
        env = dict(self.env)
        self.env[st.loop.var.name] = kreg
        for c, tok in zip(st.copy_stmts, st.tokens[stage]):
            span = self.cur_span
            self.cur_span = c.span if c.span.line else span
            self._copy(c, token=tok)
            self.cur_span = span
        self.env = env
        self.bufseg = saved

    def _guarded(self, st: _PipelineState, offset_reg: int, const: int, fn) -> int:
        """`fn(t)` for t = offset_reg + const, skipped when t >= the trip count; returns the branch to patch."""
        t = self.reg()
        k = self.reg()
        self.emit("li", r=(k,), imm=const)
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(t, offset_reg, k))
        c = self.reg()
        self.emit("sop", func=BINOP_INDEX["<"], dt="int32", r=(c, t, st.count))
        jz = self.emit("bz", r=(c,))
        self.release(c, k)
        fn(t)
        self.release(t)
        return jz

    def _pipeline_stage(self, st: _PipelineState, i: int, j: int) -> int:
        """Unrolled body j: prefetch iteration i+j+S-1, wait for stage j, compute; returns the loop-exit branch."""
        S = st.stages
        it = self.reg()
        kk = self.reg()
        self.emit("li", r=(kk,), imm=j)
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(it, i, kk))
        c = self.reg()
        self.emit("sop", func=BINOP_INDEX["<"], dt="int32", r=(c, it, st.count))
        exit_branch = self.emit("bz", r=(c,))
        self.release(c, kk)
        nxt = (j + S - 1) % S
        jz = self._guarded(st, it, S - 1, lambda t: self._issue_copies(st, t, nxt))
        self.patch(jz, self.here())
        for tok in st.tokens[j]:
            self.emit("wait", r=(tok,))
        saved = dict(self.bufseg)
        for name in st.bufs:
            self.bufseg[name] = self.stage_segs[name][j]
        var = self.reg()
        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(var, st.begin, it))
        self.env[st.loop.var.name] = var
        env = dict(self.env)
        self.body(st.rest)
        self.sync_all()
        self.restore_env(env)
        del self.env[st.loop.var.name]
        self.bufseg = saved
        self.release(var, it)
        return exit_branch
