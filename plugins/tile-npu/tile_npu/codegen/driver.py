"""The NPU code generator: one PrimFunc -> one Program (grid program, then kernel program)."""

from __future__ import annotations

from typing import Dict, List, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.visitor import Dispatcher

from .. import isa
from ..arch import DEFAULT_CONFIG, NPUConfig
from ..isa import Program
from .dma_sync import DmaSync, PendingDMA
from .emitter import Emitter
from .pipelining import Pipelining
from .placement import MemoryPlacement
from .registers import ZERO, RegisterAllocation, all_free_registers
from .scalar import ScalarCodegen
from .tiles import TileOps
from .vector import VectorCodegen

_RULE_OPS = (
    "Alloc",
    "Hint",
    "Kernel",
    "Let",
    "Store",
    "If",
    "For",
    "While",
    "Copy",
    "Fill",
    "Gemm",
    "Reduce",
    "Cumsum",
    "Atomic",
    "Print",
    "Parallel",
)


class Codegen(
    Dispatcher, Emitter, RegisterAllocation, MemoryPlacement, DmaSync, Pipelining, ScalarCodegen, TileOps, VectorCodegen
):
    """Compiles one PrimFunc; `run()` returns the Program.

    Each concern lives in its own mixin module (see the package docstring); this
    class owns the shared state and the statement dispatch.
    """

    def __init__(self, func: N.PrimFunc, analyses=None, config: NPUConfig = DEFAULT_CONFIG, rules=None):
        self.func = func
        self.rules = dict(default_rules())
        self.rules.update(rules or {})
        self.cfg = config
        self.analyses = analyses or {}
        self.source = func.source or ""
        self.prog = Program(ncores=config.cores)
        self.env: Dict[str, int] = {}  # scalar variable name -> register
        self.free_regs = all_free_registers()
        self.params = {p.name: i for i, p in enumerate(func.params)}
        self.buffers: Dict[str, N.Buffer] = {p.name: p for p in func.params}
        self.bufseg: Dict[str, int] = {}  # scratchpad buffer name -> segment id (current stage)
        self.stage_segs: Dict[str, List[int]] = {}
        self.pending: List[PendingDMA] = []
        self.slot_free: List[int] = []
        self.slots: List[int] = []  # segment ids of vector slots
        self.vctx = None
        self.lines: Dict[str, List[int]] = {}
        self.cur_span: N.Span = func.span
        self.strings: Dict[str, int] = {}
        self.pipelined: Dict[int, Tuple[List[int], List[str]]] = {}

    def run(self) -> Program:
        """The whole Program: segments planned, grid and kernel code emitted, segments placed."""
        func = self.func
        kernel = func.kernel
        self.cur_span = kernel.span
        self.prog.params = [isa.Param(p.name, p.dtype, p.ndim) for p in func.params]
        from tilecore.passes import liveness as _liveness

        self.live = self.analyses.get("liveness") or _liveness.analyze(func)
        self._plan_pipelines(kernel.body)
        self._make_segments(kernel.body)
        self._seg_buffer = {sid: name for name, sids in self.stage_segs.items() for sid in sids}
        self._grid_program()
        self.env.clear()
        self.free_regs = all_free_registers()
        self._kernel_program()
        self._place_segments()
        self.prog.debug = {
            "file": func.span.file if func.span.line else "<kernel>",
            "lines": self.lines,
            "source": self.source,
            "function": func.name,
            "dyn_vars": [v.name for v in func.dyn_vars],
        }
        return self.prog

    def _grid_program(self):
        """The code run once per launch: grid dims into r0..r(rank-1)."""
        kernel = self.func.kernel
        self.prog.grid_pc = self.here()
        self.prog.grid_rank = max(len(kernel.grid), 1)
        self._bind_dyn()
        self._outer_stmts(self.func)
        vals = [self.sx(g) for g in kernel.grid] or [self.li(1)]
        for i, r in enumerate(vals):
            self.emit("mov", r=(i, r))
        self.emit("halt")

    def _kernel_program(self):
        """The code run once per block, with the block indices in registers."""
        kernel = self.func.kernel
        self.prog.kernel_pc = self.here()
        self.emit("li", r=(ZERO,), imm=0)
        self._bind_dyn()
        self._outer_stmts(self.func)
        for k, v in enumerate(kernel.block_vars):
            r = self.reg()
            self.emit("spr", func=0, r=(r,), imm=k)
            self.env[v.name] = r
        self.body(kernel.body)
        self.sync_all()
        self.emit("halt")

    def _outer_stmts(self, func):
        """Scalar `let`s written before the T.Kernel (evaluated by both the grid and the kernel code)."""
        for st in func.body:
            if isinstance(st, N.Kernel):
                break
            if isinstance(st, N.Let):
                self.s_Let(st)
            elif not isinstance(st, N.Hint):
                raise self.error(f"{type(st).__name__} outside T.Kernel is not supported on npu", st.span)
        after = func.body[func.body.index(func.kernel) + 1 :]
        for st in after:
            if not isinstance(st, N.Hint):
                raise self.error(f"{type(st).__name__} after T.Kernel is not supported on npu", st.span)

    def _bind_dyn(self):
        """Dynamic shape variables into registers (special register bank 2)."""
        for k, v in enumerate(self.func.dyn_vars):
            r = self.reg()
            self.emit("spr", func=2, r=(r,), imm=k)
            self.env[v.name] = r

    def body(self, stmts):
        """Compile a statement list in order."""
        for s in stmts:
            self.stmt(s)

    def stmt(self, s):
        """Compile one statement: its rule outside T.Parallel, its `v_` handler inside one."""
        saved = self.cur_span
        if s.span.line:
            self.cur_span = s.span
        try:
            method = self.rules.get(type(s).__name__)
            if method is None:
                raise self.error(f"the npu backend cannot compile {type(s).__name__}")
            if self.vctx is not None:
                vmethod = self.handler("v_", s)
                if vmethod is None:
                    raise self.error(f"{type(s).__name__} inside T.Parallel is not supported on npu")
                vmethod(self, s)
            else:
                method(self, s)
        finally:
            self.cur_span = saved


def default_rules():
    """Statement class name -> rule(codegen, stmt): how each op lowers outside T.Parallel.

    Exposed through the `tilecore_lowering_rules` hook: a third-party plugin can
    replace one (e.g. rules["Gemm"] = my_gemm) and the codegen uses it.
    """
    return {name: getattr(Codegen, "s_" + name) for name in _RULE_OPS}


def compile_func(func: N.PrimFunc, analyses=None, config: NPUConfig = DEFAULT_CONFIG) -> Program:
    """Compile a PrimFunc (after the core passes) to an NPU Program."""
    return Codegen(func, analyses, config).run()
