"""Apple GPUs for the SIMT lowering toolkit: `T.gemm` on `simdgroup_matrix` 8x8 operations
(TVM's Metal builtins), and the MSL helpers for atomics.

Which thread holds which element of a simdgroup matrix is opaque in Metal, so an
accumulator in simdgroup registers can only be touched by simdgroup operations. The
`SimdgroupGemm` rule therefore has two forms:

* registers: when the accumulator fragment is only cleared, accumulated by gemms and
  finally copied to a global tensor (the GEMM pattern), it lives in
  `simdgroup_float8x8` matrices for the whole kernel. Simdgroups are tiled wm x wn over
  the tile; each owns TM x TN 8x8 matrices and per 8-wide K step loads TM A and TN B
  matrices from threadgroup memory and runs TM * TN `simdgroup_multiply_accumulate`.
  The copy out stores each matrix to a 64-element staging area of its simdgroup and
  writes it to the tensor element by element (dtype conversion, partial-tile guards).
  A 128x128 fp32 accumulator takes no threadgroup memory at all.
* threadgroup memory: otherwise (a T.Parallel epilogue, a reduction of the result)
  the accumulator stays in threadgroup memory (the plan's "demoted fragment"): each
  simdgroup takes 8x8 output tiles in turn, loads, multiply-accumulates over K,
  stores back.

Transposed operands use transposed loads. Other gemms (int8, tiles not multiples of
8) use the toolkit's portable gemm.

Planning is pure Python; lowering imports TVM when the rule runs.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.ir.visitor import walk, walk_stmts
from tilecore.lowering.intrinsics import contextual
from tilecore.lowering.simt_layout import SharedLayout
from tilecore.lowering.simt_plan import _stmt_exprs, demote_unreachable, whole_region
from tilecore.plugin.rules import LoweringRule

# (operand dtype, accumulator dtype) pairs on simdgroup_matrix; bfloat16 is left to the portable
# gemm because TVM 0.27 legalizes bfloat16 buffers to uint16, which simdgroup matrices refuse
SIMDGROUP_DTYPES = {("float16", "float32"), ("float16", "float16"), ("float32", "float32")}


def _eligible(g: N.Gemm, plan) -> bool:
    """Dtypes, whole 2-D operands in threadgroup memory, 8-multiples: what simdgroup matrices take."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if a.dtype != b.dtype or (a.dtype, c.dtype) not in SIMDGROUP_DTYPES:
        return False
    if not (whole_region(g.a, 2) and whole_region(g.b, 2) and whole_region(g.c, 2)):
        return False
    if plan.storage.get(a.name) != "smem" or plan.storage.get(b.name) != "smem" or c.name in (a.name, b.name):
        return False
    shape = c.static_shape()
    if shape is None:
        return False
    M, Nn = shape
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    return not (M % 8 or Nn % 8 or K % 8)


