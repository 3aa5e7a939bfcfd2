"""Where every buffer of a kernel lives on a SIMT target, and how fragments are spread.

`plan_kernel(func, threads, ...)` decides, for each allocation:
  "smem" -- shared memory (a `SharedLayout`), for shared tiles and for fragments that
            some statement cannot access thread-locally ("demoted" fragments);
  "reg"  -- registers, with a thread layout from `simt_layout` (fragments, and local
            buffers indexed by T.Parallel variables);
  "rep"  -- a per-thread copy that every thread keeps identical (local / var buffers
            used only by block-level code);
  "owned" -- held by a rule that allocates it and lowers every statement touching it
            (`KernelPlan.owners`; e.g. accumulators in opaque matrix registers).
The layout choice is a fixpoint: gemm accumulators take the MMA layout, layouts
propagate through T.Parallel loops, copies and reductions, and a fragment that some
loop would need to read from another thread is demoted to shared memory, after which
the propagation runs again. Results are always correct; demotion only costs speed.

Which gemm accumulators take a matrix unit's register layout is not decided here:
the Gemm rules of the backend's rule table answer it (`LoweringRule.accumulator_layout`),
and every rule may refine the finished plan (`LoweringRule.plan`, see `plan_for_target`).

Pure Python (no TVM). The same plan serves every SIMT backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..ir import nodes as N
from ..ir.types import itemsize
from ..ir.visitor import walk, walk_stmts
from .simt_layout import MmaLayout, RowLayout, SharedLayout, StridedLayout, StridedRowLayout

# (gemm, warps, prefer_rows, existing layout) -> the accumulator's register layout, or None
AccumulatorChooser = Callable[[N.Gemm, int, bool, Optional[object]], Optional[object]]


@dataclass
class KernelPlan:
    """Storage and layout of every buffer of one kernel, and what the rules claimed."""

    threads: int
    storage: Dict[str, str] = field(default_factory=dict)
    layout: Dict[str, Any] = field(default_factory=dict)  # buffer name -> a simt_layout layout
    buffers: Dict[str, N.Buffer] = field(default_factory=dict)
    mma_gemms: Dict[int, object] = field(default_factory=dict)  # id(Gemm) -> accumulator layout from a rule
    demoted: Set[str] = field(default_factory=set)
    notes: List[str] = field(default_factory=list)
    # rule name -> {id(stmt): what the rule recorded}: the instances a rule will lower
    claims: Dict[str, Dict[int, Any]] = field(default_factory=dict)
    device_sources: List[str] = field(default_factory=list)  # helper source the rules add to the module
    before_barrier: List[str] = field(default_factory=list)  # device instructions issued before each barrier
    shared_alignment: Optional[int] = None  # a rule's alignment of shared tiles (default: the target's)
    owners: Dict[str, Any] = field(default_factory=dict)  # "owned" buffer -> the rule that allocates it
    # opaque handle parameters a rule asks for, after the tensors (`SimtLowering.param_vars`): e.g.
    # descriptors a backend's launcher builds per call and its code generator passes by value
    extra_params: List[str] = field(default_factory=list)

    def give_to(self, name: str, rule) -> None:
        """Hand buffer `name` to `rule` (storage "owned"): the rule's `allocate(lowering, buffer)`
        declares it, and the rule must lower every statement that touches it."""
        self.storage[name] = "owned"
        self.layout.pop(name, None)
        self.owners[name] = rule

    def claimed(self, rule_name: str) -> Dict[int, Any]:
        """The instances rule `rule_name` claimed (an empty dict when none)."""
        return self.claims.setdefault(rule_name, {})


@dataclass
class PlanContext:
    """What a rule's planning hook sees (`LoweringRule.plan`)."""

    func: N.PrimFunc
    plan: KernelPlan
    threads: int
    target: Any  # tilecore.lowering.target.TargetDescription

    @property
    def kernel(self) -> N.Kernel:
        return self.func.kernel

    def stmts(self, cls) -> List[N.Stmt]:
        """Every statement of class `cls` in the kernel body, in program order."""
        return [s for s in walk_stmts(self.kernel.body) if isinstance(s, cls)]


