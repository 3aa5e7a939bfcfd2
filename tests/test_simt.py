"""Per-thread (SIMT) code inside T.Kernel (`T.get_thread_binding(dim)` used as a value): the body
runs on every thread in statement lockstep, written by the frontend as tile code
(tilecore/frontend/simt.py, docs/semantics.md "Per-thread code")."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError
from tilecore.frontend import parse_source
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts

HAVE_NVCC = shutil.which("nvcc") is not None


def gemv_naive(n, k, block_n, block_k):
    """One thread per output row: a uniform shared store, a per-thread accumulator."""

    @T.prim_func
    def gemv(A: T.Tensor((k,), "float16"), B: T.Tensor((n, k), "float16"), C: T.Tensor((n,), "float16")):
        with T.Kernel(T.ceildiv(n, block_n), threads=block_n) as bn:
            tn = T.get_thread_binding(0)
            a_s = T.alloc_shared((block_k,), "float16")
            b_s = T.alloc_shared((block_n, block_k), "float16")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for bk in T.serial(T.ceildiv(k, block_k)):
                for kk in T.serial(block_k):
                    a_s[kk] = A[bk * block_k + kk]  # the same value from every thread: runs once
                    b_s[tn, kk] = B[bn * block_n + tn, bk * block_k + kk]
                for kk in T.serial(block_k):
                    acc[0] += a_s[kk].astype("float32") * b_s[tn, kk].astype("float32")
            C[bn * block_n + tn] = acc[0]

    return gemv


def gemv_split_k(n, k, block_n, reduce_threads, tile_k):
    """2-D threads: `reduce_threads` threads share a row, each summing `tile_k` columns per step,
    combined by atomics into shared memory."""
    block_k = reduce_threads * tile_k

    @T.prim_func
    def gemv(A: T.Tensor((k,), "float16"), B: T.Tensor((n, k), "float16"), C: T.Tensor((n,), "float16")):
        with T.Kernel(T.ceildiv(n, block_n), threads=(block_n, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            a_l = T.alloc_local((tile_k,), "float16")
            b_l = T.alloc_local((tile_k,), "float16")
            c_s = T.alloc_shared((block_n,), "float32")
            acc = T.alloc_local((1,), "float32")
            if tk == 0:
                c_s[tn] = 0
            T.clear(acc)
            for bk in T.serial(T.ceildiv(k, block_k)):
                for j in T.serial(tile_k):
                    a_l[j] = A[bk * block_k + tk * tile_k + j]
                    b_l[j] = B[bn * block_n + tn, bk * block_k + tk * tile_k + j]
                for j in T.serial(tile_k):
                    acc[0] += a_l[j].astype("float32") * b_l[j].astype("float32")
            T.atomic_add(c_s[tn], acc[0])
            C[bn * block_n + tn] = c_s[tn]

    return gemv


def _gemv_inputs(n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(k).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return a, b, b.astype(np.float32) @ a.astype(np.float32)


@pytest.mark.parametrize("target", ["reference", "cpu", "npu"])
@pytest.mark.parametrize("form", ["naive", "split_k"])
def test_gemv_matches_numpy(form, target):
    n, k = 16, 32
    func = gemv_naive(n, k, 8, 8) if form == "naive" else gemv_split_k(n, k, 8, 4, 4)
    a, b, ref = _gemv_inputs(n, k)
    c = np.zeros(n, np.float16)
    tilecore.compile(func, target=target)(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc here")
def test_gemv_compiles_for_cuda():
    for func in (gemv_naive(16, 32, 8, 8), gemv_split_k(16, 32, 8, 4, 4)):
        assert "__global__" in tilecore.compile(func, target="cuda").get_kernel_source()


@settings(max_examples=4, deadline=None)
@given(
    block_n=st.sampled_from([2, 4]),
    reduce_threads=st.sampled_from([1, 2, 3]),
    tile_k=st.integers(1, 3),
    steps=st.integers(1, 2),
)
def test_split_k_gemv_any_thread_shape(block_n, reduce_threads, tile_k, steps):
    n, k = 2 * block_n, steps * reduce_threads * tile_k
    a, b, ref = _gemv_inputs(n, k, seed=block_n + k)
    c = np.zeros(n, np.float16)
    tilecore.compile(gemv_split_k(n, k, block_n, reduce_threads, tile_k), target="reference")(a, b, c)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def _kernel(body: str, threads="8", extra_params="") -> str:
    """A kernel over A, B (8 float32 each) with `body` inside T.Kernel(1, threads=...)."""
    lines = "\n".join("        " + line for line in body.strip("\n").splitlines())
    return (
        "import tilecore.language as T\n"
        "@T.prim_func\n"
        f"def k(A: T.Tensor((8,), 'float32'), B: T.Tensor((8,), 'float32'){extra_params}):\n"
        f"    with T.Kernel(1, threads={threads}) as bx:\n" + lines + "\n"
    )


# each: (kernel body, expected B from A = 0..7)
PROGRAMS = {
    # a per-thread T.alloc_var, and a loop whose trip count is the thread index
    "var_and_trip_count": (
        """