def simdgroup_grid(M: int, Nn: int, groups: int) -> Optional[Tuple[int, int]]:
    """The simdgroup grid (wm, wn) over an M x N accumulator with the squarest per-simdgroup
    block of whole 8x8 matrices, or None."""
    options = [
        (wm, groups // wm)
        for wm in range(1, groups + 1)
        if groups % wm == 0 and M % (8 * wm) == 0 and Nn % (8 * (groups // wm)) == 0
    ]
    if not options:
        return None
    return min(options, key=lambda o: (abs(M // o[0] - Nn // o[1]), -o[0]))


def _touches(s: N.Stmt, name: str) -> bool:
    """Whether statement `s` (not its nested statements) reads or writes buffer `name`."""
    regions = {N.Copy: ("src", "dst"), N.Fill: ("dst",), N.Gemm: ("a", "b", "c")}.get(type(s), ())
    if any(getattr(s, f).buffer.name == name for f in regions):
        return True
    if isinstance(s, (N.Reduce, N.Cumsum)) and name in (s.src.name, s.dst.name):
        return True
    if isinstance(s, N.Atomic) and (
        s.dst.buffer.name == name or isinstance(s.value, N.Region) and s.value.buffer.name == name
    ):
        return True
    if isinstance(s, N.Store) and s.buffer.name == name:
        return True
    if isinstance(s, N.Print) and isinstance(s.value, N.Buffer) and s.value.name == name:
        return True
    return any(isinstance(n, N.Load) and n.buffer.name == name for e in _stmt_exprs(s) for n in walk(e))


def register_uses(kernel: N.Kernel, c: N.Buffer, plan):
    """{id(stmt): ("gemm" | "fill" | "store", stmt)} when every statement touching accumulator `c`
    is an eligible gemm into it, a fill of all of it, or a copy of all of it to a 2-D global
    tensor region of its shape; else None."""
    uses: Dict[int, Tuple[str, N.Stmt]] = {}
    for s in walk_stmts(kernel.body):
        if isinstance(s, N.Alloc) or not _touches(s, c.name):
            continue
        if isinstance(s, N.Gemm) and s.c.buffer.name == c.name and _eligible(s, plan):
            uses[id(s)] = ("gemm", s)
        elif isinstance(s, N.Fill) and whole_region(s.dst):
            uses[id(s)] = ("fill", s)
        elif (
            isinstance(s, N.Copy)
            and s.src.buffer.name == c.name
            and whole_region(s.src)
            and plan.storage.get(s.dst.buffer.name) == "global"
            and len(s.dst.buffer.shape) == 2
            and tuple(s.dst.extents) == tuple(c.shape)
        ):
            uses[id(s)] = ("store", s)
        else:
            return None
    return uses


class SimdgroupGemm(LoweringRule):
    """`T.gemm` on simdgroup matrices (see the module docstring); registered for "Gemm", "Fill"
    and "Copy" (the last two only for the accumulators it holds in registers)."""

    name = "simdgroup_matrix"

    def plan(self, ctx) -> None:
        """Claim the eligible gemms: accumulators in simdgroup registers where every use allows
        it, in threadgroup memory otherwise."""
        plan = ctx.plan
        if ctx.threads % ctx.target.warp_size:
            return
        claims = plan.claimed(self.name)
        demoted = False
        for g in ctx.stmts(N.Gemm):
            if id(g) in claims or not _eligible(g, plan):
                continue
            c = g.c.buffer
            if plan.storage.get(c.name) == "reg" and self.keep_in_registers(ctx, c):
                continue
            if plan.storage.get(c.name) == "reg":
                plan.storage[c.name] = "smem"
                plan.layout[c.name] = SharedLayout(tuple(c.shape), itemsize(c.dtype))
                plan.demoted.add(c.name)
                demoted = True
            if plan.storage.get(c.name) == "smem":
                claims[id(g)] = ("threadgroup", None)
        if demoted:
            demote_unreachable(plan, ctx.kernel)
        if claims:
            where = sorted({kind for kind, _ in claims.values() if kind in ("registers", "threadgroup")})
            plan.notes.append(
                "T.gemm on simdgroup_matrix 8x8 (accumulators in "
                + " and ".join("simdgroup registers" if w == "registers" else "threadgroup memory" for w in where)
                + ")"
            )

    def keep_in_registers(self, ctx, c: N.Buffer) -> bool:
        """Hold accumulator `c` in simdgroup matrices when its uses and shape allow; claim its
        statements and give the plan a 64-element staging tile per simdgroup for the copy out."""
        plan = ctx.plan
        shape = c.static_shape()
        grid = simdgroup_grid(shape[0], shape[1], ctx.threads // ctx.target.warp_size) if shape else None
        uses = register_uses(ctx.kernel, c, plan) if grid else None
        if not uses:
            return False
        claims = plan.claimed(self.name)
        for key, (kind, _stmt) in uses.items():
            claims[key] = ("registers" if kind == "gemm" else kind, grid)
        plan.give_to(c.name, self)
        if any(kind == "store" for kind, _ in uses.values()):
            stage = N.Buffer(f"{c.name}_stage", (ctx.threads // ctx.target.warp_size * 64,), c.dtype, "shared")
            plan.buffers[stage.name] = stage
            plan.storage[stage.name] = "smem"
            plan.layout[stage.name] = SharedLayout(stage.static_dims(), itemsize(c.dtype))
        return True

    def allocate(self, lowering, buf: N.Buffer) -> None:
        """The simdgroup matrices of accumulator `buf`: TM x TN per simdgroup."""
        from tvm.script.ir_builder import IRBuilder
        from tvm.tirx.script.builder import ir as B

        tm, tn = _tiles(lowering, buf)
        mats = B.alloc_buffer((64 * tm * tn,), buf.dtype, scope="metal.simdgroup")
        IRBuilder.name(buf.name, mats)
        lowering.views[buf.name] = mats

    def __call__(self, lowering, stmt):
        claim = lowering.claim(self.name, stmt)
        if claim is None:
            return NotImplemented
        kind, grid = claim
        if kind == "threadgroup":
            emit_simdgroup_gemm(lowering, stmt)
        elif kind == "registers":
            emit_register_gemm(lowering, stmt, grid)
        elif kind == "fill":
            emit_register_fill(lowering, stmt, grid)
        else:
            emit_register_store(lowering, stmt, grid)
        return None


def _tiles(lowering, buf: N.Buffer) -> Tuple[int, int]:
    """(TM, TN): 8x8 matrices per simdgroup along rows and columns of accumulator `buf`."""
    rows, cols = buf.static_dims()[:2]
    grid = simdgroup_grid(rows, cols, lowering.threads // lowering.target.warp_size)
    if grid is None:  # planning keeps an accumulator in registers only where it has a grid
        raise AssertionError(f"accumulator {buf.name!r} has no simdgroup grid")
    wm, wn = grid
    return rows // wm // 8, cols // wn // 8


def _origin(lowering, buf: N.Buffer, grid):
    """Row and column of this simdgroup's first matrix in accumulator `buf`."""
    from tvm import tirx as tx

    wm, wn = grid
    sg = tx.floordiv(lowering.thread, lowering.target.warp_size)
    return tx.floordiv(sg, wn) * (buf.shape[0] // wm), tx.floormod(sg, wn) * (buf.shape[1] // wn)


def emit_register_fill(lowering, f: N.Fill, grid) -> None:
    """Every matrix of this simdgroup filled with the value."""
    from tvm.backend.metal import op as mop
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import cast_to

    buf = f.dst.buffer
    tm, tn = _tiles(lowering, buf)
    mats = lowering.views[buf.name]
    value = cast_to(lowering.lower(f.value), buf.dtype)
    with B.unroll(0, tm * tn) as t:
        B.evaluate(mop.make_filled_simdgroup_matrix(mats.data, t, value))


def emit_register_gemm(lowering, g: N.Gemm, grid) -> None:
    """C += A B on this simdgroup's TM x TN matrices: per K step, TM + TN loads, TM * TN MACs."""
    from tvm import tirx as tx
    from tvm.backend.metal import op as mop
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as B

    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    tm, tn = _tiles(lowering, c)
    mats = lowering.views[c.name]
    if g.clear_accum:
        emit_register_fill(lowering, N.Fill(g.c, N.Const(0, c.dtype)), grid)
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    av, bv = lowering.views[a.name], lowering.views[b.name]
    lda, ldb = a.shape[1], b.shape[1]
    row0, col0 = _origin(lowering, c, grid)
    mat_a = B.alloc_buffer((64 * tm,), a.dtype, scope="metal.simdgroup")
    mat_b = B.alloc_buffer((64 * tn,), b.dtype, scope="metal.simdgroup")
    IRBuilder.name("mat_a", mat_a)
    IRBuilder.name("mat_b", mat_b)

    def ptr(view, off):
        return tx.address_of(tx.BufferLoad(view, [off]))

    with B.serial(0, K // 8) as kk:
        k0 = kk * 8
        with B.unroll(0, tm) as mi:
            i0 = row0 + mi * 8
            off = k0 * lda + i0 if g.transpose_a else i0 * lda + k0
            B.evaluate(mop.simdgroup_load(mat_a.data, mi, ptr(av, off), lda, transpose_matrix=bool(g.transpose_a)))
        with B.unroll(0, tn) as ni:
            j0 = col0 + ni * 8
            off = j0 * ldb + k0 if g.transpose_b else k0 * ldb + j0
            B.evaluate(mop.simdgroup_load(mat_b.data, ni, ptr(bv, off), ldb, transpose_matrix=bool(g.transpose_b)))
        with B.unroll(0, tm) as mi:
            with B.unroll(0, tn) as ni:
                B.evaluate(
                    mop.simdgroup_multiply_accumulate(
                        mats.data, mi * tn + ni, mat_a.data, mi, mat_b.data, ni, mats.data, mi * tn + ni
                    )
                )


def emit_register_store(lowering, cp: N.Copy, grid) -> None:
    """Copy the accumulator to its global region: per matrix, simdgroup_store to this
    simdgroup's staging tile, then each lane converts and writes its 64 / warp_size elements."""
    from tvm import tirx as tx
    from tvm.backend.metal import op as mop
    from tvm.tirx.script.builder import ir as B

    c, dst = cp.src.buffer, cp.dst
    tm, tn = _tiles(lowering, c)
    mats, stage = lowering.views[c.name], lowering.views[f"{c.name}_stage"]
    row0, col0 = _origin(lowering, c, grid)
    sg = tx.floordiv(lowering.thread, lowering.target.warp_size)
    lane = tx.floormod(lowering.thread, lowering.target.warp_size)
    base = tx.address_of(tx.BufferLoad(stage, [sg * 64]))
    per_lane = 64 // lowering.target.warp_size  # elements of an 8x8 matrix per lane
    # barriers around every use of the staging tile: TVM may place it in the storage of a
    # shared tile whose last readers (other simdgroups) are still running
    with B.unroll(0, tm * tn) as t:
        lowering.sync()
        B.evaluate(mop.simdgroup_store(mats.data, t, base, 8))
        lowering.sync()
        with B.unroll(0, per_lane) as u:
            e = lane * per_lane + u
            i = row0 + tx.floordiv(t, tn) * 8 + tx.floordiv(e, 8)
            j = col0 + tx.floormod(t, tn) * 8 + tx.floormod(e, 8)
            idx = [lowering.lower(dst.starts[0]) + i, lowering.lower(dst.starts[1]) + j]
            value = tx.BufferLoad(stage, [sg * 64 + e])
            if cp.predicated:
                with B.If(lowering.in_bounds(dst, idx)):
                    with B.Then():
                        lowering.store(dst.buffer, idx, value)
            else:
                lowering.store(dst.buffer, idx, value)
    lowering.sync()


def emit_simdgroup_gemm(lowering, g: N.Gemm):
    """Each simdgroup takes 8x8 tiles of C in turn: load, multiply-accumulate over K, store."""
    from tvm import tirx as tx
    from tvm.backend.metal import op as mop
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import tir_const

    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    M, Nn = c.static_dims()
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    av, bv, cv = lowering.views[a.name], lowering.views[b.name], lowering.views[c.name]
    lda, ldb, ldc = a.static_dims()[1], b.static_dims()[1], Nn
    groups = lowering.threads // lowering.target.warp_size
    tiles_n = Nn // 8
    tiles = (M // 8) * tiles_n
    sg = tx.floordiv(lowering.thread, lowering.target.warp_size)
    mat_a = B.alloc_buffer((64,), a.dtype, scope="metal.simdgroup")
    mat_b = B.alloc_buffer((64,), b.dtype, scope="metal.simdgroup")
    mat_c = B.alloc_buffer((64,), c.dtype, scope="metal.simdgroup")
    for name, buf in (("mat_a", mat_a), ("mat_b", mat_b), ("mat_c", mat_c)):
        IRBuilder.name(name, buf)
    zero = tir_const(0, "int32")

    def ptr(view, off):
        return tx.address_of(tx.BufferLoad(view, [off]))

    with B.serial(0, -(-tiles // groups)) as r:
        tile = r * groups + sg
        # uniform per simdgroup: every lane of a simdgroup takes the same branch
        with B.If(tile < tiles):
            with B.Then():
                i0 = tx.floordiv(tile, tiles_n) * 8
                j0 = tx.floormod(tile, tiles_n) * 8
                if g.clear_accum:
                    B.evaluate(mop.make_filled_simdgroup_matrix(mat_c.data, zero, tir_const(0, c.dtype)))
                else:
                    B.evaluate(mop.simdgroup_load(mat_c.data, zero, ptr(cv, i0 * ldc + j0), ldc))
                with B.serial(0, K // 8) as kk:
                    k0 = kk * 8
                    a_off = k0 * lda + i0 if g.transpose_a else i0 * lda + k0
                    b_off = j0 * ldb + k0 if g.transpose_b else k0 * ldb + j0
                    B.evaluate(
                        mop.simdgroup_load(mat_a.data, zero, ptr(av, a_off), lda, transpose_matrix=bool(g.transpose_a))
                    )
                    B.evaluate(
                        mop.simdgroup_load(mat_b.data, zero, ptr(bv, b_off), ldb, transpose_matrix=bool(g.transpose_b))
                    )
                    B.evaluate(
                        mop.simdgroup_multiply_accumulate(
                            mat_c.data, zero, mat_a.data, zero, mat_b.data, zero, mat_c.data, zero
                        )
                    )
                B.evaluate(mop.simdgroup_store(mat_c.data, zero, ptr(cv, i0 * ldc + j0), ldc))


def _atomic(kind):
    @contextual
    def atomic(lowering, args):
        from tvm import tirx as tx
        from tvm.tirx.script.builder import ir as B

        buf, idx, value = args
        B.evaluate(tx.call_extern("void", f"tc_atomic_{kind}", lowering.addr(buf, idx), value))

    atomic.__doc__ = f"atomic {kind} through the `tc_atomic_{kind}` helper of METAL_DEVICE_LIB"
    return atomic


def metal_intrinsics():
    """tile-metal's atomics: int32 add/max/min and float32 add (what MSL's atomics offer)."""
    table = {(f"atomic_{kind}", "int32"): _atomic(kind) for kind in ("add", "max", "min")}
    table[("atomic_add", "float32")] = _atomic("add")
    return table


# MSL helpers for atomics (TVM 0.27's Metal codegen has none); the metal plugin inserts this
# after the `using namespace metal;` line of the generated source.
METAL_DEVICE_LIB = (
    "\n".join(
        f"inline void tc_atomic_{op}({space} {ctype}* p, {ctype} v) "
        f"{{ atomic_fetch_{op}_explicit(({space} atomic_{ctype}*)p, v, memory_order_relaxed); }}"
        for space in ("device", "threadgroup")
        for ctype, ops in (("int", ("add", "max", "min")), ("float", ("add",)))
        for op in ops
    )
    + "\n"
)
