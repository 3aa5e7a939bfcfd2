"""The target description: what the SIMT lowering toolkit needs to know about a GPU.

A backend plugin builds one `TargetDescription` per compile and hands it to
`tilecore.lowering.simt.lower_kernel` together with its rule and intrinsic tables.
It holds facts, never vendor decisions: which instruction a tile op becomes is a
rule's business (`tilecore_lowering_rules`); `properties` carries whatever the
plugin's own rules want to read (an architecture number, a fast-math switch).

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class TargetDescription:
    """One GPU target as the SIMT toolkit sees it.

    :param name: the backend's name ("cuda", "rocm", "metal", ...), used in messages.
    :param arch: the architecture variant ("sm_90a", "gfx942", "apple").
    :param tvm_target: the TVM target dict the plugin compiles with.
    :param warp_size: threads that execute in lock step and exchange values by shuffles.
    :param max_shared_memory: bytes of shared (LDS / threadgroup) memory per block.
    :param shared_scope: TVM storage scope of shared tiles ("shared.dyn" or "shared").
    :param shared_pool: True: all shared tiles are typed views of one byte pool (dynamic
        shared memory, sizes above 48 KB); False: one static allocation per tile (codegens
        that mishandle views of a pool).
    :param shared_alignment: byte alignment of each tile within the pool.
    :param max_vector_lanes: widest vector (in elements) the codegen can express.
    :param max_vector_element_bytes: widest element that may be vectorized.
    :param register_vector_lanes: cap on contiguous elements per thread in register
        fragments (0: no cap beyond 16 bytes).
    :param bool_storage: dtype that holds a bool tile ("bool" or "int8").
    :param bool_vectors: whether the codegen has bool vectors.
    :param device_library: helper source that every helper call carries (empty if none).
    :param gemm_block_panel: for a kernel with a `T.gemm`, a grid of exactly 2 dimensions and no
        `T.use_swizzle`, visit blocks in panels of this many block rows, as `T.use_swizzle(panel)`
        does, so that blocks running together share operand tiles in the L2 cache (0: launch
        order). `T.use_swizzle(enable=False)` keeps the launch order.
    :param heavy_first_group_blocks: a kernel whose main-loop trip count grows with one block index
        (causal attention's query blocks) runs that index backwards, the longest blocks first
        (`block_order`); with N > 0 the index is also the slowest one within groups of about N blocks
        (N // its extent tuples of the other indices), so that the grid's last wave is short blocks
        everywhere, not each (head, batch)'s longest block; a group no larger than a wave keeps the
        blocks running at once on few heads' data (L2). 0: reversed within each tuple alone.
    :param bfloat16_computed_in_float32: True when the backend's TVM pipeline legalizes bfloat16
        arithmetic (computes it in float32 and keeps no cast to bfloat16 inside an expression, only
        a rounding at each store): the toolkit then rounds every bfloat16 result itself, so that
        each operation rounds as the language defines (docs/semantics.md).
    :param int64_wrap_via: how int64 `+ - * <<` on data wrap (`tir_expr.INT64_WRAP_VIA`): "uint64"
        for codegens that emit C source, where unsigned arithmetic wraps; "int128" for LLVM
        codegens, where TVM marks unsigned arithmetic `nuw` (overflow is poison).
    :param properties: plugin-private facts for the plugin's own rules and intrinsics.
    """

    name: str
    arch: str = ""
    tvm_target: Mapping[str, Any] = field(default_factory=dict)
    warp_size: int = 32
    max_shared_memory: int = 48 * 1024
    shared_scope: str = "shared"
    shared_pool: bool = False
    shared_alignment: int = 128
    max_vector_lanes: int = 16
    max_vector_element_bytes: int = 16
    register_vector_lanes: int = 0
    bool_storage: str = "int8"
    bool_vectors: bool = True
    device_library: str = ""
    gemm_block_panel: int = 0
    heavy_first_group_blocks: int = 0
    bfloat16_computed_in_float32: bool = False
    int64_wrap_via: str = "uint64"
    properties: Mapping[str, Any] = field(default_factory=dict)

    def prop(self, key: str, default: Any = None) -> Any:
        """A plugin-private property (see `properties`)."""
        return self.properties.get(key, default)

    def label(self) -> str:
        """ "name:arch" for messages."""
        return f"{self.name}:{self.arch}" if self.arch else self.name
