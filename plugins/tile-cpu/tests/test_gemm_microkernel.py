"""The packed GEMM path: results against the reference interpreter, the ISA's register block,
and the instructions LLVM selects for CPUs that are not this host (cross-compilation).

The compile-tier tests build `examples/gemm.py`-style kernels for `cpu:znver3` (AVX2 + FMA),
`cpu:sapphirerapids` (AVX-512) and `cpu:neoverse-v2` (AArch64) with TVM's LLVM and read the
assembly: the micro-kernel must use the ISA's vector registers, its FMA form, and as many
distinct accumulator registers as the register block has vectors.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_gemm_cases import gemm, gemm_with_epilogue, operand_maker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tile_cpu.fuse import buffer_mentions, fuse_operand_copies
from tile_cpu.gemm import MicroTile, cache_blocks, micro_tile
from tilecore.diagnostics import TileCompileError, TileRuntimeError
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.runtime.api import lower
from tilecore.testing import assert_matches_reference

RNG = np.random.default_rng(19)
rand = operand_maker(RNG)

# ------------------------------------------------------------------ results
# (test_cpu_backend.test_gemm_matches_reference draws shapes, tiles, dtypes and transposes)


@pytest.mark.parametrize("dtype,accum", [("float32", "float32"), ("bfloat16", "float32"), ("int8", "int32")])
def test_cache_blocked_gemm_matches_reference(dtype, accum):
    """A 600-deep K tile splits into L1-sized chunks (256, 256, 88) and 300 rows into L2-sized ones."""
    M, N, K = 300, 40, 600
    f = gemm(M, N, K, 300, 40, 600, dtype, accum)
    assert_matches_reference(f, [rand((M, K), dtype), rand((K, N), dtype)], backend="cpu", out_idx=[-1])


INT_BOUND = {"int8": 127, "int16": 1000, "int32": 1000}  # K <= 96 products stay inside the accumulator


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    tile=st.tuples(st.sampled_from([1, 2, 4, 32]), st.sampled_from([1, 2, 32]), st.sampled_from([1, 2, 8])).filter(
        lambda t: min(t) <= 2
    ),
    dtypes=st.sampled_from([("int8", "int32"), ("int16", "int32"), ("int32", "int32"), ("int16", "int64")]),
    ta=st.booleans(),
    tb=st.booleans(),
    extra=st.tuples(*[st.integers(0, 1)] * 3),
)
def test_integer_gemm_with_unit_and_pair_tiles_is_exact(tile, dtypes, ta, tb, extra):
    """Tiles with an extent of 1 or 2 (a 32 x 1 transposed A tile once lost its unit axis: 'T.gemm
    needs 2-D tiles') compile and match the reference bit-exactly, for every transpose."""
    bm, bn, bk = tile
    dtype, accum = dtypes
    M, N, K = (b * 2 + e for b, e in zip(tile, extra))  # a partial last tile when e == 1 and b > 1
    f = gemm(M, N, K, bm, bn, bk, dtype, accum, ta, tb)
    lim = INT_BOUND[dtype]
    a = RNG.integers(-lim, lim + 1, size=(K, M) if ta else (M, K)).astype(dtype)
    b = RNG.integers(-lim, lim + 1, size=(N, K) if tb else (K, N)).astype(dtype)
    assert_matches_reference(f, [a, b], backend="cpu", out_idx=[-1], rtol=0, atol=0)


def test_gemm_of_3d_stage_buffers_with_a_unit_axis_is_exact():
    """(M, 1, K) x (1, K, N) stage buffers multiply over their non-unit axes on cpu and in the
    reference interpreter alike (the interpreter once required the unit axes to lead)."""
    M, N, K = 8, 16, 4

    @T.prim_func
    def main(A: T.Tensor((M, K), "int16"), B: T.Tensor((K, N), "int16"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(1, 1, threads=32) as (bx, by):
            A_s = T.alloc_shared((M, 1, K), "int16")
            B_s = T.alloc_shared((1, K, N), "int16")
            C_f = T.alloc_fragment((M, N), "int32")
            T.copy(A, A_s[:, 0, :])
            T.copy(B, B_s[0, :, :])
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            T.copy(C_f, C)

    a = RNG.integers(-1000, 1001, size=(M, K)).astype(np.int16)
    b = RNG.integers(-1000, 1001, size=(K, N)).astype(np.int16)
    got = assert_matches_reference(main, [a, b], backend="cpu", out_idx=[-1], rtol=0, atol=0)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


def copies_left_in_main_loop(func):
    """T.copy statements of the pipelined loop after fuse_operand_copies (the cpu pass pipeline's IR)."""
    lowered, _ = lower(func, target="cpu")
    loop = next(st for st in walk_stmts(lowered.body) if isinstance(st, N.For) and st.kind == "pipelined")
    fused = fuse_operand_copies(loop.body, buffer_mentions(lowered.body))
    return [st for st in fused if isinstance(st, N.Copy)]


@pytest.mark.parametrize(
    "dtype,accum,kept", [("float32", "float32", 1), ("bfloat16", "float32", 0), ("int8", "int32", 0)]
)
def test_staged_operands_are_read_from_the_tensor(dtype, accum, kept):
    """Whole-tile copies only the gemm reads: B's always go, A's where A is packed (converted) anyway."""
    f = gemm(128, 192, 96, 64, 64, 32, dtype, accum)  # every copy proven in bounds
    assert len(copies_left_in_main_loop(f)) == kept
    assert_matches_reference(f, [rand((128, 96), dtype), rand((96, 192), dtype)], backend="cpu", out_idx=[-1])


def test_staging_tile_read_elsewhere_keeps_its_copy():
    """B_s is read again after the gemm (an epilogue in the K loop): its staging copy must stay."""
    f = gemm_with_epilogue(64, 64, 48, 32, 32, 16, in_loop=True)
    assert len(copies_left_in_main_loop(f)) == 2
    assert_matches_reference(f, [rand((64, 48), "float32"), rand((48, 64), "float32")], backend="cpu", out_idx=[-1])


def test_cache_blocks_follow_the_caches():
    tile = MicroTile(6, 2, 8)
    caches = {"l1": 32 * 1024, "l2": 512 * 1024, "l3": 1 << 25}
    assert cache_blocks(tile, 64, 32, 4, caches) == (32, 64)  # the user's tile fits: no blocking
    kc, mc = cache_blocks(tile, 1024, 600, 4, caches)
    assert kc * tile.nr * 4 <= caches["l1"] // 2 < (kc + 1) * tile.nr * 4
    assert mc % tile.mr == 0 and mc * kc * 4 <= caches["l2"] // 2


# ------------------------------------------------------------------ register blocks


@pytest.mark.parametrize(
    "bits,regs,acc,mr,nr",
    [
        (256, 16, "float32", 6, 16),  # AVX2 + FMA: 12 of 16 ymm accumulate
        (512, 32, "float32", 12, 32),  # AVX-512: 24 of 32 zmm
        (128, 32, "float32", 8, 12),  # NEON: 24 of 32 q registers
        (256, 16, "float64", 6, 8),
        (512, 32, "int32", 12, 32),
    ],
)
def test_register_block_fits_the_register_file(bits, regs, acc, mr, nr):
    tile = micro_tile(bits, regs, acc)
    assert (tile.mr, tile.nr) == (mr, nr)
    # accumulators + one k's B vectors + a broadcast A value fit the register file
    assert tile.mr * tile.nr_vec + tile.nr_vec + 1 <= regs


# ------------------------------------------------------------------ cross-compilation

ISAS = {
    # target: (FMA instruction pattern whose destination is an accumulator, vector register, accumulators)
    "cpu:znver3": (r"vfmadd231ps\s+%ymm\d+, %ymm\d+, (%ymm\d+)", "ymm", 12),
    "cpu:sapphirerapids": (r"vfmadd231ps\s+%zmm\d+, %zmm\d+, (%zmm\d+)", "zmm", 24),
    "cpu:neoverse-v2": (r"fmla\s+(v\d+)\.4s, v\d+\.4s, v\d+\.(?:4s|s\[\d\])", "v", 24),
}


@pytest.mark.parametrize("shape", [(256, 256, 256, 64, 64, 32), (192, 96, 256, 64, 32, 32)])
@pytest.mark.parametrize("target", sorted(ISAS))
def test_micro_kernel_instruction_selection(target, shape):
    """fp32 GEMMs: the micro-kernel's FMAs on the ISA's vectors, one accumulator per vector. Both
    grids are whole GEMMs (tile_cpu.gemm_grid); N = 96 is a multiple of every ISA's register block
    width (12, 16, 32), so the second lowers as one whole GEMM on all three; N = 256 is not one of
    NEON's 12 and lowers block by block there."""
    fma, reg, accumulators = ISAS[target]
    kernel = tilecore.compile(gemm(*shape), target=target, out_idx=[-1], source="asm")
    asm = kernel.source
    dests = set(re.findall(fma, asm))
    assert len(dests) >= accumulators, f"{target}: {len(dests)} accumulator registers in the FMAs"
    if target == "cpu:znver3":
        assert "zmm" not in asm  # no AVX-512 on Zen 3
    if target == "cpu:sapphirerapids":
        assert "%zmm" in asm


def test_cross_compiled_kernel_refuses_to_run_here():
    kernel = tilecore.compile(gemm(64, 64, 64, 64, 64, 32), target="cpu:neoverse-v2", out_idx=[-1])
    assert (
        "fmla"
        in tilecore.compile(gemm(64, 64, 64, 64, 64, 32), target="cpu:neoverse-v2", out_idx=[-1], source="asm").source
    )
    with pytest.raises(TileRuntimeError, match="cpu:neoverse-v2.*cannot run"):
        kernel(rand((64, 64), "float32"), rand((64, 64), "float32"))


@pytest.mark.parametrize(
    "target,message",
    [
        ("cpu:pentium-9000", "knows no CPU named 'pentium-9000'"),
        ("cpu:znver3,avx512f", "must start with \\+ or -"),
        ("cpu:znver3,+not-a-feature", "does not know the feature"),
    ],
)
def test_bad_cpu_targets_are_clear_errors(target, message):
    with pytest.raises(TileCompileError, match=message):
        tilecore.compile(gemm(64, 64, 64, 64, 64, 32), target=target, out_idx=[-1])


def test_explicit_features_change_the_instruction_selection():
    """x86-64-v3 (AVX2) plus +avx512f: the same kernel on zmm registers."""
    asm = tilecore.compile(
        gemm(128, 128, 128, 64, 64, 32), target="cpu:x86-64-v3,+avx512f", out_idx=[-1], source="asm"
    ).source
    assert re.search(ISAS["cpu:sapphirerapids"][0], asm)
