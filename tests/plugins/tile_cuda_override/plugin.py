"""Overrides how `T.fill` / `T.clear` of a float32 register fragment lowers on "cuda".

The rule is added for the op "Fill" with a priority above the vendor's, so it is tried
first; it declines every other fill (the toolkit's portable fill takes those). The
fill becomes one call to this plugin's own device helper, which TVM emits with the
call. Nothing else of the cuda backend changes.
"""

from __future__ import annotations

from tilecore.plugin import hookimpl
from tilecore.plugin.rules import LoweringRule

HELPER = r"""
#ifndef TILE_CUDA_OVERRIDE_FILL
#define TILE_CUDA_OVERRIDE_FILL
template <int N> __device__ __forceinline__ void override_fill(float* frag, float v) {
#pragma unroll
  for (int i = 0; i < N; ++i) frag[i] = v;
}
#endif
"""


class HelperFill(LoweringRule):
    """Fill a whole float32 register fragment with a value through `override_fill<N>`."""

    name = "override_fill"

    def __call__(self, lowering, f):
        from tilecore.lowering.simt_plan import whole_region

        buf = f.dst.buffer
        if lowering.plan.storage.get(buf.name) != "reg" or buf.dtype != "float32" or not whole_region(f.dst):
            return NotImplemented
        from tvm import tirx as tx
        from tvm.backend.cuda import op as cop
        from tvm.tirx.script.builder import ir as B

        from tilecore.lowering.tir_expr import cast_to, tir_const

        n = lowering.plan.layout[buf.name].local_size
        first = tx.address_of(tx.BufferLoad(lowering.views[buf.name], [tir_const(0, "int32")]))
        B.evaluate(
            cop.cuda_func_call(
                f"override_fill<{n}>",
                first,
                cast_to(lowering.lower(f.value), "float32"),
                source_code=HELPER,
                return_type="void",
            )
        )
        return None


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """Put `HelperFill` in front of cuda's Fill rules."""
    if backend.name == "cuda":
        rules.add("Fill", HelperFill(), priority=10)
