"""A kernel grid that is one whole GEMM (tile_cpu.gemm_grid): which kernels it recognizes, and
its results against the reference interpreter for every operand dtype and every remainder
(rows per task, row blocks, K chunks, column blocks)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_gemm_cases import NP, gemm, gemm_with_epilogue, matmul_rows_first, operand_maker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tile_cpu.gemm import MicroTile
from tile_cpu.gemm_grid import column_blocks, task_shape
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.lowering.whole_gemm import WholeGemm, match
from tilecore.runtime.api import lower
from tilecore.testing import assert_matches_reference

RNG = np.random.default_rng(23)
rand = operand_maker(RNG)


def kernel_of(func):
    """The T.Kernel of `func` after the cpu pass pipeline (bounds proven, copies marked)."""
    lowered, _ = lower(func, target="cpu")
    return next(st for st in walk_stmts(lowered.body) if isinstance(st, N.Kernel))


# ------------------------------------------------------------------ what is recognized


@pytest.mark.parametrize("dtype,accum", [("float32", "float32"), ("bfloat16", "float32"), ("int8", "int32")])
def test_examples_gemm_grid_is_one_whole_gemm(dtype, accum):
    plan = match(kernel_of(gemm(256, 192, 96, 64, 64, 32, dtype, accum)))
    assert plan is not None
    assert (plan.M, plan.N, plan.K, plan.acc) == (256, 192, 96, accum)
    assert (plan.a.name, plan.b.name, plan.c.name) == ("A", "B", "C")


def test_grid_axes_and_copy_order_do_not_matter():
    plan = match(kernel_of(matmul_rows_first(128, 64, 64, 32, 32, 16)))
    assert plan is not None and (plan.M, plan.N, plan.K) == (128, 64, 64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_c_sums_all_of_k_in_registers_and_rounds_once(dtype):
    """examples/gemm.py's default: float16 in and out, float32 accumulation. K (544) is more than one
    L1 chunk, yet the sums must not pass through C: one chunk, rounded to C's dtype once."""
    M, N, K = 96, 64, 544
    f = matmul_rows_first(M, N, K, 32, 32, 32, dtype, dtype)
    plan = match(kernel_of(f))
    assert plan is not None and plan.acc == "float32" and plan.c.dtype == dtype
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    got = assert_matches_reference(f, [a, b], backend="cpu", out_idx=[-1]).astype(np.float64)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # rounded once: within half an ulp of C's dtype (plus float32 summation error); a partial sum
    # rounded to C's dtype at each of the 3 K chunks would be off by more
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(got), 1e-30))) - {"float16": 10, "bfloat16": 7}[dtype])
    assert np.all(np.abs(got - exact) <= 0.5 * ulp + 1e-4)


@pytest.mark.parametrize(
    "func,why",
    [
        (matmul_rows_first(200, 200, 200, 64, 64, 32, spare_row=True), "a block row past C"),
        (gemm(128, 128, 64, 64, 64, 32, "float16", "float16"), "the accumulator tile in float16"),
        (matmul_rows_first(128, 128, 64, 64, 64, 32, "int8", "int8"), "int32 sums stored into int8"),
        (gemm(128, 128, 64, 64, 64, 32, ta=True), "transposed A"),
        (gemm(128, 128, 64, 64, 64, 32, tb=True), "transposed B"),
        (gemm_with_epilogue(128, 128, 64, 64, 64, 32, in_loop=False), "an epilogue on the accumulator"),
        (gemm_with_epilogue(128, 128, 64, 64, 64, 32, in_loop=True), "a statement in the K loop"),
    ],
)
def test_other_kernels_lower_block_by_block(func, why):
    assert match(kernel_of(func)) is None, why


def test_partial_tile_grid_is_one_whole_gemm():
    """examples/gemm.py at 200^3 with 64 x 64 x 32 tiles: the edge tiles' copies are predicated."""
    kernel = kernel_of(gemm(200, 200, 200, 64, 64, 32))
    assert any(isinstance(st, N.Copy) and st.predicated for st in walk_stmts(kernel.body))
    plan = match(kernel)
    assert plan is not None and (plan.M, plan.N, plan.K) == (200, 200, 200)


