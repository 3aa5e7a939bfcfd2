"""liveness + memory_plan: overlapping buffers never share bytes; limits are errors at the Alloc."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N
from tilecore.passes.check_types import check
from tilecore.passes.liveness import analyze as liveness
from tilecore.passes.memory_plan import buffer_bytes, memory_plan, plan_memory
from tilecore.passes.pipeline import PassContext

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import FILE, SOURCE, c, gemm_func, kernel_func, make_backend, mul, region, v  # noqa: E402


def test_gemm_buffers_are_live_across_the_whole_loop():
    live = liveness(gemm_func())
    # positions: 0 Kernel, 1-3 Allocs, 4 Fill, 5 For, 6-8 loop body, 9 final copy
    assert live.interval == {"A_s": (5, 8), "B_s": (5, 8), "C_f": (4, 9)}
    plan = plan_memory(gemm_func(bm=128, bn=128, bk=32))
    shared = plan.storages["shared"]
    assert shared.offsets == {"A_s": 0, "B_s": 128 * 32 * 2}
    assert shared.total_bytes == 2 * 128 * 32 * 2
    assert plan.storages["fragment"].total_bytes == 128 * 128 * 4


def test_dead_buffers_share_space():
    A = N.Buffer("A", (256,), "float32")
    S1 = N.Buffer("S1", (64,), "float32", "shared")
    S2 = N.Buffer("S2", (64,), "float32", "shared")
    S3 = N.Buffer("S3", (32,), "float16", "shared")
    body = [
        N.Alloc(S1),
        N.Alloc(S2),
        N.Alloc(S3),
        N.Copy(region(A, (0,), (64,)), region(S1)),
        N.Copy(region(S1), region(A, (64,), (64,))),
        N.Copy(region(A, (0,), (64,)), region(S2)),
        N.Copy(region(S2), region(A, (128,), (64,))),
        N.Copy(region(A, (0,), (32,)), region(S3)),
        N.Copy(region(S3), region(A, (192,), (32,))),
    ]
    ctx = PassContext()
    memory_plan(kernel_func([A], body), ctx)
    plan = ctx.analyses["memory_plan"].storages["shared"]
    assert plan.offsets == {"S1": 0, "S2": 0, "S3": 0}
    assert plan.total_bytes == 256 and plan.unshared_bytes == 256 + 256 + 128
    assert "liveness" in ctx.analyses


def test_values_carried_across_loop_iterations_keep_their_space():
    A = N.Buffer("A", (256,), "float32")
    acc = N.Buffer("acc", (64,), "float32", "shared")
    tmp = N.Buffer("tmp", (64,), "float32", "shared")
    k = v("k")
    # acc is read at the top of the loop and written at the bottom: it must stay live across
    # the whole loop, so tmp (used only in the middle) may not reuse its bytes.
    loop = N.For(
        k,
        c(0),
        c(4),
        "serial",
        (
            N.Copy(region(acc), region(A, (0,), (64,))),
            N.Copy(region(A, (mul(k, c(64)),), (64,)), region(tmp)),
            N.Copy(region(tmp), region(acc)),
        ),
    )
    plan = plan_memory(kernel_func([A], [N.Alloc(acc), N.Alloc(tmp), N.Fill(region(acc), c(0.0, "float32")), loop]))
    offsets = plan.storages["shared"].offsets
    assert offsets["acc"] != offsets["tmp"]


def test_a_while_conditions_buffer_stays_live_across_the_loop():
    """A `while` re-reads its condition after every pass of its body: a buffer read only by the
    condition must not share bytes with one the body writes."""
    A = N.Buffer("A", (256,), "float32")
    flag = N.Buffer("flag", (64,), "float32", "shared")
    tmp = N.Buffer("tmp", (64,), "float32", "shared")
    zero = c(0)
    loop = N.While(
        N.BinOp(">", N.Load(flag, (zero,), "float32"), c(0.0, "float32"), "bool"),
        (N.Copy(region(A, (0,), (64,)), region(tmp)), N.Copy(region(tmp), region(A, (64,), (64,)))),
    )
    plan = plan_memory(
        kernel_func([A], [N.Alloc(flag), N.Alloc(tmp), N.Copy(region(A, (0,), (64,)), region(flag)), loop])
    )
    offsets = plan.storages["shared"].offsets
    assert offsets["flag"] != offsets["tmp"]


def test_shared_memory_over_the_limit_points_at_the_alloc():
    func = gemm_func(bm=128, bn=256, bk=64, dtype="float32", accum="float32")
    backend = make_backend("cuda", max_shared=48 * 1024)
    ctx = PassContext(backend=backend, source=SOURCE)
    with pytest.raises(TileCompileError) as info:
        memory_plan(func, ctx)
    err = info.value
    need = 128 * 64 * 4 + 64 * 256 * 4
    assert err.message.startswith(
        f"shared memory over the limit: the kernel needs {need} bytes but backend cuda allows 49152 bytes per block"
    )
    assert "A_s 32768 B, B_s 65536 B" in err.message
    assert err.span.line == 7 and str(err).startswith(f"{FILE}:7:")  # B_s does not fit after A_s
    memory_plan(func, PassContext(backend=make_backend("big", max_shared=228 * 1024)))


def test_fragment_limit():
    func = gemm_func(bm=128, bn=128)
    with pytest.raises(TileCompileError) as info:
        memory_plan(func, PassContext(backend=make_backend("npu", max_fragment=32 * 1024), source=SOURCE))
    assert info.value.message.startswith("fragment/local memory over the limit: the kernel needs 65536 bytes")
    assert info.value.span.line == 8


@settings(max_examples=150, deadline=None)
@given(
    uses=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([16, 40, 64, 200])), min_size=1, max_size=6
    ),
    loop_at=st.integers(0, 6),
)
def test_plan_never_overlaps_live_buffers(uses, loop_at):
    """Random use positions: buffers whose intervals overlap never share a byte."""
    A = N.Buffer("A", (4096,), "float16")
    bufs = [N.Buffer(f"S{i}", (size,), "float16", "shared") for i, (_, _, size) in enumerate(uses)]
    steps = []
    for t in range(6):
        step = []
        for b, (first, last, _) in zip(bufs, uses):
            if t in (first, last):
                step.append(N.Copy(region(A, (0,), b.shape), region(b)))
        steps.append(step)
    body = [N.Alloc(b) for b in bufs]
    flat = []
    for t, step in enumerate(steps):
        if t == loop_at:  # wrap this step in a loop
            step = [N.For(v("k"), c(0), c(2), "serial", tuple(step))] if step else []
        flat.extend(step)
    func = kernel_func([A], body + flat)
    live = liveness(func)
    plan = plan_memory(func).storages["shared"]
    names = [b.name for b in bufs]
    for i, a in enumerate(names):
        assert plan.offsets[a] % 128 == 0
        assert plan.offsets[a] + buffer_bytes(bufs[i]) <= plan.total_bytes
        for b in names[i + 1 :]:
            if live.overlaps(a, b):
                a0, a1 = plan.offsets[a], plan.offsets[a] + plan.sizes[a]
                b0, b1 = plan.offsets[b], plan.offsets[b] + plan.sizes[b]
                assert a1 <= b0 or b1 <= a0, (a, b, plan.offsets)
    assert plan.total_bytes <= plan.unshared_bytes


# ----------------------------------------------------------------------------- liveness vs execution

NAMES = [f"B{i}" for i in range(5)]


@st.composite
def programs(draw, depth=0):
    """Items: ("use", names) or ("loop", allocs_inside, items)."""
    items = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            inner_allocs = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
            items.append(("loop", inner_allocs, draw(programs(depth + 1))))
        else:
            items.append(("use", draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))))
    return items


def to_ir(items, allocated, A):
    body = []
    for item in items:
        if item[0] == "use":
            for n in item[1]:
                body.append(N.Copy(region(A, (0,), (16,)), region(N.Buffer(n, (16,), "float32", "shared"))))
        else:
            inner = [n for n in item[1] if n not in allocated]
            allocated.update(inner)
            loop_body = [N.Alloc(N.Buffer(n, (16,), "float32", "shared")) for n in inner]
            loop_body += to_ir(item[2], allocated, A)
            body.append(N.For(v(f"k{len(allocated)}_{id(item) % 997}"), c(0), c(2), "serial", tuple(loop_body)))
    return body


def execute(items, instance, trace, clock, allocated_here=()):
    for item in items:
        if item[0] == "use":
            for n in item[1]:
                clock[0] += 1
                trace.setdefault((n, instance[n]), [clock[0], clock[0]])[1] = clock[0]
                trace[(n, instance[n])][0] = min(trace[(n, instance[n])][0], clock[0])
        else:
            for _ in range(2):
                for n in item[1]:
                    if n in item[3]:
                        instance[n] += 1  # a fresh allocation each iteration
                execute(item[2], instance, trace, clock)


@settings(max_examples=150, deadline=None)
@given(items=programs())
def test_liveness_covers_every_executed_overlap(items):
    A = N.Buffer("A", (16,), "float32")
    allocated = set()
    body = to_ir(items, allocated, A)
    top = [n for n in NAMES if n not in allocated]
    func = kernel_func([A], [N.Alloc(N.Buffer(n, (16,), "float32", "shared")) for n in top] + body)
    try:
        check(func)  # only well-scoped programs (a loop's own buffers are used inside it)
    except TileCompileError:
        assume(False)
    live = liveness(func)

    # mark which loop allocates each name (as to_ir decided), then execute
    seen = set(top)

    def annotate(its):
        out = []
        for it in its:
            if it[0] == "use":
                out.append(it)
            else:
                mine = tuple(n for n in it[1] if n not in seen)
                seen.update(mine)
                out.append(("loop", it[1], annotate(it[2]), mine))
        return out

    trace = {}
    execute(annotate(items), {n: 0 for n in NAMES}, trace, [0])
    for (a, ia), (a0, a1) in trace.items():
        for (b, ib), (b0, b1) in trace.items():
            if a < b and a0 <= b1 and b0 <= a1:
                assert live.overlaps(a, b), (a, b, live.interval)
