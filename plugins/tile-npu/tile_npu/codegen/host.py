"""The contract between the code generator's mixins: the state they share and the methods one
mixin calls on another.

`driver.Codegen` is built from one mixin per concern (emitter, registers, placement, DMA
synchronization, pipelining, scalar, tile and vector code). Each mixin derives from `NpuHost`,
so every `self.x` a mixin uses is declared here with its type: the type checker checks the
mixins on their own, and checks the real definitions (in Codegen, or in the mixin that owns
the concern) against the declarations below. Codegen assigns the state in `__init__` and
`run`; the methods here are only declarations (each is defined again, earlier in Codegen's
method order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from tilecore.ir import nodes as N

if TYPE_CHECKING:
    from ..arch import NPUConfig
    from ..isa import Program
    from .dma_sync import PendingDMA
    from .vector import VectorContext


class NpuHost:
    """What every code-generator mixin may use of the Codegen it is part of."""

    func: N.PrimFunc
    cfg: NPUConfig
    source: str  # the user's file text, for diagnostics
    prog: Program
    env: Dict[str, int]  # scalar variable name -> register
    free_regs: List[int]
    params: Dict[str, int]  # parameter name -> index
    buffers: Dict[str, N.Buffer]
    bufseg: Dict[str, int]  # scratchpad buffer name -> segment id (current stage)
    stage_segs: Dict[str, List[int]]
    pending: List[PendingDMA]
    slot_free: List[int]
    slots: List[int]  # segment ids of vector slots
    vctx: Optional[VectorContext]  # the T.Parallel chunk being compiled (None outside one)
    lines: Dict[str, List[int]]
    cur_span: N.Span
    strings: Dict[str, int]
    pipelined: Dict[int, Tuple[List[int], List[str]]]
    live: Any  # tilecore.passes.liveness's analysis of the function
    _seg_buffer: Dict[int, str]  # segment id -> scratchpad buffer name

    # ------------------------------------------------------------------ tilecore.ir.visitor.Dispatcher
    def handler(self, prefix: str, node: object) -> Optional[Callable[..., Any]]:
        """The unbound handler of `node` for `prefix`, or None."""
        raise NotImplementedError

    # ------------------------------------------------------------------ driver.Codegen
    def body(self, stmts: Any) -> Any:
        """Compile a statement list."""
        raise NotImplementedError

    # ------------------------------------------------------------------ emitter.Emitter
    def emit(self, op: Any, func: Any = 0, dt: Any = "none", dt2: Any = 0, r: Any = (0, 0, 0, 0), imm: Any = 0) -> int:
        """Append one instruction; its pc."""
        raise NotImplementedError

    def desc(self, d: Any) -> int:
        """The index of descriptor `d` in the program."""
        raise NotImplementedError

    def error(self, message: Any, span: Any = None) -> Any:
        """A TileCompileError at `span` (default: the current statement)."""
        raise NotImplementedError

    def here(self) -> Any:
        """The pc of the next instruction."""
        raise NotImplementedError

    def patch(self, pc: Any, target: Any) -> Any:
        """Point the branch at `pc` to `target`."""
        raise NotImplementedError

    def string(self, text: str) -> int:
        """The index of `text` in the program's string table."""
        raise NotImplementedError

    # ------------------------------------------------------------------ registers.RegisterAllocation
    def reg(self) -> int:
        """A free scalar register."""
        raise NotImplementedError

    def release(self, *regs: Any) -> Any:
        """Return scalar registers to the free list."""
        raise NotImplementedError

    def li(self, value: int) -> int:
        """A register holding the constant `value`."""
        raise NotImplementedError

    def restore_env(self, saved: Any) -> Any:
        """Put back a saved scalar environment, freeing what was bound since."""
        raise NotImplementedError

    def slot(self) -> int:
        """A free vector slot."""
        raise NotImplementedError

    def free_slot(self, *sids: Any) -> Any:
        """Return vector slots to the free list."""
        raise NotImplementedError

    # ------------------------------------------------------------------ placement.MemoryPlacement
    def _space(self, buf: N.Buffer) -> Any:
        """The memory space of `buf`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ dma_sync.DmaSync
    def sync(self, reads: Any = (), writes: Any = ()) -> Any:
        """Wait for the DMAs that touch `reads` / `writes`."""
        raise NotImplementedError

    def sync_all(self) -> Any:
        """Wait for every pending DMA."""
        raise NotImplementedError

    def _track(self, tok: Any, reads: Any = (), writes: Any = ()) -> Any:
        """Record a pending DMA."""
        raise NotImplementedError

    def _bufs_in(self, *nodes: Any) -> List[N.Buffer]:
        """The buffers `nodes` mention."""
        raise NotImplementedError

    # ------------------------------------------------------------------ pipelining.Pipelining
    def _all_stmts(self, body: Any) -> Any:
        """Every statement of `body`, nested ones included."""
        raise NotImplementedError

    def _pipelined(self, s: Any) -> Any:
        """Compile a pipelined loop."""
        raise NotImplementedError

    # ------------------------------------------------------------------ scalar.ScalarCodegen
    def sx(self, e: Any) -> int:
        """A register holding scalar expression `e`."""
        raise NotImplementedError

    def sx_bool(self, e: Any) -> int:
        """A register holding boolean expression `e` as 0 / 1."""
        raise NotImplementedError

    def access_scalar(self, buf: N.Buffer, indices: Any) -> Any:
        """The address of element `indices` of `buf`."""
        raise NotImplementedError

    def s_Let(self, s: Any) -> Any:
        """Compile a scalar Let."""
        raise NotImplementedError

    def s_Print(self, s: N.Print) -> Any:
        """Compile a T.print."""
        raise NotImplementedError

    # ------------------------------------------------------------------ tiles.TileOps
    def _copy(self, s: N.Copy, token: Optional[int] = None) -> Any:
        """Compile a tile copy (a DMA, or a vector copy)."""
        raise NotImplementedError