def plan_for_target(func: N.PrimFunc, threads: int, target, rules=()) -> KernelPlan:
    """The plan of `func` on `target`: the core plan with the Gemm rules' accumulator layouts,
    then every rule's planning hook in rule-table order (`rules`: `RuleTable.all_rules()`)."""
    rules = list(rules)

    def choose(gemm, warps, prefer_rows, existing):
        for rule in rules:
            pick = getattr(rule, "accumulator_layout", None)
            lay = pick(gemm, warps, prefer_rows, existing, target) if pick else None
            if lay is not None:
                return lay
        return None

    plan = plan_kernel(func, threads, choose, target.warp_size)
    cap_register_vectors(plan, target)
    ctx = PlanContext(func, plan, threads, target)
    for rule in rules:
        hook = getattr(rule, "plan", None)
        if hook is not None:
            hook(ctx)
    return plan


def _is_loop_vars(indices, vars_) -> bool:
    return len(indices) == len(vars_) and all(isinstance(i, N.Var) and i.name == v.name for i, v in zip(indices, vars_))


def whole_region(r: N.Region, ndim: Optional[int] = None) -> bool:
    """Whether region `r` is its whole (static) buffer, of rank `ndim` when given."""
    shape = r.buffer.static_shape()
    return (
        shape is not None
        and (ndim is None or len(shape) == ndim)
        and tuple(r.extents) == shape
        and all(isinstance(s, N.Const) and s.value == 0 for s in r.starts)
    )


def _uses_vars(expr, names) -> bool:
    return any(isinstance(n, N.Var) and n.name in names for n in walk(expr))


def parallel_accesses(p: N.Parallel):
    """(buffer, indices, is_store) for every element access inside a Parallel body."""
    out = []
    for node in walk_stmts(p.body):
        if isinstance(node, N.Store):
            out.append((node.buffer, node.indices, True))
        if isinstance(node, N.Atomic) and isinstance(node.dst, N.Region):
            out.append((node.dst.buffer, node.dst.starts, True))
        for sub in _stmt_exprs(node):
            for e in walk(sub):
                if isinstance(e, N.Load):
                    out.append((e.buffer, e.indices, False))
    return out


def _stmt_exprs(s):
    if isinstance(s, N.Store):
        return list(s.indices) + [s.value]
    if isinstance(s, N.Let):
        return [s.value]
    if isinstance(s, (N.If, N.While)):
        return [s.cond]
    if isinstance(s, N.For):
        return [s.begin, s.extent]
    if isinstance(s, N.Atomic):
        vals = [s.value] if isinstance(s.value, N.Expr) else []
        return list(s.dst.starts) + vals
    if isinstance(s, N.Print) and isinstance(s.value, N.Expr):
        return [s.value]
    return []