def test_column_blocks_cover_n_once():
    assert column_blocks(2000, 256, 16) == [(0, 7, 256, 16), (1792, 1, 208, 16)]
    assert column_blocks(200, 192, 16) == [(0, 1, 192, 16), (192, 1, 8, 8)]
    assert column_blocks(5, 0, 16) == [(0, 1, 5, 5)]


def test_tasks_are_even_and_b_blocks_fit_l2(monkeypatch):
    import tile_cpu.gemm_grid as gemm_grid

    tile = MicroTile(6, 2, 8)
    caches = {"l1": 32 * 1024, "l2": 512 * 1024, "l3": 1 << 25}
    plan = WholeGemm(*(N.Buffer(n, (2048, 2048), "float32") for n in "ABC"), 2048, 2048, 2048, "float32")
    mc, nc = task_shape(tile, plan, 256, caches, cores=2)
    assert (mc, nc) == (512, 256)  # 4 tasks of 512 rows (85 blocks of 6 and one of 2); 256 x 256 fp32 = half of L2
    ragged = WholeGemm(*(N.Buffer(n, (2000, 2000), "float32") for n in "ABC"), 2000, 2000, 2000, "float32")
    assert task_shape(tile, ragged, 256, caches, cores=2) == (500, 80)  # 125 full panels: blocks of 5
    narrow = WholeGemm(*(N.Buffer(n, (64, 5), "float32") for n in "ABC"), 64, 5, 64, "float32")
    assert task_shape(tile, narrow, 64, caches, cores=2)[1] == 0  # no full panel: only the narrow one
    mc, nc = task_shape(tile, plan, 256, caches, cores=64)
    assert mc >= 8 * 6 and 32 <= -(-2048 // mc) <= 64  # a task per core, >= 8 blocks each
    monkeypatch.setattr(gemm_grid, "WHOLE_BLOCK_TASKS", True)
    assert task_shape(tile, plan, 256, caches, cores=2)[0] == 516  # 516, 516, 516 and 500 rows


# ------------------------------------------------------------------ results


def test_every_remainder_matches_reference():
    """100 rows: 2 tasks of 50 rows on AVX2 (8 blocks of 6 and one of 2); K 610 (a partial K tile): chunks of
    256, 256 and 98; 100 columns (a partial column tile): a B block of 6 panels, a 4-column panel."""
    M, N, K = 100, 100, 610
    f = gemm(M, N, K, 20, 32, 40)
    assert match(kernel_of(f)) is not None
    assert_matches_reference(f, [rand((M, K), "float32"), rand((K, N), "float32")], backend="cpu", out_idx=[-1])


def test_tasks_ending_in_a_partial_block_match_reference(monkeypatch):
    """290 rows: 3 tasks of 97, 97 and 96 rows on AVX-512 (8 blocks of 12, then one of 1 or none),
    4 of 73, 73, 73 and 71 on AVX2: each task's A panels start after the previous task's partial one.
    K chunks of 32 and B blocks of one panel, so that the panels a task packed in a chunk's first
    column block are read again after the joins of the next ones (tasks sharing a panel would
    overwrite each other's rows there)."""
    import tile_cpu.gemm_grid as gemm_grid

    monkeypatch.setenv("TILECORE_CACHE", "0")
    monkeypatch.setattr(gemm_grid, "DYNAMIC_ROWS", 0)  # static tasks (units of whole blocks otherwise)
    own_shape = gemm_grid.task_shape
    monkeypatch.setattr(gemm_grid, "grid_k_chunk", lambda tile, M, K, acc_bytes, caches: 32)
    monkeypatch.setattr(gemm_grid, "task_shape", lambda tile, *a: (own_shape(tile, *a)[0], tile.nr))
    M, N, K = 290, 64, 96
    f = gemm(M, N, K, 32, 32, 32)
    assert match(kernel_of(f)) is not None
    assert_matches_reference(f, [rand((M, K), "float32"), rand((K, N), "float32")], backend="cpu", out_idx=[-1])


@pytest.mark.parametrize(
    "dtype,accum",
    [
        ("float32", "float32"),
        ("float16", "float32"),
        ("bfloat16", "float32"),
        ("int8", "int32"),
        ("float64", "float64"),
    ],
)
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    tiles=st.tuples(st.sampled_from([8, 16, 48]), st.sampled_from([16, 32]), st.sampled_from([8, 32])),
    counts=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
)
def test_whole_gemm_matches_reference(dtype, accum, tiles, counts):
    """Converted panels (float16/bfloat16 -> float32, int8 -> int32 exactly) through the same kernel."""
    (bm, bn, bk), (gm, gn, gk) = tiles, counts
    M, N, K = bm * gm, bn * gn, bk * gk
    f = gemm(M, N, K, bm, bn, bk, dtype, accum)
    assert match(kernel_of(f)) is not None
    exact = {"rtol": 0, "atol": 0} if dtype == "int8" else {}
    assert_matches_reference(f, [rand((M, K), dtype), rand((K, N), dtype)], backend="cpu", out_idx=[-1], **exact)