t = T.get_thread_binding()
s = T.alloc_var("float32")
s = 0.0
for i in T.serial(t + 1):
    s = s + A[i]
B[t] = s
""",
        np.cumsum(np.arange(8.0)),
    ),
    # if / else on a thread index
    "if_else": (
        """
t = T.get_thread_binding()
if t % 2 == 0:
    B[t] = A[t] * 2.0
else:
    B[t] = -A[t]
""",
        np.where(np.arange(8) % 2 == 0, np.arange(8.0) * 2, -np.arange(8.0)),
    ),
    # statement lockstep: thread t stores to shared, the next statement reads another thread's value
    "lockstep_exchange": (
        """
t = T.get_thread_binding()
s = T.alloc_shared((8,), "float32")
v = A[t] * 10.0
s[t] = v
B[t] = s[(t + 1) % 8]
""",
        np.roll(np.arange(8.0) * 10, -1),
    ),
    # 2-D threads (4 x 2): a warp-split `if` on a name is per-thread code too; uniform T.sync_threads()
    "two_dims": (
        """
tx = T.get_thread_binding(0)
ty = T.get_thread_binding(1)
acc = T.alloc_local((1,), "float32")
T.clear(acc)
acc[0] += A[ty * 4 + tx]
T.sync_threads()
T.atomic_add(B[tx], acc[0])
if ty == 0:
    B[tx + 4] = A[tx + 4]
""",
        np.array([4.0, 6, 8, 10, 4, 5, 6, 7]),
    ),
    # a `while` whose condition depends on the thread: each thread runs its own loop (Collatz steps
    # of A[t] + 1, capped at 20), a thread-dependent `if` inside it
    "per_thread_while": (
        """
t = T.get_thread_binding()
x = T.alloc_var("int32")
n = T.alloc_var("int32")
x = T.cast(A[t], "int32") + 1
n = 0
while x > 1 and n < 20:
    if x % 2 == 0:
        x = x // 2
    else:
        x = 3 * x + 1
    n += 1
B[t] = T.cast(n, "float32")
""",
        np.array([0.0, 1, 7, 2, 5, 8, 16, 3]),
    ),
    # a per-thread `while` inside a thread-dependent `if`: odd threads sum A[t], A[t - 2], ..., A[1]
    "while_in_thread_if": (
        """
t = T.get_thread_binding()
k = T.alloc_var("int32")
s = T.alloc_var("float32")
s = 0.0
if t % 2 == 1:
    k = t
    while k > 0:
        s = s + A[k]
        k -= 2
B[t] = s
""",
        np.array([0.0, 1, 0, 4, 0, 9, 0, 16]),
    ),
    # element atomics into shared memory in a per-thread `while`: thread t adds 1 t times (the
    # threads take turns: the loop runs at block level inside a serial loop over them)
    "while_with_shared_atomic": (
        """