def _fragment_candidates(body, allocs, parallels) -> Tuple[Set[str], Set[str]]:
    """(buffers that behave like fragments, the ones of them that must live in shared memory):
    fragments and the local buffers a T.Parallel indexes by its variables (and local tiles copied
    from them); forced to shared memory when some statement reads or writes them at block level,
    in part, or as a gemm operand that registers cannot hold."""
    # local buffers indexed by a Parallel's variables behave like fragments
    frag_like: Set[str] = {b.name for b in allocs if b.scope == "fragment"}
    forced: Set[str] = set()
    for p in parallels:
        names = {v.name for v in p.vars}
        for buf, idx, is_store in parallel_accesses(p):
            if buf.scope == "local" and any(_uses_vars(i, names) for i in idx):
                frag_like.add(buf.name)
            elif buf.scope in ("local", "var") and is_store:
                forced.add(buf.name)  # one scalar written by many iterations: keep it shared
    # a local tile written from a fragment holds per-thread pieces: it is a fragment too
    for _ in range(3):
        for s in walk_stmts(body):
            if isinstance(s, N.Copy) and s.src.buffer.name in frag_like and s.dst.buffer.scope == "local":
                frag_like.add(s.dst.buffer.name)
    # block-level element access to a fragment: only shared memory lets every thread see it
    forced |= _block_level_fragment_access(body, frag_like)
    for s in walk_stmts(body):
        if isinstance(s, (N.Cumsum,)):
            forced |= {s.src.name, s.dst.name} & frag_like
        if isinstance(s, N.Print) and isinstance(s.value, N.Buffer):
            forced |= {s.value.name} & frag_like
        if isinstance(s, N.Copy):
            for r in (s.src, s.dst):
                if r.buffer.name in frag_like and not whole_region(r):
                    forced.add(r.buffer.name)
        if isinstance(s, N.Fill) and s.dst.buffer.name in frag_like and not whole_region(s.dst):
            forced.add(s.dst.buffer.name)
        if isinstance(s, N.Gemm):
            forced |= {s.b.buffer.name} & frag_like
            if not _rs_candidate(s, frag_like):
                forced |= {s.a.buffer.name} & frag_like
            if s.c.buffer.name in frag_like and not whole_region(s.c):
                forced.add(s.c.buffer.name)
        if isinstance(s, N.Atomic) and isinstance(s.value, N.Region):
            if s.value.buffer.name in frag_like and not whole_region(s.value):
                forced.add(s.value.buffer.name)

    return frag_like, forced


def plan_kernel(
    func: N.PrimFunc, threads: int, accumulator_layout: Optional[AccumulatorChooser] = None, warp_size: int = 32
) -> KernelPlan:
    """Decide storage and layouts for every buffer of `func` (see the module docstring).

    `accumulator_layout(gemm, warps, prefer_rows, existing)` gives a gemm accumulator its
    register layout (None: the default strided layout); without it no gemm gets one.
    """
    kernel = func.kernel
    plan = KernelPlan(threads=threads)
    for b in func.params:
        plan.buffers[b.name] = b
        plan.storage[b.name] = "global"
    allocs = [s.buffer for s in walk_stmts(kernel.body) if isinstance(s, N.Alloc)]
    for b in allocs:
        plan.buffers[b.name] = b

    parallels = [s for s in walk_stmts(kernel.body) if isinstance(s, N.Parallel)]
    gemms = [s for s in walk_stmts(kernel.body) if isinstance(s, N.Gemm)]
    reduces = [s for s in walk_stmts(kernel.body) if isinstance(s, N.Reduce)]

    frag_like, forced = _fragment_candidates(kernel.body, allocs, parallels)
    demoted = set(forced)
    row_reduced = {r.src.name for r in reduces if r.dim == len(r.src.shape) - 1}
    for _ in range(8):
        layouts, mma = _assign(
            plan,
            frag_like - demoted,
            parallels,
            gemms,
            reduces,
            kernel.body,
            threads,
            accumulator_layout,
            row_reduced,
            warp_size,
        )
        new = unreachable_fragments(layouts, frag_like - demoted, parallels, kernel.body, reduces)
        for g in gemms:  # A in registers only in the MMA accumulator layout of C's warp rows
            if g.a.buffer.name in frag_like - demoted and not rs_ok(g, layouts, mma):
                new.add(g.a.buffer.name)
        if not new:
            break
        demoted |= new
    plan.demoted = demoted
    plan.mma_gemms = mma

    warps_ok = threads % warp_size == 0
    for b in allocs:
        if b.name in frag_like and b.name not in demoted:
            plan.storage[b.name] = "reg"
            plan.layout[b.name] = layouts[b.name]
        elif b.scope == "shared" or b.name in demoted:
            plan.storage[b.name] = "smem"
        else:
            plan.storage[b.name] = "rep"
    for b in allocs:
        if plan.storage[b.name] == "smem":
            plan.layout[b.name] = SharedLayout(tuple(b.static_shape() or (1,)), itemsize(b.dtype))
    if demoted:
        plan.notes.append("fragments kept in shared memory: " + ", ".join(sorted(demoted)))
    if not warps_ok and mma:
        plan.mma_gemms = {}
    return plan


