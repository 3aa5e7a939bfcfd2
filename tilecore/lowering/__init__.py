"""The lowering toolkit that TVM-based backends build on (cpu, cuda, rocm, metal, third parties).

Target-neutral: it names no vendor's instruction, intrinsic, type spelling or toolchain.
Importing this package does not import TVM; most of its modules do, so import them
only inside a backend's codegen.

* `tir_expr`, `intrinsics`: Tile IR expressions -> TIR, math tables.
* `tir_stmt`: loop nests, predicated copies, reductions, scans (the cpu backend).
* `target` (pure Python): the `TargetDescription` a GPU plugin fills in.
* the SIMT GPU lowering: `simt` (the dispatch, kernel binding, control flow), with one
  module per concern: `simt_memory` (allocation, element access), `simt_barriers`,
  `simt_threads` (thread mapping), `simt_tileops` and `simt_reduce` (portable tile ops),
  `simt_intrinsics` (portable device instructions), `simt_pipeline` (async-copy pipeline
  skeleton), and the pure-Python plan `simt_plan`, `simt_layout`, `simt_copy`. Each tile
  op is lowered by the plugins' rules for it (`tilecore.plugin.rules.RuleTable`, filled
  by `tilecore_lowering_rules`) and then the portable lowering; device instructions come
  from the intrinsic table (`tilecore_intrinsics`).
* `launch_grid` (pure Python): launch grids as Python source for GPU launchers.
"""
