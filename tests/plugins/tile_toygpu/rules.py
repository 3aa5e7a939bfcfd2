"""toygpu's lowering rule and intrinsic (imports TVM: used by codegen only)."""

from __future__ import annotations

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from tilecore.ir import nodes as N
from tilecore.lowering.simt_plan import whole_region
from tilecore.lowering.tir_expr import cast_to, tir_const
from tilecore.plugin.rules import LoweringRule


class OuterProductGemm(LoweringRule):
    """C += A B as K rank-1 updates of a float32 register accumulator: each thread keeps its
    elements of C in registers for the whole K loop (the portable gemm keeps K innermost)."""

    name = "toy_outer_product"

    def __call__(self, lowering, g: N.Gemm):
        c = g.c.buffer
        if (
            lowering.plan.storage.get(c.name) != "reg"
            or c.dtype != "float32"
            or not whole_region(g.c)
            or len(c.shape) != 2
        ):
            return NotImplemented
        lay = lowering.plan.layout[c.name]
        K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
        if g.clear_accum:
            lowering.iterate_layout(lay, lambda idx: lowering.store(c, idx, tir_const(0, "float32")))
        with B.serial(0, K) as k:

            def update(idx):
                i, j = idx
                a = lowering.element(g.a.buffer, lowering.region_index(g.a, [k, i] if g.transpose_a else [i, k]))
                b = lowering.element(g.b.buffer, lowering.region_index(g.b, [j, k] if g.transpose_b else [k, j]))
                acc = lowering.element(c, idx)
                lowering.store(c, idx, acc + cast_to(a, "float32") * cast_to(b, "float32"))

            lowering.iterate_layout(lay, update)
        lowering.plan.notes.append(f"toygpu: T.gemm into {c.name} as {K} outer products")
        return None


def toy_tanh(args):
    """tanh(x) = 1 - 2 / (exp(2x) + 1), with the odd Taylor polynomial near 0 (no cancellation)."""
    x = args[0]
    one, two = tx.const(1.0, "float32"), tx.const(2.0, "float32")
    x2 = x * x
    small = x * (one + x2 * (tx.const(-1.0 / 3.0, "float32") + x2 * tx.const(2.0 / 15.0, "float32")))
    big = one - two / (tx.exp(two * x) + one)
    return tx.Select(tx.abs(x) < tx.const(0.0625, "float32"), small, big)