def cap_register_vectors(plan: KernelPlan, target) -> None:
    """Re-chunk register layouts of more contiguous elements than the target's vectors hold
    (`target.register_vector_lanes`; one element where the target has no bool vectors)."""
    lanes = target.register_vector_lanes
    if not target.bool_vectors and any(b.dtype == "bool" for b in plan.buffers.values()):
        lanes = 1
    if not lanes:
        return
    for name, lay in list(plan.layout.items()):
        if isinstance(lay, StridedLayout) and lay.vec > lanes:
            plan.layout[name] = StridedLayout(lay.shape, lay.threads, lanes)


def unswizzled_buffers(kernel: N.Kernel) -> Set[str]:
    """Shared tiles that `T.annotate_layout` pins to a plain (not swizzled) layout."""
    out: Set[str] = set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, N.Hint) and s.kind == "annotate_layout":
            params = dict(s.params)
            if params.get("layout") not in ("swizzled", None):
                out |= {b.name for b in s.buffers}
    return out


def demote_unreachable(plan: KernelPlan, kernel: N.Kernel) -> Set[str]:
    """Move to shared memory every register fragment that some loop can no longer reach
    thread-locally (after a rule changed layouts or storage); a fixpoint. Returns the names."""
    body = kernel.body
    parallels = [s for s in walk_stmts(body) if isinstance(s, N.Parallel)]
    reduces = [s for s in walk_stmts(body) if isinstance(s, N.Reduce)]
    moved: Set[str] = set()
    for _ in range(16):
        live = {n for n, st in plan.storage.items() if st == "reg"}
        new = unreachable_fragments(plan.layout, live, parallels, body, reduces) & live
        if not new:
            break
        for name in new:
            b = plan.buffers[name]
            plan.storage[name] = "smem"
            plan.layout[name] = SharedLayout(tuple(b.static_shape() or (1,)), itemsize(b.dtype))
            plan.demoted.add(name)
        moved |= new
    return moved


def _rs_candidate(g: N.Gemm, frag_like) -> bool:
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    return (
        a.name in frag_like
        and c.name in frag_like
        and not g.transpose_a
        and len(a.shape) == 2
        and a.dtype == b.dtype
        and a.dtype in ("float16", "bfloat16")
        and whole_region(g.a)
    )


def rs_ok(g: N.Gemm, layouts, mma) -> bool:
    """Whether gemm `g` can take A straight from registers (tensor cores, warp rows match C)."""
    la, lc = layouts.get(g.a.buffer.name), mma.get(id(g))
    return (
        isinstance(la, MmaLayout)
        and isinstance(lc, MmaLayout)
        and la.wn == 1
        and lc.wn == 1
        and la.wm == lc.wm
        and la.M == lc.M
        and la.N % 16 == 0
    )


def _block_level_fragment_access(body, frag_like) -> Set[str]:
    found: Set[str] = set()

    def visit(stmts):
        for s in stmts:
            if isinstance(s, N.Parallel):
                continue
            for e in _stmt_exprs(s):
                for n in walk(e):
                    if isinstance(n, N.Load) and n.buffer.name in frag_like:
                        found.add(n.buffer.name)
            if isinstance(s, N.Store) and s.buffer.name in frag_like:
                found.add(s.buffer.name)
            if isinstance(s, N.Atomic) and s.dst.buffer.name in frag_like:
                found.add(s.dst.buffer.name)
            for name in ("body", "then_body", "else_body"):
                sub = getattr(s, name, None)
                if isinstance(sub, tuple):
                    visit(sub)

    visit(body)
    return found