t = T.get_thread_binding()
s = T.alloc_shared((1,), "float32")
k = T.alloc_var("int32")
if t == 0:
    s[0] = 0.0
k = t
while k > 0:
    T.atomic_add(s[0], 1.0)
    k -= 1
B[t] = s[0]
""",
        np.full(8, 28.0),
    ),
}
THREADS = {"two_dims": "(4, 2)"}
ON_CPU = ("var_and_trip_count", "two_dims", "per_thread_while")  # cpu compiles each once (a few seconds)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_per_thread_programs(name):
    body, expected = PROGRAMS[name]
    func = parse_source(_kernel(body, THREADS.get(name, "8")))
    assert not any(isinstance(s, N.Hint) for s in walk_stmts(func.body))
    # the reference defines the result
    for target in ("reference", "npu") + (("cpu",) if name in ON_CPU else ()):
        b = np.zeros(8, np.float32)
        tilecore.compile(func, target=target)(np.arange(8, dtype=np.float32), b)
        np.testing.assert_array_equal(b, expected, err_msg=target)


def test_per_thread_buffers_gain_thread_dimensions():
    func = parse_source(
        _kernel(PROGRAMS["lockstep_exchange"][0] + "l = T.alloc_local((3,), 'float32')\nl[t % 3] = 1.0")
    )
    allocs = {s.buffer.name: s.buffer for s in walk_stmts(func.body) if isinstance(s, N.Alloc)}
    assert allocs["l"].shape == (3, 8)
    func = parse_source(_kernel(PROGRAMS["two_dims"][0], "(4, 2)"))
    allocs = {s.buffer.name: s.buffer for s in walk_stmts(func.body) if isinstance(s, N.Alloc)}
    assert allocs["acc"].shape == (2, 4) and allocs["acc"].scope == "local"  # a scalar: one per thread


@pytest.mark.parametrize(
    "body, message, line",
    [
        (
            "t = T.get_thread_binding()\nB[0] = A[t]",
            r"store different values to one element of B.*get_thread_binding\(0\)",
            6,
        ),
        (
            "t = T.get_thread_binding()\nfor i in T.Parallel(8):\n    B[i] = A[i] + t",
            "T.Parallel loop cannot read a thread index",
            7,
        ),
        ("for i in T.Parallel(8):\n    B[i] = T.get_thread_binding()", "cannot be used inside T.Parallel", 6),
        (
            "t = T.get_thread_binding()\ns = T.alloc_shared((8,), 'float32')\nT.copy(A[t], s)",
            "store different values",
            7,
        ),
        (
            "t = T.get_thread_binding()\ns = T.alloc_shared((8,), 'float32')\nif t < 4:\n    T.fill(s, 1.0)",
            "inside a thread-dependent",
            8,
        ),
        ("t = T.get_thread_binding()\nif t < 4:\n    T.sync_threads()\n    B[t] = 1.0", "sync_threads", 7),
        (
            "t = T.get_thread_binding()\ns = T.alloc_shared((8,), 'float32')\nwhile A[t] > 0:\n    T.fill(s, 1.0)",
            r"T.fill / T.clear inside a thread-dependent `if`, `for` or `while`",
            8,
        ),
        ("t = T.get_thread_binding()\nwhile A[t] > 0:\n    T.sync_threads()", "sync_threads", 7),
        (
            "t = T.get_thread_binding()\nwhile A[t] > 0:\n    for i in T.Parallel(8):\n        B[i] = 0.0",
            "T.Parallel loop inside a thread-dependent",
            7,
        ),
        (
            "t = T.get_thread_binding()\nn = T.alloc_var('int32')\nn = t\nwhile n > 0:\n    B[0] = A[t]\n    n -= 1",
            "store different values to one element of B",
            9,
        ),
        (
            "t = T.get_thread_binding()\nfor i in T.Parallel(8):\n    T.sync_threads()\nB[t] = A[t]",
            "sync_threads\\(\\) cannot be inside T.Parallel",
            7,
        ),
    ],
)
def test_unsupported_mixes_are_errors_at_the_line(body, message, line):
    with pytest.raises(TileCompileError, match=message) as info:
        parse_source(_kernel(body))
    assert info.value.span.line == line


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_an_atomic_that_does_not_depend_on_the_thread_runs_on_every_thread(target):
    """As in TileLang: T.atomic_add(n[0], 1) in per-thread code adds the thread count, into shared
    memory (then read by every thread) and into global memory alike."""
    body = (
        "t = T.get_thread_binding()\ns = T.alloc_shared((1,), 'float32')\nif t == 0:\n    s[0] = 0.0\n"
        "T.atomic_add(s[0], 1.0)\nB[t] = s[0]\nT.atomic_add(A[0], 1.0)"
    )
    a, b = np.zeros(8, np.float32), np.zeros(8, np.float32)
    tilecore.compile(parse_source(_kernel(body)), target=target)(a, b)
    np.testing.assert_array_equal(b, np.full(8, 8.0, np.float32))
    assert a[0] == 8.0


# per-thread T.copy: each thread's element loop (`threads=8` over A, B of 8 float32 = 0..7)
PER_THREAD_COPIES = {
    # each thread copies all of A into its own local tile, and reads its element back
    "whole_tensor_into_a_local": (
        "t = T.get_thread_binding()\nl = T.alloc_local((8,), 'float32')\nT.copy(A, l)\nB[t] = l[t]",
        list(range(8)),
    ),
    # two elements per thread from a thread-dependent place; past A's end they read as 0
    "pairs_past_the_end": (
        "t = T.get_thread_binding()\nl = T.alloc_local((2,), 'float32')\nT.copy(A[t * 2], l)\nB[t] = l[0] + l[1]",
        [1, 5, 9, 13, 0, 0, 0, 0],
    ),
    # a local tile copied to shared memory at the thread's place, read by another thread next
    "local_to_shared_then_exchanged": (
        "t = T.get_thread_binding()\nl = T.alloc_local((1,), 'float32')\ns = T.alloc_shared((8,), 'float32')\n"
        "l[0] = A[t] * 2\nT.copy(l, s[t])\nB[t] = s[7 - t]",
        [14, 12, 10, 8, 6, 4, 2, 0],
    ),
}


@pytest.mark.parametrize("name", sorted(PER_THREAD_COPIES))
@pytest.mark.parametrize("target", ["reference", "cpu", "npu"])
def test_per_thread_copies_are_element_loops(name, target):
    body, want = PER_THREAD_COPIES[name]
    b = np.full(8, -1.0, np.float32)
    tilecore.compile(parse_source(_kernel(body)), target=target)(np.arange(8, dtype=np.float32), b)
    np.testing.assert_array_equal(b, np.array(want, np.float32))


def test_guarded_store_of_a_thread_value_is_not_a_race():
    body = "t = T.get_thread_binding()\nif t == 3:\n    B[0] = A[t]"
    b = np.zeros(8, np.float32)
    tilecore.compile(parse_source(_kernel(body)), target="reference")(np.arange(8, dtype=np.float32), b)
    assert b[0] == 3.0


def dequant_gemm(m, n, k, block, threads, local):
    """A pipelined GEMM whose B tile is widened by per-thread code between the tile operations:
    each thread loads `local` int8 elements into its own buffer, converts them, stores them to
    shared memory; T.gemm then uses the tile (TileLang's fine-grained dequantize GEMM form)."""
    rounds = block * block // (threads * local)

    @T.prim_func
    def main(A: T.Tensor((m, k), "float16"), B: T.Tensor((n, k), "int8"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(n // block, m // block, threads=threads) as (bx, by):
            a_s = T.alloc_shared((block, block), "float16")
            b_s = T.alloc_shared((block, block), "int8")
            b_l = T.alloc_local((local,), "int8")
            b_deq = T.alloc_shared((block, block), "float16")
            c_f = T.alloc_fragment((block, block), "float32")
            tx = T.get_thread_binding()
            T.clear(c_f)
            for ko in T.Pipelined(k // block, num_stages=2):
                T.copy(A[by * block, ko * block], a_s)
                T.copy(B[bx * block, ko * block], b_s)
                for r in T.serial(rounds):
                    for v in T.serial(local):
                        index = (r * threads + tx) * local + v
                        b_l[v] = b_s[index // block, index % block]
                    for v in T.serial(local):
                        index = (r * threads + tx) * local + v
                        b_deq[index // block, index % block] = T.cast(b_l[v] - 8, "float16")
                T.gemm(a_s, b_deq, c_f, transpose_B=True)
            T.copy(c_f, C[by * block, bx * block])

    return main


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_per_thread_stage_between_tile_operations(target):
    m, n, k = 16, 32, 32
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(0, 16, (n, k)).astype(np.int8)
    c = np.zeros((m, n), np.float32)
    tilecore.compile(dequant_gemm(m, n, k, 16, 32, 4), target=target)(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ (b.astype(np.float32) - 8).T)
    if target == "cpu" and HAVE_NVCC:  # the same kernel through the SIMT lowering, compile tier
        assert "__global__" in tilecore.compile(dequant_gemm(m, n, k, 16, 32, 4), target="cuda").get_kernel_source()


def test_a_thread_index_bound_and_never_read_leaves_tile_code():
    """Only reading a thread index makes per-thread code: a local tile stays one block-wide tile."""
    body = "t = T.get_thread_binding()\nl = T.alloc_local((8,), 'float32')\nT.copy(A, l)\nT.copy(l, B)"
    func = parse_source(_kernel(body))
    assert [s.buffer.shape for s in walk_stmts(func.body) if isinstance(s, N.Alloc)] == [(8,)]
    b = np.zeros(8, np.float32)
    tilecore.compile(func, target="reference")(np.arange(8, dtype=np.float32), b)
    np.testing.assert_array_equal(b, np.arange(8))


def test_a_parallel_loop_over_per_thread_values_runs_on_every_threads_copy():
    """A T.Parallel loop that reads or writes per-thread buffers (not a thread index) runs once per
    thread, on that thread's copies."""
    body = """
t = T.get_thread_binding()
loc = T.alloc_local((2,), "float32")
v = A[t]
for i in T.Parallel(2):
    loc[i] = v + i
B[t] = loc[0] * loc[1]
"""
    b = np.zeros(8, np.float32)
    tilecore.compile(parse_source(_kernel(body)), target="reference")(np.arange(8, dtype=np.float32), b)
    np.testing.assert_array_equal(b, np.arange(8.0) * (np.arange(8.0) + 1))


def hadamard(rows, n, threads):
    """A Walsh-Hadamard transform of each row: every thread owns n / threads consecutive elements,
    butterflies them in its own buffer, then exchanges with the partner thread through shared
    memory, one round per bit of the thread index (TileLang's example_hadamard, with shared
    memory in place of warp shuffles)."""
    te = n // threads
    in_thread, across = te.bit_length() - 1, threads.bit_length() - 1

    @T.prim_func
    def main(A: T.Tensor((rows, n), "float32"), B: T.Tensor((rows, n), "float32")):
        with T.Kernel(rows, threads=threads) as bx:
            local = T.alloc_local((te,), "float32")
            other = T.alloc_local((te,), "float32")
            exchange = T.alloc_shared((threads, te), "float32")
            tx = T.get_thread_binding(0)
            for i in T.serial(te):
                local[i] = A[bx, tx * te + i]
            for r in T.serial(in_thread):
                size = 1 << (r + 1)
                for j in T.serial(te // size):
                    for k in T.serial(size // 2):
                        lo = j * size + k
                        local[lo] = local[lo] + local[lo + size // 2]
                        local[lo + size // 2] = local[lo] - 2 * local[lo + size // 2]
            for r in T.serial(across):
                for j in T.serial(te):
                    exchange[tx, j] = local[j]
                    other[j] = exchange[tx ^ (1 << r), j]  # the partner's value: written one statement before
                for j in T.serial(te):
                    local[j] = T.if_then_else((tx >> r) & 1 == 0, local[j] + other[j], other[j] - local[j])
            for i in T.serial(te):
                B[bx, tx * te + i] = local[i]

    return main


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_hadamard_transform_exchanges_through_shared_memory(target):
    rows, n = 2, 32
    x = np.random.default_rng(5).integers(-4, 5, (rows, n)).astype(np.float32)
    h = np.array([[(-1) ** bin(a & b).count("1") for b in range(n)] for a in range(n)], np.float32)
    y = np.zeros_like(x)
    tilecore.compile(hadamard(rows, n, 8), target=target)(x, y)
    np.testing.assert_array_equal(y, x @ h)


def test_simt_plan_keeps_one_per_thread_scalar_on_each_thread():
    """On SIMT targets (tilecore/lowering, pure Python here) a per-thread accumulator is a register
    tile with one element on every thread, not chunks of 8 on an eighth of them."""
    from tilecore.lowering.simt_layout import StridedLayout
    from tilecore.lowering.simt_plan import plan_kernel

    plan = plan_kernel(gemv_naive(64, 32, 32, 8), 32)
    assert plan.storage["acc"] == "reg"
    layout = plan.layout["acc"]
    assert isinstance(layout, StridedLayout) and layout.per_thread == 1 and layout.local_size == 1
    assert StridedLayout.for_shape((32,), 32).vec == 8  # other tiles keep their vector chunks


def _cuda_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _simt_gpu_cases():
    """(name, PrimFunc, numpy inputs): per-thread kernels of this file, for the GPU run."""
    rng = np.random.default_rng(11)
    a, b, _ = _gemv_inputs(16, 32)
    eight = np.arange(8, dtype=np.float32)
    cases = [
        ("gemv_naive", gemv_naive(16, 32, 8, 8), [a, b, np.zeros(16, np.float16)]),
        ("gemv_split_k", gemv_split_k(16, 32, 8, 4, 4), [a, b, np.zeros(16, np.float16)]),
        (
            "dequant_gemm",
            dequant_gemm(16, 32, 32, 16, 32, 4),
            [
                rng.integers(-3, 4, (16, 32)).astype(np.float16),
                rng.integers(0, 16, (32, 32)).astype(np.int8),
                np.zeros((16, 32), np.float32),
            ],
        ),
        (
            "hadamard",
            hadamard(2, 32, 8),
            [rng.integers(-4, 5, (2, 32)).astype(np.float32), np.zeros((2, 32), np.float32)],
        ),
    ]
    for name, (body, _) in sorted(PROGRAMS.items()):
        cases.append((name, parse_source(_kernel(body, THREADS.get(name, "8"))), [eight, np.zeros(8, np.float32)]))
    for name, (body, _) in sorted(PER_THREAD_COPIES.items()):
        cases.append((name, parse_source(_kernel(body)), [eight, np.full(8, -1.0, np.float32)]))
    return cases


SIMT_GPU_CASES = [
    "gemv_naive",
    "gemv_split_k",
    "dequant_gemm",
    "hadamard",
    *sorted(PROGRAMS),
    *sorted(PER_THREAD_COPIES),
]


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_gpu(), reason="needs an NVIDIA GPU (run on the H200 / H100)")
@pytest.mark.parametrize("name", SIMT_GPU_CASES)
def test_per_thread_kernels_match_the_reference_on_the_gpu(name):
    """Each per-thread kernel of this file, compiled for cuda and run on the GPU, against the
    reference interpreter (the conformance idioms program covers one form per run); one test per
    kernel, so that a kernel that never ends is named by the run."""
    from tilecore.testing import assert_matches_reference, to_device

    func, inputs = next((f, i) for n, f, i in _simt_gpu_cases() if n == name)
    assert_matches_reference(func, [to_device(x, "cuda") for x in inputs], backend="cuda")
