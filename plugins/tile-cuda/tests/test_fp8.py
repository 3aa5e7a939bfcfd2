"""fp8 on cuda (docs/semantics.md "fp8"): the generated CUDA text at the compile tier here, and on a
GPU host every fp8 bit pattern's conversions and fp8 GEMMs against the reference interpreter."""

import ml_dtypes
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tile_cuda import plugin, toolchain
from tilecore.plugin.backend import TileModule
from tilecore.testing import gemm_kernel

needs_compiler = pytest.mark.skipif(
    toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None, reason="no nvcc / NVRTC here"
)

FP8 = ("float8_e4m3fn", "float8_e5m2")
WIDTH = 256  # elements per row of the conversion kernels: one row per block


def conversion_kernel(rows: int, src: str, dst: str):
    """Out1 = T.cast(A, dst) element by element; Out2 = the same by tile copies through fragments."""

    @T.prim_func
    def convert(
        A: T.Tensor((rows, WIDTH), src), Out1: T.Tensor((rows, WIDTH), dst), Out2: T.Tensor((rows, WIDTH), dst)
    ):
        with T.Kernel(rows, threads=128) as bx:
            for j in T.Parallel(WIDTH):
                Out1[bx, j] = T.cast(A[bx, j], dst)
            a = T.alloc_fragment((1, WIDTH), src)
            o = T.alloc_fragment((1, WIDTH), dst)
            T.copy(A[bx, 0], a)
            T.copy(a, o)
            T.copy(o, Out2[bx, 0])

    return convert


def fp8_gemm_kernel(M: int, N: int, K: int, dtype: str, out_dtype: str, transpose_B: bool = False):
    """C = A @ B with fp8 operands in shared tiles (a pipelined loop), accumulated in float32."""
    return gemm_kernel(M, N, K, dtype, "float32", transpose_B=transpose_B, out_dtype=out_dtype)


def codegen(func):
    be = plugin.make_backend()
    return plugin.tilecore_codegen(backend=be, module=TileModule(func, "cuda:sm_90a"), options={})


@needs_compiler
def test_fp8_is_held_as_bytes_and_converted_by_our_own_code():
    art = codegen(conversion_kernel(2, "float32", "float8_e4m3fn"))
    assert "__nv_fp8" not in art.source and "cuda_fp8" not in art.source  # no saturating library conversion
    assert "uchar* __restrict__ Out1_ptr" in art.source
    assert art.blobs["cubin"][:4] == b"\x7fELF"


def test_fp8_gemm_takes_the_portable_float32_dot_product():
    from tile_cuda.compiler import generate_source

    src = generate_source(fp8_gemm_kernel(64, 64, 64, "float8_e5m2", "float32"), "sm_90a", {})[0]
    body = src[src.index('extern "C" __global__') :]
    assert "mma" not in body and "tc::gemm" not in body and "__nv_fp8" not in src


# ---- execute tier: the values against the reference interpreter


def _torch(a):
    import torch

    if a.dtype.name in FP8 or a.dtype.name == "bfloat16":
        bits = np.uint8 if a.dtype.itemsize == 1 else np.uint16
        return torch.from_numpy(a.view(bits)).view(getattr(torch, a.dtype.name)).cuda()
    return torch.from_numpy(a).cuda()


def _numpy(t, dtype: str):
    import torch

    if dtype in FP8 or dtype == "bfloat16":
        bits = torch.uint8 if dtype in FP8 else torch.uint16
        return t.view(bits).cpu().numpy().view(np.dtype(getattr(ml_dtypes, dtype)))
    return t.cpu().numpy()


def _run_both(func, arrays, out_idx, dtypes):
    ref = tilecore.compile(func, target="reference", out_idx=out_idx)(*arrays)
    got = tilecore.compile(func, target="cuda", out_idx=out_idx)(*[_torch(a) for a in arrays])
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    got = got if isinstance(got, (list, tuple)) else [got]
    return [np.asarray(r) for r in ref], [_numpy(g, d) for g, d in zip(got, dtypes)]