def test_c_is_written_before_it_is_read():
    """The first K chunk starts the accumulators at 0: C's old contents (NaN here) never leak in."""
    import tilecore

    M, N, K = 96, 64, 544  # three K chunks
    kernel = tilecore.compile(gemm(M, N, K, 32, 32, 32), target="cpu")
    a, b = rand((M, K), "float32"), rand((K, N), "float32")
    c = np.full((M, N), np.nan, dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype,c_dtype", [("float32", "float32"), ("bfloat16", "bfloat16")])
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    tiles=st.tuples(st.sampled_from([8, 24]), st.sampled_from([16, 32]), st.sampled_from([8, 16])),
    shape=st.tuples(st.integers(1, 60), st.integers(1, 50), st.integers(1, 40)),
)
def test_partial_tiles_give_the_block_by_block_results_exactly(dtype, c_dtype, tiles, shape):
    """Ragged M, N and K: bit for bit what the block-by-block lowering of the same grid computes
    (C prefilled with NaN: every element is written, and only from in-range products)."""
    import tilecore

    (bm, bn, bk), (M, N, K) = tiles, shape
    whole, blockwise = (matmul_rows_first(M, N, K, bm, bn, bk, dtype, c_dtype, spare) for spare in (False, True))
    assert match(kernel_of(whole)) is not None and match(kernel_of(blockwise)) is None
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    results = []
    for f in (whole, blockwise):
        c = np.full((M, N), np.nan, dtype=NP[c_dtype])
        tilecore.compile(f, target="cpu")(a, b, c)
        results.append(c)
    np.testing.assert_array_equal(
        results[0].view(np.uint16 if c_dtype == "bfloat16" else np.uint32),
        results[1].view(np.uint16 if c_dtype == "bfloat16" else np.uint32),
    )
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(results[0].astype(np.float64), exact, rtol=2e-2, atol=2e-2)


def test_partial_tiles_with_an_epilogue_lower_block_by_block():
    f = gemm_with_epilogue(70, 50, 40, 32, 32, 16, in_loop=False)
    assert match(kernel_of(f)) is None
    a, b = rand((70, 40), "float32"), rand((40, 50), "float32")
    got = assert_matches_reference(f, [a, b], backend="cpu", out_idx=[-1])
    assert got.min() >= 0  # the ReLU ran