def _assign(plan, live, parallels, gemms, reduces, body, threads, accumulator_layout, row_reduced, warp_size):
    layouts: Dict[str, object] = {}
    mma: Dict[int, object] = {}
    warps = threads // warp_size if threads % warp_size == 0 else 0
    for g in gemms:
        c = g.c.buffer
        if accumulator_layout is None or not (warps and c.name in live):
            continue
        lay = accumulator_layout(g, warps, c.name in row_reduced, layouts.get(c.name))
        if lay is None:
            continue
        layouts[c.name] = lay
        mma[id(g)] = lay
    for rnd in range(8):
        if rnd == 4:
            # tiles nothing constrained yet: default layout, then propagate to their row vectors
            for name in live:
                if name not in layouts and len(plan.buffers[name].shape) >= 2:
                    layouts[name] = _default_layout(plan.buffers[name], threads)
        changed = False
        for r in reduces:
            src_l = layouts.get(r.src.name)
            if (
                isinstance(src_l, MmaLayout)
                and r.dim == 1
                and r.dst.name in live
                and r.dst.name not in layouts
                and tuple(r.dst.shape) in ((src_l.M,), (src_l.M, 1))
            ):
                layouts[r.dst.name] = RowLayout(src_l.M, src_l.wm, src_l.wn, len(r.dst.shape))
                changed = True
            if (
                isinstance(src_l, StridedLayout)
                and len(src_l.shape) == 2
                and r.dim == 1
                and r.dst.name in live
                and r.dst.name not in layouts
                and tuple(r.dst.shape) in ((src_l.shape[0],), (src_l.shape[0], 1))
            ):
                row = StridedRowLayout.of(src_l, len(r.dst.shape))
                if row is not None:
                    layouts[r.dst.name] = row
                    changed = True
        for p in parallels:
            acc = [(b, i) for b, i, _ in parallel_accesses(p) if b.name in live]
            full = [(b, i) for b, i in acc if _is_loop_vars(i, p.vars) and tuple(b.shape) == tuple(p.extents)]
            known = [layouts[b.name] for b, _ in full if b.name in layouts]
            if not known:
                continue
            lay = known[0]
            for b, _ in full:
                if b.name not in layouts:
                    layouts[b.name] = lay
                    changed = True
            if isinstance(lay, StridedLayout) and len(lay.shape) == 2:
                for b, i in acc:
                    if (
                        b.name not in layouts
                        and len(i) in (1, 2)
                        and isinstance(i[0], N.Var)
                        and i[0].name == p.vars[0].name
                        and b.shape[0] == lay.shape[0]
                        and (len(i) == 1 or (isinstance(i[1], N.Const) and b.shape[1] == 1))
                    ):
                        row = StridedRowLayout.of(lay, len(b.shape))
                        if row is not None:
                            layouts[b.name] = row
                            changed = True
            if isinstance(lay, MmaLayout):
                for b, i in acc:
                    if (
                        b.name not in layouts
                        and len(i) in (1, 2)
                        and isinstance(i[0], N.Var)
                        and i[0].name == p.vars[0].name
                        and b.shape[0] == lay.M
                        and (len(i) == 1 or (isinstance(i[1], N.Const) and b.shape[1] == 1))
                    ):
                        layouts[b.name] = RowLayout(lay.M, lay.wm, lay.wn, len(b.shape))
                        changed = True
        for s in walk_stmts(body):
            if isinstance(s, N.Copy) and s.src.buffer.name in live and s.dst.buffer.name in live:
                a, b = s.src.buffer.name, s.dst.buffer.name
                if tuple(s.src.buffer.shape) == tuple(s.dst.buffer.shape):
                    if a in layouts and b not in layouts:
                        layouts[b] = layouts[a]
                        changed = True
                    elif b in layouts and a not in layouts:
                        layouts[a] = layouts[b]
                        changed = True
        if not changed and rnd >= 4:
            break
    for name in live:
        if name not in layouts:
            layouts[name] = _default_layout(plan.buffers[name], threads)
    return layouts, mma