def _same_bits(got, ref, dtype: str):
    """Bit-exact, except that NaN payloads are not specified (docs/semantics.md): any NaN of the
    right sign matches a NaN; a conversion into fp8 keeps the sign of a NaN."""
    with np.errstate(invalid="ignore"):
        g64, r64 = got.astype(np.float64), ref.astype(np.float64)
    nan = np.isnan(r64)
    assert np.array_equal(np.isnan(g64), nan), np.flatnonzero(np.isnan(g64) != nan)[:8]
    if dtype in FP8:
        assert np.array_equal(np.signbit(g64[nan]), np.signbit(r64[nan]))
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = np.flatnonzero((got.view(bits) != ref.view(bits)) & ~nan)
    assert bad.size == 0, [(float(ref.flat[i]), float(got.flat[i])) for i in bad[:8]]


def _rows(values: np.ndarray) -> np.ndarray:
    """`values` padded with zeros to whole rows of WIDTH."""
    pad = -values.size % WIDTH
    return np.concatenate([values, np.zeros(pad, values.dtype)]).reshape(-1, WIDTH)


def _into_fp8_inputs(src: str, fp8: str) -> np.ndarray:
    """Values of `src` where rounding into `fp8` can go wrong: every fp8 value, every midpoint of
    two neighbours (ties) and the `src` values next to it, the overflow thresholds, specials, and
    for 16-bit sources every bit pattern."""
    if src in ("float16", "bfloat16"):
        return np.arange(1 << 16, dtype=np.uint16).view(np.dtype(getattr(ml_dtypes, src, src)))
    wide = np.float32 if src == "float32" else np.float64
    values = np.arange(256, dtype=np.uint8).view(np.dtype(getattr(ml_dtypes, fp8))).astype(np.float64)
    values = np.unique(values[np.isfinite(values)])
    mids = ((values[1:] + values[:-1]) / 2).astype(wide)
    top = float(values[-1])
    step = top - float(values[-2])
    extra = np.array([top + step / 2, top + step, 2 * top, np.inf, np.nan, 1e30, 2.0**-30], wide)
    near = [mids, np.nextafter(mids, wide(np.inf)), np.nextafter(mids, wide(-np.inf)), values.astype(wide), extra]
    if src == "float64":  # one rounding from float64: a value just past a tie in float64 only
        near.append((mids.astype(np.float64) * (1 + 2.0**-40)).astype(wide))
    out = np.concatenate(near)
    return np.concatenate([out, -out]).astype(wide)


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", FP8)
def test_every_fp8_bit_pattern_converts_like_the_interpreter_on_the_gpu(fp8):
    bits = np.tile(np.arange(256, dtype=np.uint8), WIDTH // 256 * 2).view(np.dtype(getattr(ml_dtypes, fp8)))
    a = _rows(bits)
    for dst in ("float16", "bfloat16", "float32", "float64", [d for d in FP8 if d != fp8][0]):
        ref, got = _run_both(conversion_kernel(a.shape[0], fp8, dst), [a], [1, 2], [dst, dst])
        for r, g in zip(ref, got):
            _same_bits(g, r, dst)


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("src", ("float16", "bfloat16", "float32", "float64"))
def test_rounding_into_fp8_matches_the_interpreter_on_the_gpu(src, fp8):
    a = _rows(_into_fp8_inputs(src, fp8))
    ref, got = _run_both(conversion_kernel(a.shape[0], src, fp8), [a], [1, 2], [fp8, fp8])
    for r, g in zip(ref, got):
        _same_bits(g, r, fp8)


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", FP8)
def test_fp8_gemm_matches_the_interpreter_on_the_gpu(fp8):
    rng = np.random.default_rng(83)
    M, N, K = 128, 96, 160
    np_fp8 = np.dtype(getattr(ml_dtypes, fp8))
    a = rng.uniform(-3, 3, (M, K)).astype(np_fp8)
    b = rng.uniform(-3, 3, (K, N)).astype(np_fp8)
    (ref,), (got,) = _run_both(fp8_gemm_kernel(M, N, K, fp8, "float32"), [a, b], -1, ["float32"])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=K * 9 * 2.0**-22)
    # small integers: every partial sum is exact, so the final rounding into fp8 is bit-exact
    a = rng.integers(-4, 5, (M, K)).astype(np_fp8)
    b = rng.integers(-4, 5, (K, N)).astype(np_fp8)
    b = b.T.copy()  # (N, K): B transposed
    (ref,), (got,) = _run_both(fp8_gemm_kernel(M, N, K, fp8, fp8, transpose_B=True), [a, b], -1, [fp8])
    _same_bits(got, ref, fp8)
