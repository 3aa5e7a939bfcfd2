"""The contract between the SIMT lowering's mixins: the state they share and the methods one
mixin calls on another.

`simt.SimtLowering` is built from one mixin per concern (`simt_memory`, `simt_barriers`,
`simt_threads`, `simt_tileops`, `simt_reduce`). Each mixin derives from `SimtHost`, so every
`self.x` a mixin uses is declared here with its type: the type checker checks the mixins on
their own, and checks the real definitions (in SimtLowering, or in the mixin that owns the
concern) against the declarations below. SimtLowering assigns the state in `__init__` and
`emit_Kernel`; the methods here are only declarations (every one is defined again, earlier in
SimtLowering's method order).

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Set

from ..ir import nodes as N

if TYPE_CHECKING:
    from ..diagnostics import UnsupportedFeatureError
    from .simt_plan import KernelPlan
    from .simt_threads import _Ctx
    from .target import TargetDescription
    from .tir_expr import ExprLowerer


class SimtHost:
    """What every SIMT mixin may use of the lowering it is part of (see the module docstring)."""

    func: N.PrimFunc
    target: TargetDescription
    plan: KernelPlan
    kernel: N.Kernel
    threads: int  # threads per block
    source: str  # the user's file text, for diagnostics
    options: Dict[str, Any]
    intrinsics: Dict[Any, Callable[..., Any]]  # (name, dtype) -> implementation, bound to this lowering
    ex: ExprLowerer
    views: Dict[str, Any]  # buffer name -> tirx Buffer (global, shared view, register array)
    stage: Dict[str, Any]  # shared buffer name -> its current pipeline stage (a PrimExpr)
    ctx: _Ctx  # the current thread iteration of a T.Parallel
    pending_r: Set[str]  # shared buffers read since the last barrier
    pending_w: Set[str]  # shared buffers written since the last barrier
    t: Any  # threadIdx.x (a TIR variable), bound by emit_Kernel
    in_parallel: bool  # inside a T.Parallel body
    smem_bytes: int
    scratch_count: int
    lib_used: bool
    scratch: Any  # the cross-warp reduction partials (a tirx Buffer), when the kernel reduces
    scratch_off: Optional[int]  # its byte offset in the shared pool (None: the kernel does not reduce)

    # ------------------------------------------------------------------ simt.SimtLowering
    def lower(self, e: N.Expr) -> Any:
        """A Tile IR expression as a PrimExpr in the current thread iteration."""
        raise NotImplementedError

    def sync(self) -> None:
        """A block-wide barrier."""
        raise NotImplementedError

    def instruction(self, name: str, dtype: Optional[str] = None, *args: Any) -> Any:
        """Apply a device instruction of the intrinsic table to `args`."""
        raise NotImplementedError

    def shuffle_xor(self, value: Any, mask: Any) -> Any:
        """`value` of lane (lane ^ mask) within the warp."""
        raise NotImplementedError

    def unsupported(self, feature: str, node: Any = None) -> UnsupportedFeatureError:
        """An UnsupportedFeatureError naming this backend, at `node`'s line."""
        raise NotImplementedError

    # ------------------------------------------------------------------ simt_memory.SimtMemory
    def access(self, buf: N.Buffer, indices: Sequence[Any]) -> Any:
        """(tirx Buffer, [flat or nd index]) for element `indices` of `buf`."""
        raise NotImplementedError

    def store(self, buf: N.Buffer, indices: Sequence[Any], value: Any, bits: bool = False) -> None:
        """Store `value` at element `indices` of `buf` (`bits`: a value in `buf`'s storage)."""
        raise NotImplementedError

    def value_of(self, buf: N.Buffer, stored: Any) -> Any:
        """An element of `buf` read from its storage as a value (fp8 decoded)."""
        raise NotImplementedError

    def element(self, buf: N.Buffer, indices: Sequence[Any]) -> Any:
        """The BufferLoad of element `indices` of `buf` in its storage."""
        raise NotImplementedError

    # ------------------------------------------------------------------ simt_threads.SimtThreads
    def iterate_layout(self, lay: Any, body: Callable[[List[Any]], Any], vectorize: bool = False) -> None:
        """Run `body(index_exprs)` for every element of a register layout this thread owns."""
        raise NotImplementedError

    def iterate_linear(self, shape: Sequence[int], vec: int, body: Callable[[List[Any]], Any]) -> None:
        """Spread an index space over the threads."""
        raise NotImplementedError

    def region_index(self, r: N.Region, it_idx: Sequence[Any]) -> List[Any]:
        """Full buffer indices of region `r` for squeezed iteration indices `it_idx`."""
        raise NotImplementedError

    def matrix_index(self, r: N.Region, row_col: Sequence[Any]) -> List[Any]:
        """Full buffer indices of T.gemm operand `r` for (row, column)."""
        raise NotImplementedError

    def in_bounds(self, r: N.Region, full_idx: Sequence[Any], vec: int = 1) -> Any:
        """Whether buffer indices `full_idx` of region `r` lie inside its buffer (a PrimExpr)."""
        raise NotImplementedError

    def clamp(self, r: N.Region, full_idx: Sequence[Any]) -> List[Any]:
        """`full_idx` clamped into the buffer of region `r`."""
        raise NotImplementedError
