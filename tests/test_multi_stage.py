"""Several T.Kernel blocks in one prim_func, sharing T.alloc_global scratch (TileLang's split
kernels): stages run in order, each seeing the global writes of the ones before it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileError
from tilecore.frontend.parser import parse_source
from tilecore.ir.printer import to_source
from tilecore.ir.serialize import dumps, loads


def split_sum(rows: int, cols: int, parts: int):
    """Stage 0 writes partial row sums of `parts` column chunks to scratch; stage 1 adds them."""
    chunk = cols // parts

    @T.prim_func
    def row_sums(A: T.Tensor((rows, cols), "float32"), Out: T.Tensor((rows,), "float32")):
        partial = T.alloc_global((rows, parts), "float32")
        with T.Kernel(parts, rows) as (p, r):
            acc = T.alloc_var("float32", init=0)
            for j in T.serial(chunk):
                acc = acc + A[r, p * chunk + j]
            partial[r, p] = acc
        with T.Kernel(1) as bx:
            tile = T.alloc_fragment((rows, parts), "float32")
            total = T.alloc_fragment((rows,), "float32")
            T.copy(partial, tile)
            T.reduce_sum(tile, total, dim=1)
            T.copy(total, Out[0])

    return row_sums


@pytest.mark.parametrize("target", ["reference", "cpu"])
@settings(max_examples=4, deadline=None)
@given(rows=st.integers(1, 6), parts=st.integers(1, 4), chunk=st.integers(1, 5), seed=st.integers(0, 99))
def test_stages_see_the_scratch_the_stage_before_wrote(target, rows, parts, chunk, seed):
    a = np.random.default_rng(seed).standard_normal((rows, parts * chunk)).astype(np.float32)
    kernel = tilecore.compile(split_sum(rows, parts * chunk, parts), target=target, out_idx=[-1])
    np.testing.assert_allclose(kernel(a), a.sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_a_later_stage_reads_what_an_earlier_one_wrote_to_a_parameter(target):
    @T.prim_func
    def twice(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(4) as bx:
            for i in T.Parallel(4):
                B[bx * 4 + i] = A[bx * 4 + i] + 1
        with T.Kernel(4) as bx:
            for i in T.Parallel(4):
                C[bx * 4 + i] = B[(bx * 4 + i + 1) % 16] * 2  # another block's stage-0 write

    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    c = tilecore.compile(twice, target=target, out_idx=[-1])(a, b)
    assert b.tolist() == (a + 1).tolist()
    assert c.tolist() == (np.roll(a + 1, -1) * 2).tolist()


def test_printed_and_serialized_forms_round_trip():
    func = split_sum(4, 8, 2)
    text = to_source(func)
    assert 'T.alloc_global((4, 2), "float32")' in text and text.count("T.Kernel(") == 2
    assert parse_source(text) == func
    assert loads(dumps(func)) == func


def test_each_stage_is_a_single_kernel_function_taking_the_scratch():
    stages = split_sum(4, 8, 2).split_stages()
    assert [s.name for s in stages] == ["row_sums__stage0", "row_sums__stage1"]
    assert all(len(s.body) == 1 and not s.is_multi_stage for s in stages)
    assert [p.name for p in stages[0].params] == ["A", "Out", "partial"]


def test_alloc_global_inside_a_kernel_is_an_error_at_its_line():
    text = (
        "import tilecore.language as T\n\n@T.prim_func\n"
        'def k(A: T.Tensor((8,), "float32")):\n'
        "    with T.Kernel(1) as bx:\n"
        '        s = T.alloc_global((8,), "float32")\n'
    )
    with pytest.raises(TileCompileError, match="must come before the `with T.Kernel") as err:
        parse_source(text)
    assert ":6:" in str(err.value)


def test_a_shared_buffer_outside_the_kernels_is_still_an_error():
    text = (
        "import tilecore.language as T\n\n@T.prim_func\n"
        'def k(A: T.Tensor((8,), "float32")):\n'
        '    s = T.alloc_shared((8,), "float32")\n'
        "    with T.Kernel(1) as bx:\n"
        "        A[0] = 1.0\n"
    )
    with pytest.raises(TileCompileError, match="must be inside `with T.Kernel"):
        parse_source(text)


def test_lowering_a_multi_stage_function_names_the_stages():
    with pytest.raises(TileError, match="one stage at a time"):
        tilecore.lower(split_sum(4, 8, 2), target="reference")


def test_cuda_compiles_every_stage():
    pytest.importorskip("tile_cuda")
    from tile_cuda import toolchain

    if toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None:
        pytest.skip("no nvcc / NVRTC here")
    kernel = tilecore.compile(split_sum(64, 128, 4), target="cuda:sm_80", out_idx=[-1])
    assert (
        kernel.artifact.meta["stages"] == ["row_sums__stage0", "row_sums__stage1"]
        or len(kernel.artifact.meta["stages"]) == 2
    )
    assert kernel.source.count("// ---- stage") == 2