def test_b_is_packed_once_for_all_tasks(monkeypatch):
    """B's block is packed by a parallel loop over its panels, outside the tasks' loop, and each
    task packs only its own rows of A, right before it uses them: when every task packed all of
    B, a 16-core host copied B 16 times per GEMM."""
    import re

    import tile_cpu.lower as cpu_lower
    import tilecore

    monkeypatch.setenv("TILECORE_CACHE", "0")  # lower for real, not from the compile cache
    made = []
    real = cpu_lower.gemm_grid.lower
    monkeypatch.setattr(cpu_lower.gemm_grid, "lower", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    tilecore.compile(gemm(256, 128, 64, 64, 64, 32), target="cpu", out_idx=[-1])
    assert len(made) == 1 and made[0] is not None

    # TVM 0.27's Python API has no TIR visitor: read the TVMScript, a parallel loop's body being
    # the lines indented deeper than its `for`
    lines = str(made[0]).splitlines()
    parallel = {}  # loop variable -> names of the buffers its body stores to
    for i, line in enumerate(lines):
        loop = re.match(r"(\s*)for (\w+) in T\.parallel\(", line)
        if not loop:
            continue
        depth, stores = len(loop.group(1)), set()
        for inner in lines[i + 1 :]:
            if len(inner) - len(inner.lstrip()) <= depth:
                break
            store = re.match(r"\s*([A-Za-z]+)_\d+\[.*\] = ", inner) or re.match(r"\s*([A-Z])\[.*\] = ", inner)
            if store:
                stores.add(store.group(1))
        parallel[loop.group(2)] = stores

    tasks = {v: st for v, st in parallel.items() if v.startswith("task")}
    assert tasks
    assert all("Bpack" not in st for st in tasks.values())
    # each task packs its own rows of A, in the same parallel loop that then uses them (no join
    # between packing A and the micro-kernels)
    assert any("Apack" in st and len(st) > 1 for st in tasks.values())
    assert {"Apack"} not in tasks.values()
    assert {"Bpack"} in [st for v, st in parallel.items() if v not in tasks]  # B's panels, in parallel


@pytest.mark.parametrize(
    "sync,rows_outer,ahead,rotate,dyn,whole",
    [  # every value of each switch once (CI time: two compiles of the grid)
        ("barrier", False, 8, True, 0, True),
        ("launch", True, 0, False, 2, False),
    ],
)
def test_sync_and_loop_order_keep_every_bit(monkeypatch, sync, rows_outer, ahead, rotate, dyn, whole):
    """One parallel launch with barriers between the phases (SYNC "barrier"), BLIS's loop order
    (ROWS_OUTER False), prefetches of the streamed panels (PREFETCH_K), tasks that start at
    different B panels (ROTATE_PANELS), rows taken in units from an atomic counter (DYNAMIC_ROWS;
    each phase then its own launch) and tasks of whole register blocks (WHOLE_BLOCK_TASKS) change
    neither the work nor any element's summation order: bit for bit the default's results, at every
    remainder (2 tasks of 50 rows, or of 54 and 46 in whole blocks, or 17 or 9 units of 6 or 12 rows
    on AVX2, the last short; 3 K chunks; a 4-column panel). With barriers the
    library launches the thread pool once and syncs it with TVM's barrier."""
    import tile_cpu.gemm_grid as gemm_grid
    import tilecore

    monkeypatch.setenv("TILECORE_CACHE", "0")  # the knobs are not part of the cache key
    M, N, K = 100, 100, 610
    f = gemm(M, N, K, 20, 32, 40)
    a, b = rand((M, K), "float32"), rand((K, N), "float32")
    want = tilecore.compile(f, target="cpu", out_idx=[-1])(a, b)
    monkeypatch.setattr(gemm_grid, "SYNC", sync)
    monkeypatch.setattr(gemm_grid, "ROWS_OUTER", rows_outer)
    monkeypatch.setattr(gemm_grid, "PREFETCH_K", ahead)
    monkeypatch.setattr(gemm_grid, "ROTATE_PANELS", rotate)
    monkeypatch.setattr(gemm_grid, "DYNAMIC_ROWS", dyn)
    monkeypatch.setattr(gemm_grid, "WHOLE_BLOCK_TASKS", whole)
    kernel = tilecore.compile(f, target="cpu", out_idx=[-1])
    np.testing.assert_array_equal(kernel(a, b).view(np.uint32), want.view(np.uint32))
    ir = kernel.source
    launches = len(re.findall(r"load [^\n]*@__TVMBackendParallelLaunch", ir))
    barriers = len(re.findall(r"load [^\n]*@__TVMBackendParallelBarrier", ir))
    if sync == "barrier" and not dyn:
        assert launches == 1 and barriers > 0
    else:
        assert launches > 1 and barriers == 0
