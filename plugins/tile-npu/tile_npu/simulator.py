"""The NPU simulator: runs a program functionally (numpy) and times it (cycle-approximate).

Functional model: DRAM is the caller's arrays; each core has a byte-addressed
scratchpad; the scalar unit executes the instruction stream in order and
dispatches vector, matrix and DMA instructions to their engines.

Timing model (per core): the scalar unit issues one instruction per cycle;
each engine executes its queue in order, an instruction starting when the
engine is free and its scratchpad operands are ready (a scoreboard of
64-byte lines records when each line was last written and read). DMA runs
asynchronously: `dma` returns a completion token and only `wait` on that
token makes the data visible, so DMA, matrix and vector work overlap.
Blocks are spread round-robin over cores; the launch takes as long as the
busiest core.

Traps (NPUTrap, a TileRuntimeError naming the program counter and the user's
source line): scratchpad overflow (a segment beyond the scratchpad),
misaligned DMA or access, a read or write of scratchpad whose DMA has not
completed (a race in the generated code), out-of-bounds element indexing,
illegal instructions and runaway programs.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Dict, List, NoReturn, Optional, Sequence, Tuple

import numpy as np

from tilecore.diagnostics import TileRuntimeError
from tilecore.envflags import env_number
from tilecore.ir.nodes import Span

from . import isa
from .alu import binop, convert, unop
from .arch import DEFAULT_CONFIG, MATRIX_FORMATS, NP_DTYPES, NPUConfig, dtype_size
from .isa import NO_REG, OPS_BY_CODE, SPACE_PARAM, SPACE_SEG, Access, Program

ENGINES = ("scalar", "vector", "matrix", "dma")


class NPUTrap(TileRuntimeError):
    """The simulated NPU stopped on a fault. `kind` names it; `pc` is the faulting instruction."""

    def __init__(self, kind: str, message: str, pc: int = -1, span: Optional[Span] = None, source: str = ""):
        self.kind = kind
        self.pc = pc
        where = f" (pc {pc})" if pc >= 0 else ""
        super().__init__(f"NPU trap [{kind}]{where}: {message}", span, source)


@dataclass
class _Pending:
    """An in-flight DMA: what it writes/reads, and when it completes."""

    token: int
    pc: int
    end: float
    spad_writes: List[Tuple[int, int]] = field(default_factory=list)
    spad_reads: List[Tuple[int, int]] = field(default_factory=list)
    dram_writes: Tuple[int, ...] = ()
    dram_reads: Tuple[int, ...] = ()


@dataclass
class _CoreState:
    """Per-core timing state; persists across the blocks a core runs."""

    lines: int
    issue: float = 0.0
    end: float = 0.0
    free: Dict[str, float] = field(default_factory=lambda: {e: 0.0 for e in ENGINES})
    busy: Dict[str, float] = field(default_factory=lambda: {e: 0.0 for e in ENGINES})
    wr_done: np.ndarray = field(init=False)  # per scratchpad line: when its last write ends
    rd_done: np.ndarray = field(init=False)  # per line: when its last read ends
    blocks: int = 0
    instructions: int = 0

    def __post_init__(self):
        self.wr_done = np.zeros(self.lines)
        self.rd_done = np.zeros(self.lines)


@dataclass
class LaunchReport:
    """What one launch cost: cycles, per-engine busy cycles and utilization, per-core detail."""

    cycles: int
    cores: int
    blocks: int
    instructions: int
    engine_busy: Dict[str, int]
    utilization: Dict[str, float]
    per_core_cycles: List[int]
    dma_bytes: int
    clock_ghz: float

    @property
    def time_us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    def as_dict(self) -> dict:
        return {
            "cycles": self.cycles,
            "time_us": self.time_us,
            "cores": self.cores,
            "blocks": self.blocks,
            "instructions": self.instructions,
            "engine_busy": dict(self.engine_busy),
            "utilization": dict(self.utilization),
            "per_core_cycles": list(self.per_core_cycles),
            "dma_bytes": self.dma_bytes,
        }

    def __str__(self) -> str:
        util = "  ".join(f"{e} {100 * u:5.1f}%" for e, u in self.utilization.items())
        return (
            f"{self.cycles} cycles ({self.time_us:.2f} us at {self.clock_ghz} GHz) on "
            f"{self.cores} cores, {self.blocks} blocks, {self.instructions} instructions, "
            f"{self.dma_bytes} DMA bytes; utilization: {util}"
        )


DEFAULT_MAX_STEPS = 5_000_000  # ~ a minute or two of simulation in Python


class Simulator:
    """Loads a Program once; `run(args, dyn_values)` executes a launch and returns a LaunchReport."""

    def __init__(self, program: Program, config: NPUConfig = DEFAULT_CONFIG, max_steps: Optional[int] = None):
        self.prog = program
        self.cfg = config
        if program.ncores:
            self.cfg = config.with_options({"cores": program.ncores})
        # instructions one launch may execute, all blocks together: a runaway loop or a launch too
        # big to simulate stops with a located trap instead of running for minutes
        self.max_steps = int(
            max_steps if max_steps is not None else env_number("TILE_NPU_MAX_STEPS", DEFAULT_MAX_STEPS, minimum=1)
        )
        self.steps_left = self.max_steps
        self._scalar_ops = frozenset(i.code for i in OPS_BY_CODE.values() if i.unit == "scalar")
        self.code = [(i.op, i.func, i.dt, i.dt2, i.r[0], i.r[1], i.r[2], i.r[3], i.imm) for i in program.instrs]
        self._descs: Dict[int, object] = {}
        self.lines = program.debug.get("lines", {})
        self.source = program.debug.get("source", "")
        self.file = program.debug.get("file", "<npu program>")
        self.output: List[str] = []  # T.print lines (also printed)
        self._unravel_cache: Dict[tuple, tuple] = {}

    # ------------------------------------------------------------------ helpers

    def _span(self, pc):
        ln = self.lines.get(str(pc))
        if ln:
            return Span(self.file, ln[0], ln[1])
        return None

    def trap(self, kind, message, pc=None) -> NoReturn:
        pc = self.pc if pc is None else pc
        raise NPUTrap(kind, message, pc, self._span(pc), self.source)

    def desc(self, index):
        d = self._descs.get(index)
        if d is None:
            if not 0 <= index < len(self.prog.descs):
                self.trap("illegal_instruction", f"descriptor d{index} does not exist")
            try:
                d = isa.decode_desc(self.prog.descs[index])
            except (ValueError, IndexError, TypeError) as e:
                self.trap("illegal_instruction", f"descriptor d{index} is malformed: {e}")
            self._descs[index] = d
        return d

    def _seg(self, sid):
        if not 0 <= sid < len(self.prog.segments):
            self.trap("illegal_instruction", f"segment v{sid} does not exist")
        return self.prog.segments[sid]

    def view(self, sid, dtype=None):
        """The flat numpy view of segment `sid` in this core's scratchpad (traps on overflow)."""
        key = (sid, dtype)
        v = self._views.get(key)
        if v is not None:
            return v
        seg = self._seg(sid)
        dt = dtype or seg.dtype
        if dt == "none":
            self.trap("illegal_instruction", f"vector slot v{sid} used without an element type")
        size = seg.nbytes
        if seg.base + size > self.cfg.scratchpad_bytes or seg.base < 0:
            self.trap(
                "scratchpad_overflow",
                f"segment v{sid} ({seg.name}) occupies bytes [{seg.base:#x}, {seg.base + size:#x}) "
                f"but the scratchpad has {self.cfg.scratchpad_bytes:#x} bytes",
            )
        isz = dtype_size(dt)
        if seg.base % isz:
            self.trap(
                "misaligned_access",
                f"segment v{sid} ({seg.name}) at {seg.base:#x} is not aligned to its {isz}-byte {dt} elements",
            )
        n = size // isz
        v = self.spad[seg.base : seg.base + n * isz].view(NP_DTYPES[dt])
        self._views[key] = v
        return v

    def _unravel(self, extents, e0, n):
        key = (extents, e0, n)
        r = self._unravel_cache.get(key)
        if r is None:
            if extents:
                r = np.unravel_index(np.arange(e0, e0 + n, dtype=np.int64), extents)
            else:
                r = ()
            if len(self._unravel_cache) > 4096:
                self._unravel_cache.clear()
            self._unravel_cache[key] = r
        return r

    def coords(self, acc: Access, e0, n):
        """Coordinates (one int64 array of length n per space dimension) of elements e0..e0+n."""
        idx = self._unravel(acc.extents, e0, n)
        out = []
        regs = self.regs
        for base, slot, coeffs in acc.dims:
            c = np.full(n, int(regs[base]) if base != NO_REG else 0, dtype=np.int64)
            for k, cf in enumerate(coeffs):
                if cf:
                    c += cf * idx[k]
            if slot != NO_REG:
                c += self.view(slot, "int32")[:n]
            out.append(c)
        return out

    def _space_shape(self, acc: Access):
        if acc.space == SPACE_SEG:
            return self._seg(acc.space_id).shape
        if acc.space == SPACE_PARAM:
            if not 0 <= acc.space_id < len(self.args):
                self.trap("illegal_instruction", f"parameter {acc.space_id} does not exist")
            return self.args[acc.space_id].shape
        self.trap("illegal_instruction", f"unknown address space {acc.space}")

    def _space_name(self, acc):
        if acc.space == SPACE_SEG:
            return self._seg(acc.space_id).name
        return self.prog.params[acc.space_id].name if acc.space_id < len(self.prog.params) else "?"

    def _check_rank(self, acc, shape):
        if len(acc.dims) != len(shape):
            self.trap(
                "illegal_instruction",
                f"access to {self._space_name(acc)} has {len(acc.dims)} indices, it has {len(shape)} dims",
            )

    def _in_bounds(self, acc, cs, shape, active):
        ok = np.ones(len(cs[0]) if cs else 1, dtype=bool)
        for c, s in zip(cs, shape):
            ok &= (c >= 0) & (c < s)
        if active is not None:
            bad = ~ok & active
        else:
            bad = ~ok
        if bad.any():
            i = int(np.argmax(bad))
            index = tuple(int(c[i]) for c in cs)
            self.trap("out_of_bounds", f"index {list(index)} is outside {self._space_name(acc)} of shape {list(shape)}")
        return ok

    def _flat(self, cs, shape):
        flat = np.zeros(len(cs[0]) if cs else 1, dtype=np.int64)
        for c, s in zip(cs, shape):
            flat = flat * s + c
        return flat

    def _range(self, sid, flat, dtype=None):
        seg = self.prog.segments[sid]
        isz = dtype_size(dtype or seg.dtype)
        if flat.size == 0:
            return (seg.base, seg.base)
        return (seg.base + int(flat.min()) * isz, seg.base + (int(flat.max()) + 1) * isz)

    def _slot_range(self, sid, n, dtype):
        base = self._seg(sid).base
        return (base, base + n * dtype_size(dtype))

    # ------------------------------------------------------------------ hazards and timing

    def check_hazards(self, reads=(), writes=(), dram_reads=(), dram_writes=()):
        """Trap when an instruction touches memory an in-flight DMA has not finished with."""
        if not self.pending:
            return
        for p in self.pending.values():
            for lo, hi in list(reads) + list(writes):
                for a, b in p.spad_writes:
                    if lo < b and a < hi:
                        self.trap(
                            "dma_race",
                            f"scratchpad bytes [{lo:#x}, {hi:#x}) ({self._owner(lo)}) are "
                            f"accessed while DMA token {p.token} (issued at pc {p.pc}) is still "
                            f"writing them; the program must `wait` on the token first",
                        )
            for lo, hi in writes:
                for a, b in p.spad_reads:
                    if lo < b and a < hi:
                        self.trap(
                            "dma_race",
                            f"scratchpad bytes [{lo:#x}, {hi:#x}) ({self._owner(lo)}) are "
                            f"overwritten while DMA token {p.token} (issued at pc {p.pc}) is still "
                            f"reading them",
                        )
            for q in list(dram_reads) + list(dram_writes):
                if q in p.dram_writes:
                    self.trap(
                        "dma_race",
                        f"DRAM tensor {self.prog.params[q].name} is accessed while DMA "
                        f"token {p.token} (issued at pc {p.pc}) is still writing it",
                    )
            for q in dram_writes:
                if q in p.dram_reads:
                    self.trap(
                        "dma_race",
                        f"DRAM tensor {self.prog.params[q].name} is written while DMA "
                        f"token {p.token} (issued at pc {p.pc}) is still reading it",
                    )

    def _owner(self, addr):
        for s in self.prog.segments:
            if s.base <= addr < s.base + s.nbytes and s.dtype != "none":
                return s.name
        return "vector slot"

    def _lines(self, r):
        lb = self.cfg.bank_line_bytes
        lo, hi = r
        return slice(max(lo // lb, 0), min(max((hi + lb - 1) // lb, lo // lb + 1), self.core.lines))

    def engine(self, unit, occupancy, latency, reads=(), writes=()):
        """Schedule one engine instruction; returns its completion time."""
        c = self.core
        start = max(c.issue, c.free[unit])
        for r in reads:
            s = self._lines(r)
            if s.stop > s.start:
                start = max(start, c.wr_done[s].max())
        for r in writes:
            s = self._lines(r)
            if s.stop > s.start:
                start = max(start, c.wr_done[s].max(), c.rd_done[s].max())
        end = start + occupancy + latency
        c.free[unit] = start + occupancy
        c.busy[unit] += occupancy
        for r in reads:
            s = self._lines(r)
            np.maximum(c.rd_done[s], end, out=c.rd_done[s])
        for r in writes:
            s = self._lines(r)
            c.wr_done[s] = end
        c.issue += 1
        c.end = max(c.end, end)
        return end

    def scalar_mem(self, reads=(), writes=(), latency=None):
        c = self.core
        t = c.issue
        for r in reads:
            s = self._lines(r)
            if s.stop > s.start:
                t = max(t, c.wr_done[s].max())
        for r in writes:
            s = self._lines(r)
            if s.stop > s.start:
                t = max(t, c.wr_done[s].max(), c.rd_done[s].max())
        t += self.cfg.scalar_mem_latency if latency is None else latency
        for r in writes:
            c.wr_done[self._lines(r)] = t
        for r in reads:
            s = self._lines(r)
            np.maximum(c.rd_done[s], t, out=c.rd_done[s])
        c.busy["scalar"] += t - c.issue
        c.issue = t

    # ------------------------------------------------------------------ launch

    def run(self, args: Sequence[np.ndarray], dyn_values: Sequence[int] = ()) -> LaunchReport:
        """Execute one launch over `args` (DRAM tensors, modified in place)."""
        prog, cfg = self.prog, self.cfg
        if len(args) != len(prog.params):
            raise TileRuntimeError(f"NPU program takes {len(prog.params)} tensors, got {len(args)}")
        self.args = list(args)
        self.dyn = [int(v) for v in dyn_values]
        self.dma_bytes = 0
        self.steps_left = self.max_steps
        nlines = cfg.scratchpad_bytes // cfg.bank_line_bytes
        cores = [_CoreState(nlines) for _ in range(cfg.cores)]
        spads = [np.full(cfg.scratchpad_bytes, 0xFF, dtype=np.uint8) for _ in range(cfg.cores)]
        # grid program: computes the grid dims into r0..r(rank-1) (on core 0, not timed)
        self._start_block(spads[0], cores[0], (0,) * prog.grid_rank, (1,) * prog.grid_rank, 0)
        self._exec(prog.grid_pc)
        grid = tuple(int(self.regs[i]) for i in range(prog.grid_rank))
        if any(g < 0 for g in grid):
            raise TileRuntimeError(f"negative grid size {grid}")
        _CoreState.__init__(cores[0], nlines)  # reset in place: the grid program's timing does not count
        nblocks = math.prod(grid) if grid else 1
        if nblocks > self.steps_left:  # every block runs at least one instruction
            raise TileRuntimeError(
                f"npu: the grid {grid} has {nblocks} blocks, more than the simulator's "
                f"budget of {self.max_steps} instructions per launch "
                f"(TILE_NPU_MAX_STEPS); launch a smaller grid"
            )
        for b in range(nblocks):
            core_id = b % cfg.cores
            coords = []
            rest = b
            for g in grid:  # block index 0 varies fastest (bx, then by, ...)
                coords.append(rest % g)
                rest //= g
            c = cores[core_id]
            self._start_block(spads[core_id], c, tuple(coords), grid, core_id)
            self._exec(prog.kernel_pc)
            if self.pending:
                tok = next(iter(self.pending.values()))
                self.trap(
                    "dma_race",
                    f"block ended with DMA token {tok.token} (issued at pc {tok.pc}) never waited on",
                    pc=tok.pc,
                )
            c.issue = max(c.issue, c.end, *c.free.values())
            c.end = c.issue
            c.blocks += 1
        per_core = [int(math.ceil(c.end)) for c in cores]
        cycles = max(per_core) if per_core else 0
        busy = {e: int(sum(c.busy[e] for c in cores)) for e in ENGINES}
        util = {e: (busy[e] / (cycles * cfg.cores) if cycles else 0.0) for e in ENGINES}
        return LaunchReport(
            cycles,
            cfg.cores,
            nblocks,
            sum(c.instructions for c in cores),
            busy,
            util,
            per_core,
            self.dma_bytes,
            cfg.clock_ghz,
        )

    def _start_block(self, spad, core, coords, grid, core_id):
        self.spad = spad
        self.core = core
        self._views = {}
        self.regs = [np.int32(0)] * 256
        self.block = coords
        self.grid = grid
        self.core_id = core_id
        self.pending: Dict[int, _Pending] = {}
        self.next_token = 1
        self.vl = 0
        self.vstart = 0

    # ------------------------------------------------------------------ the instruction loop

    def _exec(self, pc):
        code = self.code
        steps = 0
        n = len(code)
        handlers = self._handlers()
        core = self.core
        scalar_ops = self._scalar_ops
        budget = self.steps_left
        try:
            while True:
                if not 0 <= pc < n:
                    self.pc = pc
                    self.trap("illegal_instruction", f"program counter {pc} is outside the program (no halt?)")
                ins = code[pc]
                self.pc = pc
                pc += 1
                steps += 1
                core.instructions += 1
                if steps > budget:
                    self.trap(
                        "runaway",
                        f"the launch ran more than {self.max_steps} instructions (the simulator's "
                        f"budget, TILE_NPU_MAX_STEPS): a loop that does not end, or a launch too large to "
                        f"simulate (raise TILE_NPU_MAX_STEPS to allow it)",
                    )
                h = handlers.get(ins[0])
                if h is None:
                    self.trap("illegal_instruction", f"unknown opcode {ins[0]:#04x}")
                if ins[0] in scalar_ops:
                    core.busy["scalar"] += 1
                if ins[0] == 0x01:  # halt
                    core.issue += 1
                    return
                r = h(ins)
                if r is not None:
                    pc = r
        finally:
            self.steps_left -= steps

    def _handlers(self):
        h = getattr(self, "_hcache", None)
        if h is None:
            h = {}
            for info in OPS_BY_CODE.values():
                h[info.code] = getattr(self, "op_" + info.name, None) or self.op_nop
            self._hcache = h
        return h

    # ------------------------------------------------------------------ scalar unit

    def _dtype(self, code):
        name = isa.DTYPE_NAMES.get(code)
        if name is None or name == "none":
            self.trap("illegal_instruction", f"bad dtype code {code}")
        return name

    def op_nop(self, ins):
        self.core.issue += 1

    def op_halt(self, ins):
        pass

    def op_li(self, ins):
        v = ins[8]
        self.regs[ins[4]] = np.int64(v) if not -(2**31) <= v < 2**31 else np.int32(v)
        self.core.issue += 1

    def op_lf(self, ins):
        self.regs[ins[4]] = np.float64(struct.unpack("<d", struct.pack("<q", ins[8]))[0])
        self.core.issue += 1

    def op_mov(self, ins):
        self.regs[ins[4]] = self.regs[ins[5]]
        self.core.issue += 1

    def op_sop(self, ins):
        if ins[1] >= len(isa.BINOPS):
            self.trap("illegal_instruction", f"bad ALU operation {ins[1]}")
        dt = self._dtype(ins[2])
        self.regs[ins[4]] = binop(ins[1], np.asarray(self.regs[ins[5]]), np.asarray(self.regs[ins[6]]), dt)[()]
        self.core.issue += 1

    def op_sun(self, ins):
        if ins[1] >= len(isa.UNOPS):
            self.trap("illegal_instruction", f"bad unary operation {ins[1]}")
        dt = self._dtype(ins[2])
        self.regs[ins[4]] = unop(ins[1], np.asarray(self.regs[ins[5]]), dt)[()]
        self.core.issue += 1

    def op_scvt(self, ins):
        self.regs[ins[4]] = convert(np.asarray(self.regs[ins[5]]), self._dtype(ins[2]))[()]
        self.core.issue += 1

    def op_ssel(self, ins):
        dt = self._dtype(ins[2])
        c = bool(self.regs[ins[5]])
        self.regs[ins[4]] = convert(np.asarray(self.regs[ins[6]] if c else self.regs[ins[7]]), dt)[()]
        self.core.issue += 1

    def op_spr(self, ins):
        kind, k = ins[1], ins[8]
        try:
            if kind == 0:
                v = self.block[k]
            elif kind == 1:
                v = self.grid[k]
            elif kind == 2:
                v = self.dyn[k]
            else:
                v = self.core_id
        except IndexError:
            self.trap(
                "illegal_instruction",
                f"special register {isa.SPR_KINDS[kind] if kind < 4 else kind}[{k}] does not exist",
            )
        self.regs[ins[4]] = np.int32(v)
        self.core.issue += 1

    def _scalar_access(self, index):
        acc = self.desc(index)
        if not isinstance(acc, Access):
            self.trap("illegal_instruction", f"descriptor d{index} is not an access pattern")
        shape = self._space_shape(acc)
        self._check_rank(acc, shape)
        cs = self.coords(acc, 0, 1)
        self._in_bounds(acc, cs, shape, None)
        return acc, shape, cs

    def op_sld(self, ins):
        acc, shape, cs = self._scalar_access(ins[8])
        if acc.space == SPACE_SEG:
            flat = self._flat(cs, shape)
            r = self._range(acc.space_id, flat)
            self.check_hazards(reads=[r])
            self.regs[ins[4]] = self.view(acc.space_id)[flat[0]]
            self.scalar_mem(reads=[r])
        else:
            self.check_hazards(dram_reads=[acc.space_id])
            self.regs[ins[4]] = self.args[acc.space_id][tuple(int(c[0]) for c in cs)]
            self.scalar_mem(latency=self.cfg.scalar_dram_latency)

    def op_sst(self, ins):
        acc, shape, cs = self._scalar_access(ins[8])
        value = np.asarray(self.regs[ins[4]])
        if acc.space == SPACE_SEG:
            seg = self._seg(acc.space_id)
            flat = self._flat(cs, shape)
            r = self._range(acc.space_id, flat)
            self.check_hazards(writes=[r])
            self.view(acc.space_id)[flat[0]] = convert(convert(value, self._dtype(ins[2])), seg.dtype)[()]
            self.scalar_mem(writes=[r])
        else:
            arr = self.args[acc.space_id]
            self.check_hazards(dram_writes=[acc.space_id])
            from .launcher import tile_dtype_of

            arr[tuple(int(c[0]) for c in cs)] = convert(value, tile_dtype_of(arr))[()]
            self.scalar_mem(latency=self.cfg.scalar_dram_latency)

    def op_satom(self, ins):
        acc, shape, cs = self._scalar_access(ins[8])
        if acc.space != SPACE_PARAM:
            self.trap("illegal_instruction", "atomics act on DRAM tensors only")
        self.check_hazards(dram_writes=[acc.space_id])
        arr = self.args[acc.space_id]
        self._atomic(ins[1], arr, tuple(c for c in cs), np.asarray([self.regs[ins[4]]]))
        self.scalar_mem(latency=self.cfg.scalar_dram_latency)

    def _atomic(self, kind, arr, index, values):
        from .launcher import tile_dtype_of

        dt = tile_dtype_of(arr)
        vals = convert(values, dt)
        if kind == 1:
            if dt in ("float16", "bfloat16"):
                # read-modify-write in the tensor's dtype, one element at a time (duplicates allowed)
                for j in range(vals.size):
                    ix = tuple(int(c[j]) for c in index)
                    arr[ix] = convert(np.asarray(arr[ix]) + vals[j], dt)[()]
            else:
                np.add.at(arr, index, vals)
        elif kind == 2:
            np.maximum.at(arr, index, vals)
        elif kind == 3:
            np.minimum.at(arr, index, vals)
        else:
            self.trap("illegal_instruction", f"bad atomic kind {kind}")

    def op_br(self, ins):
        self.core.issue += 1
        return ins[8]

    def op_bz(self, ins):
        self.core.issue += 1
        if not self.regs[ins[4]]:
            return ins[8]

    def op_bnz(self, ins):
        self.core.issue += 1
        if self.regs[ins[4]]:
            return ins[8]

    def _emit_print(self, block, msg, value):
        # the reference interpreter's format: "[block (bx, by)] msg: value"
        head = f"[block {tuple(int(b) for b in block)}]"
        if msg:
            head += f" {msg}"
        text = str(value)
        sep = "\n" if "\n" in text else " "
        line = f"{head}:{sep}{text}"
        self.output.append(line)
        print(line)

    def op_print(self, ins):
        msg = self.prog.strings[ins[8]] if 0 <= ins[8] < len(self.prog.strings) else ""
        v = convert(np.asarray(self.regs[ins[4]]), self._dtype(ins[2]))[()]
        self._emit_print(self.block, msg, v)
        self.core.issue += 1

    def op_printt(self, ins):
        acc = self.desc(ins[8])
        n = int(np.prod(acc.extents)) if acc.extents else 1
        vals, _, _ = self._gather(acc, 0, n, None)
        msg = self.prog.strings[ins[3] - 1] if 0 < ins[3] <= len(self.prog.strings) else ""
        self._emit_print(self.block, msg, f"{self._space_name(acc)} =\n{vals.reshape(acc.extents)}")
        self.core.issue += 1

    def op_vprint(self, ins):
        """Print the active lanes of a vector (one line per strip-mined chunk)."""
        ext = tuple(self.desc(ins[8]).extents)
        n = self.vl
        vals = self.view(ins[4], self._dtype(ins[2]))[:n]
        if ins[5] != NO_REG:
            mask = self.view(ins[5], "bool")[:n]
            if not mask.any():
                return
            vals = vals[mask]
        elif n == int(np.prod(ext)):
            vals = vals.reshape(ext)
        msg = self.prog.strings[ins[3] - 1] if 0 < ins[3] <= len(self.prog.strings) else ""
        self._emit_print(self.block, msg, vals.copy())
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency)

    def op_setvl(self, ins):
        self.vl = int(self.regs[ins[4]])
        self.vstart = int(self.regs[ins[5]])
        if self.vl > self.cfg.vector_chunk or self.vl < 0:
            self.trap(
                "illegal_instruction", f"vector length {self.vl} exceeds the {self.cfg.vector_chunk}-element slots"
            )
        self.core.issue += 1

    # ------------------------------------------------------------------ vector engine

    def _vcycles(self, n):
        return max(1, -(-n // self.cfg.vector_lanes))

    def _operand(self, flags, bit, reg, dtype, n):
        if flags & bit:
            return np.asarray(self.regs[reg]), None
        return self.view(reg, dtype)[:n], self._slot_range(reg, n, dtype)

    def op_viota(self, ins):
        ext = self.desc(ins[8])
        n = self.vl
        idx = self._unravel(tuple(ext.extents), self.vstart, n)
        if ins[1] >= len(idx):
            self.trap("illegal_instruction", f"viota of dimension {ins[1]} in a {len(idx)}-d space")
        w = self._slot_range(ins[4], n, "int32")
        self.check_hazards(writes=[w])
        self.view(ins[4], "int32")[:n] = idx[ins[1]]
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency, writes=[w])

    def op_vbin(self, ins):
        if ins[1] >= len(isa.BINOPS):
            self.trap("illegal_instruction", f"bad ALU operation {ins[1]}")
        dt = self._dtype(ins[2])
        n = self.vl
        a, ra = self._operand(ins[3], 1, ins[5], dt if isa.BINOPS[ins[1]] not in ("and", "or") else "bool", n)
        b, rb = self._operand(ins[3], 2, ins[6], dt if isa.BINOPS[ins[1]] not in ("and", "or") else "bool", n)
        out = binop(ins[1], a, b, dt)
        odt = "bool" if out.dtype == np.bool_ and dt != "bool" else dt
        w = self._slot_range(ins[4], n, odt)
        reads = [r for r in (ra, rb) if r]
        self.check_hazards(reads=reads, writes=[w])
        self.view(ins[4], odt)[:n] = np.broadcast_to(out, (n,))
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency, reads, [w])

    def op_vun(self, ins):
        if ins[1] >= len(isa.UNOPS):
            self.trap("illegal_instruction", f"bad unary operation {ins[1]}")
        dt = self._dtype(ins[2])
        n = self.vl
        src_dt = "bool" if isa.UNOPS[ins[1]] == "not" else dt
        a, ra = self._operand(ins[3], 1, ins[5], src_dt, n)
        out = unop(ins[1], a, dt)
        odt = "bool" if isa.UNOPS[ins[1]] == "not" else dt
        w = self._slot_range(ins[4], n, odt)
        reads = [ra] if ra else []
        self.check_hazards(reads=reads, writes=[w])
        self.view(ins[4], odt)[:n] = np.broadcast_to(out, (n,))
        transcendental = isa.UNOPS[ins[1]] in isa.TRANSCENDENTAL
        self.engine("vector", self._vcycles(n) * (4 if transcendental else 1), self.cfg.vector_latency, reads, [w])

    def op_vcvt(self, ins):
        dt, sdt = self._dtype(ins[2]), self._dtype(ins[3])
        n = self.vl
        a = self.view(ins[5], sdt)[:n]
        ra = self._slot_range(ins[5], n, sdt)
        w = self._slot_range(ins[4], n, dt)
        self.check_hazards(reads=[ra], writes=[w])
        self.view(ins[4], dt)[:n] = convert(a, dt)
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency, [ra], [w])

    def op_vsel(self, ins):
        dt = self._dtype(ins[2])
        n = self.vl
        c, rc = self._operand(ins[3], 1, ins[5], "bool", n)
        a, ra = self._operand(ins[3], 2, ins[6], dt, n)
        b, rb = self._operand(ins[3], 4, ins[7], dt, n)
        out = np.where(convert(c, "bool"), convert(a, dt), convert(b, dt))
        w = self._slot_range(ins[4], n, dt)
        reads = [r for r in (rc, ra, rb) if r]
        self.check_hazards(reads=reads, writes=[w])
        self.view(ins[4], dt)[:n] = np.broadcast_to(out, (n,))
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency, reads, [w])

    def _gather(self, acc: Access, e0, n, mask):
        """Values of `acc` at elements e0..e0+n (masked-off lanes read 0) and the bytes read."""
        shape = self._space_shape(acc)
        self._check_rank(acc, shape)
        cs = self.coords(acc, e0, n)
        ok = self._in_bounds(acc, cs, shape, mask)
        if acc.space == SPACE_SEG:
            seg = self._seg(acc.space_id)
            flat = self._flat(cs, shape)
            if mask is not None:
                flat = np.where(mask & ok, flat, 0)
            vals = self.view(acc.space_id)[flat]
            rng = self._range(acc.space_id, flat)
            self.check_hazards(reads=[rng])
            self._last_bank_factor = self._bank_factor(seg, flat)
            return (vals if mask is None else np.where(mask, vals, np.zeros((), vals.dtype))), [rng], seg.dtype
        arr = self.args[acc.space_id]
        self.check_hazards(dram_reads=[acc.space_id])
        act = ok if mask is None else (ok & mask)
        index = tuple(np.where(act, c, 0) for c in cs) if cs else ()
        vals = arr[index] if cs else np.asarray([arr[()]])
        from .launcher import tile_dtype_of

        return np.where(act, vals, np.zeros((), vals.dtype)), [], tile_dtype_of(arr)

    def _is_gather(self, acc):
        return any(slot != NO_REG for _, slot, _ in acc.dims)

    def _bank_factor(self, seg, flat):
        """Bank conflicts of one 64-lane beat: the most distinct lines any one bank must deliver."""
        if flat.size == 0:
            return 1
        lb, nb = self.cfg.bank_line_bytes, self.cfg.scratchpad_banks
        lines = np.unique((seg.base + flat[: self.cfg.vector_lanes] * dtype_size(seg.dtype)) // lb)
        return int(np.bincount(lines % nb, minlength=nb).max()) if lines.size else 1

    def _vaccess_cycles(self, acc, n):
        """Cycles of a vector load/store: 64 lanes per beat, slowed by bank conflicts or gathers."""
        if acc.space == SPACE_PARAM:
            return self._vcycles(n) + self.cfg.scalar_dram_latency + n // self.cfg.gather_elems_per_cycle
        factor = getattr(self, "_last_bank_factor", 1)
        cycles = self._vcycles(n) * max(factor, 1)
        if self._is_gather(acc):
            cycles = max(cycles, -(-n // self.cfg.gather_elems_per_cycle))
        return cycles

    def op_vld(self, ins):
        acc = self.desc(ins[8])
        n = self.vl
        mask = self.view(ins[5], "bool")[:n].copy() if ins[5] != NO_REG else None
        vals, reads, dt = self._gather(acc, self.vstart, n, mask)
        w = self._slot_range(ins[4], n, dt)
        if mask is not None:
            reads.append(self._slot_range(ins[5], n, "bool"))
        self.check_hazards(writes=[w])
        self.view(ins[4], dt)[:n] = vals
        self.engine("vector", self._vaccess_cycles(acc, n), self.cfg.vector_latency, reads, [w])

    def _scatter(self, acc, e0, n, vals, mask, kind=0):
        shape = self._space_shape(acc)
        self._check_rank(acc, shape)
        cs = self.coords(acc, e0, n)
        self._in_bounds(acc, cs, shape, mask)
        if acc.space == SPACE_SEG:
            seg = self._seg(acc.space_id)
            if kind:
                self.trap("illegal_instruction", "atomics act on DRAM tensors only")
            flat = self._flat(cs, shape)
            if mask is not None:
                flat, vals = flat[mask], vals[mask]
            rng = self._range(acc.space_id, flat)
            self.check_hazards(writes=[rng])
            self._last_bank_factor = self._bank_factor(seg, flat)
            self.view(acc.space_id)[flat] = convert(vals, seg.dtype)
            return [rng]
        arr = self.args[acc.space_id]
        self.check_hazards(dram_writes=[acc.space_id])
        if mask is not None:
            cs = [c[mask] for c in cs]
            vals = vals[mask]
        from .launcher import tile_dtype_of

        if kind:
            self._atomic(kind, arr, tuple(cs), vals)
        elif cs:
            arr[tuple(cs)] = convert(vals, tile_dtype_of(arr))
        elif vals.size:
            arr[()] = convert(vals[-1:], tile_dtype_of(arr))[0]
        return []

    def op_vst(self, ins):
        acc = self.desc(ins[8])
        n = self.vl
        dt = self._dtype(ins[2])
        vals = self.view(ins[4], dt)[:n]
        reads = [self._slot_range(ins[4], n, dt)]
        mask = None
        if ins[5] != NO_REG:
            mask = self.view(ins[5], "bool")[:n]
            reads.append(self._slot_range(ins[5], n, "bool"))
        self.check_hazards(reads=reads)
        writes = self._scatter(acc, self.vstart, n, vals.copy(), mask)
        self.engine("vector", self._vaccess_cycles(acc, n), self.cfg.vector_latency, reads, writes)

    def op_vatom(self, ins):
        acc = self.desc(ins[8])
        if acc.space != SPACE_PARAM:
            self.trap("illegal_instruction", "atomics act on DRAM tensors only")
        n = self.vl
        dt = self._dtype(ins[2])
        vals = self.view(ins[4], dt)[:n].copy()
        mask = self.view(ins[5], "bool")[:n] if ins[5] != NO_REG else None
        self._scatter(acc, self.vstart, n, vals, mask, kind=ins[1] or 1)
        self.engine("vector", self._vaccess_cycles(acc, n) + n, self.cfg.vector_latency)

    def _transfer(self, ins, dma):
        tr = self.desc(ins[8])
        if not isinstance(tr, isa.Transfer):
            self.trap("illegal_instruction", f"descriptor d{ins[8]} is not a transfer")
        dst = self.desc(tr.dst)
        n = int(np.prod(dst.extents)) if dst.extents else 1
        if tr.src >= 0:
            src = self.desc(tr.src)
            if tuple(src.extents) != tuple(dst.extents):
                self.trap(
                    "illegal_instruction",
                    f"transfer d{ins[8]}: source and destination iterate {list(src.extents)} vs {list(dst.extents)}",
                )
        return tr, dst, n

    def op_vtile(self, ins):
        tr, dst, n = self._transfer(ins, dma=False)
        if tr.src >= 0:
            src = self.desc(tr.src)
            vals, reads, _ = self._gather(src, 0, n, None)
        else:
            vals, reads = np.asarray(self.regs[ins[4]]).reshape(1).repeat(n), []
        writes = self._scatter(dst, 0, n, vals, None)
        self.engine("vector", self._vcycles(n), self.cfg.vector_latency, reads, writes)

    def op_vred(self, ins):
        d = self.desc(ins[8])
        if not isinstance(d, isa.Reduction):
            self.trap("illegal_instruction", f"descriptor d{ins[8]} is not a reduction")
        src, dst, rs, rd = self._red_operands(d)
        kind = isa.REDUCE_KINDS[ins[1]] if ins[1] < len(isa.REDUCE_KINDS) else None
        if kind is None:
            self.trap("illegal_instruction", f"bad reduction kind {ins[1]}")
        x = src.reshape(d.outer, d.length, d.inner)
        wide = np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.int64
        xw = x.astype(wide)
        if kind in ("abssum", "absmax"):
            xw = np.abs(xw)
        if kind in ("sum", "abssum"):
            r = xw.sum(axis=1)
        elif kind in ("max", "absmax"):
            r = xw.max(axis=1)
        else:
            r = xw.min(axis=1)
        segdt = self._seg(d.dst_seg).dtype
        if not (ins[3] & 1):  # accumulate into dst
            old = dst.reshape(d.outer, d.inner).astype(wide)
            if kind in ("sum", "abssum"):
                r = old + r
            elif kind in ("max", "absmax"):
                r = np.maximum(old, r)
            else:
                r = np.minimum(old, r)
        self.check_hazards(reads=[rs] + ([] if ins[3] & 1 else [rd]), writes=[rd])
        dst[:] = convert(r, segdt).reshape(-1)
        self.engine(
            "vector",
            self._vcycles(src.size) + 2 * int(math.log2(max(d.length, 1)) + 1),
            self.cfg.vector_latency,
            [rs],
            [rd],
        )

    def _red_operands(self, d, scan=False):
        sv = self.view(d.src_seg)
        dv = self.view(d.dst_seg)
        so, do = int(self.regs[d.src_off]), int(self.regs[d.dst_off])
        ns = d.outer * d.length * d.inner
        nd = ns if scan else d.outer * d.inner
        if so < 0 or so + ns > sv.size or do < 0 or do + nd > dv.size:
            self.trap(
                "out_of_bounds",
                f"reduction operands exceed segments {self._seg(d.src_seg).name} / {self._seg(d.dst_seg).name}",
            )
        isz_s, isz_d = sv.itemsize, dv.itemsize
        bs, bd = self._seg(d.src_seg).base, self._seg(d.dst_seg).base
        return (
            sv[so : so + ns],
            dv[do : do + nd],
            (bs + so * isz_s, bs + (so + ns) * isz_s),
            (bd + do * isz_d, bd + (do + nd) * isz_d),
        )

    def op_vscan(self, ins):
        d = self.desc(ins[8])
        if not isinstance(d, isa.Reduction):
            self.trap("illegal_instruction", f"descriptor d{ins[8]} is not a scan")
        src, dst, rs, rd = self._red_operands(d, scan=True)
        x = src.reshape(d.outer, d.length, d.inner)
        wide = np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.int64
        xw = x.astype(wide)
        if ins[3] & 1:
            r = np.flip(np.cumsum(np.flip(xw, axis=1), axis=1), axis=1)
        else:
            r = np.cumsum(xw, axis=1)
        self.check_hazards(reads=[rs], writes=[rd])
        dst[:] = convert(r, self._seg(d.dst_seg).dtype).reshape(-1)  # (src may be dst: r is a copy)
        self.engine("vector", 2 * self._vcycles(src.size) + d.length, self.cfg.vector_latency, [rs], [rd])

    # ------------------------------------------------------------------ matrix engine

    def _matrix(self, seg, off, ld, rows, cols, what):
        v = self.view(seg)
        base = int(self.regs[off])
        last = base + (rows - 1) * ld + cols - 1 if rows and cols else base
        if base < 0 or last >= v.size or cols > ld:
            self.trap(
                "out_of_bounds",
                f"matrix operand {what} ({rows}x{cols}, leading dim {ld}, offset "
                f"{base}) exceeds segment {self._seg(seg).name} of {v.size} elements",
            )
        # strided over unsigned ints of the element's size: numpy's as_strided cannot rebuild every
        # ml_dtypes dtype from its array interface (float8_e5m2's "<f1")
        raw = v.view(np.dtype(f"u{v.itemsize}"))[base:]
        m = np.lib.stride_tricks.as_strided(raw, shape=(rows, cols), strides=(ld * v.itemsize, v.itemsize))
        m = m.view(v.dtype)
        b0 = self._seg(seg).base
        return m, (b0 + base * v.itemsize, b0 + (last + 1) * v.itemsize)

    def op_mma(self, ins):
        d = self.desc(ins[8])
        if not isinstance(d, isa.MatMul):
            self.trap("illegal_instruction", f"descriptor d{ins[8]} is not a matrix operation")
        a, ra = self._matrix(d.a_seg, d.a_off, d.lda, *((d.k, d.m) if d.trans_a else (d.m, d.k)), "A")
        b, rb = self._matrix(d.b_seg, d.b_off, d.ldb, *((d.n, d.k) if d.trans_b else (d.k, d.n)), "B")
        c, rc = self._matrix(d.c_seg, d.c_off, d.ldc, d.m, d.n, "C")
        adt = self._seg(d.a_seg).dtype
        cdt = self._seg(d.c_seg).dtype
        fmt = MATRIX_FORMATS.get(adt)
        if fmt is None or cdt not in fmt[0] or self._seg(d.b_seg).dtype != adt:
            self.trap(
                "illegal_instruction", f"the matrix engine has no {adt} x {self._seg(d.b_seg).dtype} -> {cdt} format"
            )
        clear = ins[3] & 1
        self.check_hazards(reads=[ra, rb] + ([] if clear else [rc]), writes=[rc])
        wide = np.int64 if adt == "int8" else np.float64
        A = a.T if d.trans_a else a
        B = b.T if d.trans_b else b
        prod = A.astype(wide) @ B.astype(wide)
        if not clear:
            prod = prod + c.astype(wide)
        c[...] = convert(prod, cdt)
        t = self.cfg.matrix_tile
        steps = (-(-d.m // t)) * (-(-d.n // t)) * (-(-d.k // t)) * fmt[1]
        self.engine("matrix", steps, self.cfg.matrix_latency, [ra, rb] + ([] if clear else [rc]), [rc])

    # ------------------------------------------------------------------ DMA engine

    def op_dma(self, ins):
        tr, dst, n = self._transfer(ins, dma=True)
        src = self.desc(tr.src) if tr.src >= 0 else None
        spad_reads, spad_writes, dram_r, dram_w = [], [], [], []
        # source side
        if src is None:
            vals = np.asarray(self.regs[ins[5]]).reshape(1).repeat(n)
        elif src.space == SPACE_SEG:
            self._dma_align(src)
            vals, rr, _ = self._gather(src, 0, n, None)
            spad_reads += rr
        else:
            shape = self._space_shape(src)
            self._check_rank(src, shape)
            cs = self.coords(src, 0, n)
            ok = np.ones(n, dtype=bool)
            for c, s in zip(cs, shape):
                ok &= (c >= 0) & (c < s)
            self.check_hazards(dram_reads=[src.space_id])
            arr = self.args[src.space_id]
            vals = arr[tuple(np.where(ok, c, 0) for c in cs)] if cs else np.asarray([arr[()]])
            vals = np.where(ok, vals, np.zeros((), vals.dtype))  # clipped part: zero fill
            dram_r.append(src.space_id)
        # destination side
        if dst.space == SPACE_SEG:
            self._dma_align(dst)
            if ins[1]:
                self.trap("illegal_instruction", "atomic DMA needs a DRAM destination")
            writes = self._scatter(dst, 0, n, vals, None)
            spad_writes += writes
        else:
            shape = self._space_shape(dst)
            self._check_rank(dst, shape)
            cs = self.coords(dst, 0, n)
            ok = np.ones(n, dtype=bool)
            for c, s in zip(cs, shape):
                ok &= (c >= 0) & (c < s)
            self.check_hazards(dram_writes=[dst.space_id])
            self.check_hazards(reads=spad_reads)
            arr = self.args[dst.space_id]
            from .launcher import tile_dtype_of

            if cs:
                idx = tuple(c[ok] for c in cs)
                if ins[1]:
                    self._atomic(ins[1], arr, idx, vals[ok])
                else:
                    arr[idx] = convert(vals[ok], tile_dtype_of(arr))
            else:
                arr[()] = convert(vals[-1:], tile_dtype_of(arr))[0]
            dram_w.append(dst.space_id)
        # timing: every contiguous DRAM row costs whole bursts
        dram = dst if dst.space == SPACE_PARAM else src
        esize = max(self.args[dram.space_id].itemsize if dram is not None else 4, 1)
        inner = (
            dram.extents[-1]
            if dram is not None and dram.extents and dram.dims and dram.dims[-1][2] and dram.dims[-1][2][-1] == 1
            else 1
        )
        rows = max(n // max(inner, 1), 1)
        burst = self.cfg.dma_burst_bytes
        row_bytes = -(-inner * esize // burst) * burst
        occupancy = max(1, rows * row_bytes // self.cfg.dma_bytes_per_cycle)
        self.dma_bytes += n * esize
        end = self.engine("dma", occupancy, self.cfg.dma_latency, spad_reads, spad_writes)
        tok = self.next_token
        self.next_token += 1
        self.pending[tok] = _Pending(tok, self.pc, end, spad_writes, spad_reads, tuple(dram_w), tuple(dram_r))
        self.regs[ins[4]] = np.int32(tok)

    def _dma_align(self, acc):
        seg = self._seg(acc.space_id)
        align = self.cfg.dma_align_bytes
        if seg.base % align:
            self.trap(
                "misaligned_dma",
                f"DMA to/from scratchpad segment {seg.name} at {seg.base:#x}: the "
                f"DMA engine needs {align}-byte aligned scratchpad addresses",
            )
        self.view(acc.space_id)  # overflow check before touching it

    def op_wait(self, ins):
        tok = int(self.regs[ins[4]])
        p = self.pending.pop(tok, None)
        if p is not None:
            self.core.issue = max(self.core.issue, p.end)
        self.core.issue += 1
