"""Tile IR -> NPU program: the NPU code generator, one module per concern.

Modules: `driver` (the Codegen class, statement dispatch, grid/kernel programs),
`emitter` (instructions, descriptors, branch patching), `registers` (scalar
registers and vector slots), `placement` (scratchpad segments), `dma_sync`
(pending DMAs and their waits), `pipelining` (T.Pipelined), `scalar` (uniform
expressions and statements), `tiles` (copy/fill/gemm/reduce/atomic), `vector`
(T.Parallel). Each concern is a mixin of Codegen deriving from `host.NpuHost`, which
declares the state they share and the methods one calls on another.

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

from .driver import Codegen, compile_func, default_rules

__all__ = ["Codegen", "compile_func", "default_rules"]