def _default_layout(buf: N.Buffer, threads: int) -> StridedLayout:
    """A register tile nothing else constrains: strided chunks; a local tile (per-thread values,
    e.g. from per-thread code) spread so that every thread holds some of it."""
    return StridedLayout.for_shape(tuple(buf.shape), threads, spread=buf.scope == "local")


def compatible(anchor_layout, anchor_idx, layout, idx) -> bool:
    """Whether the thread that runs iteration `anchor_idx` of `anchor_layout` owns `idx` of `layout`."""
    if layout == anchor_layout and tuple(idx) == tuple(anchor_idx):
        return True
    if (
        isinstance(layout, StridedRowLayout)
        and isinstance(anchor_layout, StridedLayout)
        and layout.matches(anchor_layout)
    ):
        if idx and idx[0] == anchor_idx[0] and (len(idx) == 1 or (isinstance(idx[1], N.Const) and idx[1].value == 0)):
            return True
    if isinstance(layout, RowLayout) and isinstance(anchor_layout, MmaLayout) and layout.matches(anchor_layout):
        if idx and idx[0] == anchor_idx[0] and (len(idx) == 1 or (isinstance(idx[1], N.Const) and idx[1].value == 0)):
            return True
    return False


def choose_anchor(p: N.Parallel, layouts, live):
    """The register fragment whose layout distributes the iterations of `p` (or None)."""
    acc = parallel_accesses(p)
    best = None
    for b, i, is_store in acc:
        if b.name in live and _is_loop_vars(i, p.vars) and tuple(b.shape) == tuple(p.extents):
            if best is None or (is_store and not best[2]):
                best = (b, i, is_store)
    if best is None:
        # a row vector over the loop's only variable
        for b, i, _ in acc:
            if (
                b.name in live
                and isinstance(layouts.get(b.name), (RowLayout, StridedRowLayout))
                and _is_loop_vars(i[:1], p.vars)
                and len(p.vars) == 1
                and b.shape[0] == p.extents[0]
            ):
                return b, i
        return None
    return best[0], best[1]


def unreachable_fragments(layouts, live, parallels, body, reduces) -> Set[str]:
    """Fragments among `live` that some loop, copy or reduction cannot access thread-locally."""
    new: Set[str] = set()
    for p in parallels:
        anchor = choose_anchor(p, layouts, live)
        acc = [(b, i) for b, i, _ in parallel_accesses(p) if b.name in live]
        if anchor is None:
            new |= {b.name for b, _ in acc}
            continue
        ab, ai = anchor
        for b, i in acc:
            if not compatible(layouts[ab.name], ai, layouts[b.name], i):
                new.add(b.name)
    for s in walk_stmts(body):
        if isinstance(s, N.Copy) and s.src.buffer.name in live and s.dst.buffer.name in live:
            if layouts[s.src.buffer.name] != layouts[s.dst.buffer.name]:
                new.add(s.dst.buffer.name)
        if isinstance(s, N.Atomic) and isinstance(s.value, N.Region):
            pass
    for r in reduces:
        src_l, dst_l = layouts.get(r.src.name), layouts.get(r.dst.name)
        special = (
            isinstance(src_l, MmaLayout) and isinstance(dst_l, RowLayout) and dst_l.matches(src_l) and r.dim == 1
        ) or (
            isinstance(src_l, StridedLayout)
            and isinstance(dst_l, StridedRowLayout)
            and dst_l.matches(src_l)
            and r.dim == 1
        )
        if not special and r.src.name in live:
            new.add(r.src.name)
        if not special and r.dst.name in live and not isinstance(dst_l, StridedLayout):
            if not isinstance(dst_l, (RowLayout, MmaLayout)):
                new.add(r.dst.name)
    return new
