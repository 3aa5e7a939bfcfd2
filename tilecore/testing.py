"""Test helpers for backend authors, also a pytest plugin (entry point `pytest11: tilecore`).

    from tilecore.testing import assert_matches_reference

    def test_my_kernel(tile_target):
        a = np.random.rand(64, 64).astype("float32")
        assert_matches_reference(my_factory(64), [a], backend=tile_target)

`assert_matches_reference` compiles the kernel for the backend and for
"reference" (the interpreter that defines the language), runs both on copies of
the inputs and compares every output, and every argument a kernel may have
written in place, with per-dtype tolerances (`TOLERANCES`).

pytest options and fixtures (named `--tilecore-*` so they never clash with the
conformance suite's `--tile-backend`):

* ``--tilecore-target=T`` (or env ``TILECORE_TEST_TARGET``): the target the
  `tile_target` fixture returns; default: tilecore's default target.
* ``tile_target``: that target string; ``tile_backend``: its
  `tilecore.plugin.Backend`; ``tile_rng``: a seeded `numpy.random.Generator`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .runtime.arrays import CUPY_SPACES, TORCH_DEVICES  # torch's device name per memory space

# dtype -> (rtol, atol). Floats: about 8 ulps of the output dtype's precision
# for short reductions, the numbers DESIGN.md sets for the examples (fp32 1e-5,
# fp16/bf16 1e-2); integers and bool compare exactly.
TOLERANCES: Dict[str, Tuple[float, float]] = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}


def tolerance(dtype: str) -> Tuple[float, float]:
    """(rtol, atol) used for outputs of `dtype` ((0, 0) for integers and bool)."""
    return TOLERANCES.get(str(dtype), (0.0, 0.0))


def to_numpy(array) -> np.ndarray:
    """A numpy copy of any supported array (torch on any device, cupy, DLPack)."""
    from .runtime import arrays

    if isinstance(array, np.ndarray):
        return array.copy()
    info = arrays.describe(array)
    if info.library == "torch":
        return arrays.as_numpy(array.detach().cpu()).copy()
    if info.library == "cupy":
        return array.get()
    return arrays.as_numpy(info.array).copy()


def to_device(array: np.ndarray, memory_space: str, library: str = "numpy"):
    """`array` (numpy) placed where a backend of `memory_space` takes its arguments.

    CPU memory: the array itself, or a torch tensor sharing it with `library="torch"`.
    Device memory: a torch tensor on that device (bfloat16 and fp8 through their bits), else a
    cupy array for CUDA/ROCm.
    """
    if memory_space == "cpu" and library != "torch":
        return array
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and (memory_space in TORCH_DEVICES or memory_space == "cpu"):
        host = np.ascontiguousarray(array)
        if host.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # through their bits
            bits = np.int16 if host.dtype.itemsize == 2 else np.uint8
            tensor = torch.from_numpy(host.view(bits)).view(getattr(torch, host.dtype.name))
        else:
            tensor = torch.from_numpy(host)
        return tensor.to(TORCH_DEVICES.get(memory_space, "cpu"))
    if memory_space in CUPY_SPACES:
        import cupy

        return cupy.asarray(array)
    raise ValueError(f"no array library here can place data in {memory_space} memory (install torch or cupy)")


def _copy_like(array):
    """A copy of `array` in its own library and device."""
    if isinstance(array, np.ndarray):
        return array.copy()
    if hasattr(array, "clone"):  # torch
        return array.clone()
    if hasattr(array, "copy"):  # cupy
        return array.copy()
    return to_numpy(array)


def _as_kernel_spec(func_or_kernel, out_idx):
    """(PrimFunc, out_idx) from a PrimFunc, a Kernel or a lazily compiled jit kernel."""
    from .ir.nodes import PrimFunc
    from .runtime.api import LazyKernel
    from .runtime.kernel import Kernel

    if isinstance(func_or_kernel, Kernel):
        return func_or_kernel.ir, (out_idx if out_idx is not None else list(func_or_kernel.out_idx))
    if isinstance(func_or_kernel, LazyKernel):
        k = func_or_kernel.compiled()
        return k.ir, (out_idx if out_idx is not None else list(k.out_idx))
    if isinstance(func_or_kernel, PrimFunc):
        return func_or_kernel, out_idx
    raise TypeError(f"expected a PrimFunc or a compiled Kernel, got {type(func_or_kernel).__name__}")


def _results(kernel, args) -> Tuple[Any, ...]:
    out = kernel(*args)
    if out is None:
        return ()
    return out if isinstance(out, tuple) else (out,)


def compare_arrays(
    name: str, got: np.ndarray, want: np.ndarray, dtype: str, rtol: Optional[float] = None, atol: Optional[float] = None
) -> Optional[str]:
    """None when `got` matches `want` within the tolerance for `dtype`, else a description."""
    d_rtol, d_atol = tolerance(dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != reference shape {want.shape}"
    g = got.astype(np.float64) if got.dtype != np.bool_ else got
    w = want.astype(np.float64) if want.dtype != np.bool_ else want
    if got.dtype == np.bool_ or (rtol == 0 and atol == 0):
        bad = ~((g == w) | (np.isnan(g) & np.isnan(w))) if g.dtype != np.bool_ else g != w
    else:
        bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else float("nan")
    return (
        f"{name} ({dtype}): {int(bad.sum())} of {bad.size} elements differ from the reference "
        f"beyond rtol={rtol}, atol={atol}; first at index {idx}: got {_scalar(got[idx])}, "
        f"reference {_scalar(want[idx])}; max abs difference {max_abs:.6g}"
    )


def _scalar(value) -> str:
    return str(value)  # numpy scalars print their shortest round-trip form in their own dtype


def assert_matches_reference(
    func_or_kernel,
    inputs: Sequence[Any],
    backend: Optional[str] = None,
    out_idx=None,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    **options,
):
    """Run a kernel on `backend` and on "reference" and assert the results agree.

    func_or_kernel: a PrimFunc, or a Kernel (e.g. what a @tilecore.jit factory
    returns; its out_idx is reused). inputs: the kernel's inputs (all
    parameters when there is no out_idx); each run gets its own copies, the
    reference run numpy copies. rtol/atol: override the per-dtype `TOLERANCES`.
    Returns the backend's outputs (one array, a tuple, or None as the kernel does).
    """
    from .runtime import api

    func, out_idx = _as_kernel_spec(func_or_kernel, out_idx)
    target = backend if backend is not None else api.default_target()
    kernel = api.compile(func, target=target, out_idx=out_idx, **options)
    reference = api.compile(func, target="reference", out_idx=out_idx)
    backend_args = [_copy_like(x) for x in inputs]
    reference_args = [to_numpy(x) for x in inputs]
    got = _results(kernel, backend_args)
    want = _results(reference, reference_args)
    problems = []
    for param, g, w in zip(kernel.outputs, got, want):
        problem = compare_arrays(f"output {param.name!r}", to_numpy(g), w, param.dtype, rtol, atol)
        if problem:
            problems.append(problem)
    for param, g, w in zip(kernel.inputs, backend_args, reference_args):
        problem = compare_arrays(f"argument {param.name!r} after the call", to_numpy(g), w, param.dtype, rtol, atol)
        if problem:
            problems.append(problem)
    if problems:
        raise AssertionError(
            f"kernel {func.name!r} on {kernel.target} does not match the reference:\n  " + "\n  ".join(problems)
        )
    if not got:
        return None
    return got[0] if len(got) == 1 else got


def hide_distribution(monkeypatch, name: str) -> None:
    """Make `importlib.metadata.version(name)` raise PackageNotFoundError for the rest of a test,
    as on a host where that distribution is not installed (e.g. a bundle host without apache-tvm)."""
    import importlib.metadata as md

    real = md.version

    def version(dist: str) -> str:
        if dist == name:
            raise md.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(md, "version", version)


# ---------------------------------------------------------------------- pytest plugin


def pytest_addoption(parser):
    """Add `--tilecore-target` (the target of the `tile_target` fixture)."""
    group = parser.getgroup("tilecore")
    group.addoption(
        "--tilecore-target",
        default=None,
        metavar="TARGET",
        help="target for the tile_target / tile_backend fixtures "
        "(default: $TILECORE_TEST_TARGET, else tilecore's default target)",
    )


try:
    import pytest

    _HAVE_PYTEST = True
except ImportError:  # pragma: no cover - helpers above work without pytest
    _HAVE_PYTEST = False

if _HAVE_PYTEST:

    @pytest.fixture
    def tile_target(request) -> str:
        """The target under test: --tilecore-target, $TILECORE_TEST_TARGET, or the default."""
        chosen = request.config.getoption("--tilecore-target", default=None) or os.environ.get("TILECORE_TEST_TARGET")
        if chosen:
            return chosen
        from .runtime import api

        return api.default_target()

    @pytest.fixture
    def tile_backend(tile_target):
        """The tilecore.plugin.Backend of `tile_target`."""
        from .plugin.registry import get_registry

        return get_registry().resolve(tile_target)[0]

    @pytest.fixture
    def tile_rng(request):
        """A numpy Generator seeded from the test's name (reproducible, distinct per test)."""
        import zlib

        return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def gemm_kernel(
    M=128,
    N=128,
    K=64,
    dtype="float16",
    accum="float32",
    transpose_A=False,
    transpose_B=False,
    block_M=64,
    block_N=64,
    block_K=32,
    threads=128,
    num_stages=2,
    out_dtype=None,
):
    """A tiled GEMM PrimFunc C = op(A) @ op(B) with partial tiles allowed, for backend tests.

    A is (K, M) when transpose_A else (M, K); B is (N, K) when transpose_B else (K, N); C is (M, N)
    in `out_dtype` (default `accum`), accumulated in `accum`. Plugin test suites share it instead
    of each writing their own.
    """
    import tilecore.language as T

    ta, tb = transpose_A, transpose_B
    bm, bn, bk = block_M, block_N, block_K

    @T.prim_func
    # T.Tensor(...) annotations are tile types the frontend reads, not Python types
    def main(
        A: T.Tensor((K, M) if ta else (M, K), dtype),  # type: ignore[valid-type]
        B: T.Tensor((N, K) if tb else (K, N), dtype),  # type: ignore[valid-type]
        C: T.Tensor((M, N), out_dtype or accum),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bk, bm) if ta else (bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=num_stages):
                if ta:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if tb:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=ta, transpose_B=tb)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def bfloat16_mul_add_kernel(n: int = 128):
    """`C = A * B + D` over bfloat16 vectors, one element per thread, for backend tests: the language
    rounds the product to bfloat16 before the addition (docs/semantics.md)."""
    import tilecore.language as T

    @T.prim_func
    def mul_add(
        A: T.Tensor((n,), "bfloat16"),  # type: ignore[valid-type]
        B: T.Tensor((n,), "bfloat16"),  # type: ignore[valid-type]
        D: T.Tensor((n,), "bfloat16"),  # type: ignore[valid-type]
        C: T.Tensor((n,), "bfloat16"),  # type: ignore[valid-type]
    ):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                C[i] = A[i] * B[i] + D[i]

    return mul_add


def while_loops_kernel(M: int = 32, N: int = 24, block_M: int = 16, threads: int = 128):
    """Two `while` loops, for backend tests (feature `while_loop`): each row of a block's tile is
    summed by a walk on an alloc_var counter that also ends after the first element below -1.5
    (Out); then the whole tile is halved while its first element exceeds 0.25, a test that reads
    shared memory the loop body writes (Scaled; Steps: how many halvings, per block); last Steps
    grows by 2 in a loop whose test reads the global element the body writes."""
    import tilecore.language as T

    bm = block_M

    @T.prim_func
    def while_loops(
        A: T.Tensor((M, N), "float32"),  # type: ignore[valid-type]
        Out: T.Tensor((M,), "float32"),  # type: ignore[valid-type]
        Scaled: T.Tensor((M, N), "float32"),  # type: ignore[valid-type]
        Steps: T.Tensor((M // bm,), "int32"),  # type: ignore[valid-type]
    ):
        with T.Kernel(M // bm, threads=threads) as bx:
            A_s = T.alloc_shared((bm, N), "float32")
            T.copy(A[bx * bm, 0], A_s)
            O_t = T.alloc_fragment((bm,), "float32")
            j = T.alloc_var("int32")
            lim = T.alloc_var("int32")
            for i in T.serial(bm):
                O_t[i] = 0.0
                j = 0
                lim = N
                while j < lim:
                    O_t[i] = O_t[i] + A_s[i, j]
                    if A_s[i, j] < -1.5:
                        lim = j + 1
                    j = j + 1
            T.copy(O_t, Out[bx * bm])
            k = T.alloc_var("int32")
            k = 0
            while A_s[0, 0] > 0.25:
                for r, c in T.Parallel(bm, N):
                    A_s[r, c] = A_s[r, c] * 0.5
                k = k + 1
            T.copy(A_s, Scaled[bx * bm, 0])
            Steps[bx] = k
            while Steps[bx] < k + 2:
                Steps[bx] = Steps[bx] + 1

    return while_loops


def while_loops_arguments(M: int = 32, N: int = 24, block_M: int = 16, seed: int = 0):
    """Arguments for `while_loops_kernel`: normal values times 3 (some rows stop early), each
    block's first element large enough for several halvings, outputs zeroed."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((M, N)) * 3).astype(np.float32)
    a[::block_M, 0] = np.linspace(5.0, 40.0, M // block_M, dtype=np.float32)
    return [a, np.zeros(M, np.float32), np.zeros((M, N), np.float32), np.zeros(M // block_M, np.int32)]


def per_thread_while_kernel(blocks: int = 2, threads: int = 64, cap: int = 64):
    """`while` loops whose trip count differs between threads, for backend tests (feature
    `parallel_while`): each thread counts the Collatz steps of its element of A (at most `cap`;
    Steps), with a thread-dependent `if` in the loop, and leaves its last value in its slot of a
    shared buffer that the next statement reads from the neighbouring thread (Next: a barrier after
    the loop, none inside it); then a T.Parallel over 16 elements halves each one while it is
    above 7, every iteration its own loop (Halved)."""
    import tilecore.language as T

    n_elems = blocks * threads

    @T.prim_func
    def per_thread_while(
        A: T.Tensor((n_elems,), "int32"),  # type: ignore[valid-type]
        Steps: T.Tensor((n_elems,), "int32"),  # type: ignore[valid-type]
        Next: T.Tensor((n_elems,), "int32"),  # type: ignore[valid-type]
        Halved: T.Tensor((blocks, 16), "int32"),  # type: ignore[valid-type]
    ):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_var("int32")
            n = T.alloc_var("int32")
            last = T.alloc_shared((threads,), "int32")
            x = A[bx * threads + tx]
            n = 0
            last[tx] = -7
            while x > 1 and n < cap:
                if x % 2 == 0:
                    x = x // 2
                else:
                    x = 3 * x + 1
                n += 1
                last[tx] = x
            Steps[bx * threads + tx] = n
            Next[bx * threads + tx] = last[(tx + 1) % threads]
            h = T.alloc_fragment((16,), "int32")
            for i in T.Parallel(16):
                h[i] = A[bx * threads + i]
                while h[i] > 7:
                    h[i] = h[i] // 2
                Halved[bx, i] = h[i]

    return per_thread_while


def assert_per_thread_while_matches_reference(backend: str, memory_space: str) -> None:
    """`per_thread_while_kernel` run on `backend` (its arguments in `memory_space`, e.g. "cuda")
    against the reference interpreter."""
    args = [to_device(x, memory_space) for x in per_thread_while_arguments()]
    assert_matches_reference(per_thread_while_kernel(), args, backend=backend)


def per_thread_while_arguments(blocks: int = 2, threads: int = 64, seed: int = 0):
    """Arguments for `per_thread_while_kernel`: elements from -3 to 999 (trip counts from 0 to the
    cap), outputs filled with -1."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 1000, blocks * threads).astype(np.int32)
    n = blocks * threads
    return [a, np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.full((blocks, 16), -1, np.int32)]


# ---------------------------------------------------------------------- fp8 conversions

FP8_ROW = 256  # elements per row of `fp8_conversion_kernel`: one row per block


def fp8_conversion_kernel(rows: int, src: str, dst: str, threads: int = 128):
    """Out1 = T.cast(A, dst) element by element and Out2 the same by tile copies through fragments
    (global -> fragment -> fragment of `dst` -> global), over (rows, FP8_ROW) tensors."""
    import tilecore.language as T

    @T.prim_func
    def convert(
        A: T.Tensor((rows, FP8_ROW), src),  # type: ignore[valid-type]
        Out1: T.Tensor((rows, FP8_ROW), dst),  # type: ignore[valid-type]
        Out2: T.Tensor((rows, FP8_ROW), dst),  # type: ignore[valid-type]
    ):
        with T.Kernel(rows, threads=threads) as bx:
            for j in T.Parallel(FP8_ROW):
                Out1[bx, j] = T.cast(A[bx, j], dst)
            a = T.alloc_fragment((1, FP8_ROW), src)
            o = T.alloc_fragment((1, FP8_ROW), dst)
            T.copy(A[bx, 0], a)
            T.copy(a, o)
            T.copy(o, Out2[bx, 0])

    return convert


def fp8_conversion_inputs(src: str, dst: str) -> np.ndarray:
    """(rows, FP8_ROW) values of `src` where a conversion into or out of fp8 can go wrong: out of
    fp8 every bit pattern; into fp8 `dst` every bit pattern of a 16-bit `src`, else every fp8 value,
    every midpoint of two neighbours (a tie) and the `src` values on either side of it, the
    overflow thresholds and specials (and for float64 values past a tie by less than float32 sees)."""
    from .interp.dtypes import NUMPY_DTYPES

    if src in ("float8_e4m3fn", "float8_e5m2"):
        values = np.arange(256, dtype=np.uint8).view(NUMPY_DTYPES[src])
    elif src in ("float16", "bfloat16"):
        values = np.arange(1 << 16, dtype=np.uint16).view(NUMPY_DTYPES[src])
    else:
        wide = NUMPY_DTYPES[src].type
        fp8 = np.arange(256, dtype=np.uint8).view(NUMPY_DTYPES[dst]).astype(np.float64)
        fp8 = np.unique(fp8[np.isfinite(fp8)])
        mids = ((fp8[1:] + fp8[:-1]) / 2).astype(wide)
        top, step = float(fp8[-1]), float(fp8[-1] - fp8[-2])
        extra = np.array([top + step / 2, top + step, 2 * top, np.inf, np.nan, 1e30, 2.0**-30], wide)
        parts = [mids, np.nextafter(mids, wide(np.inf)), np.nextafter(mids, wide(-np.inf)), fp8.astype(wide), extra]
        if src == "float64":
            parts.append(mids * (1 + 2.0**-40))
        values = np.concatenate(parts)
        values = np.concatenate([values, -values]).astype(wide)
    pad = -values.size % FP8_ROW
    return np.concatenate([values, np.zeros(pad, values.dtype)]).reshape(-1, FP8_ROW)


def assert_same_bits(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    """Bit for bit, except NaN payloads, which the language leaves unspecified: a NaN matches any
    NaN, of the same sign when `dtype` is fp8 (a conversion into fp8 keeps a NaN's sign)."""
    with np.errstate(invalid="ignore"):
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w64)
    assert np.array_equal(np.isnan(g64), nan), (
        f"NaN where the reference has none at {np.argwhere(np.isnan(g64) != nan)[:4]}"
    )
    if dtype in ("float8_e4m3fn", "float8_e5m2"):
        assert np.array_equal(np.signbit(g64[nan]), np.signbit(w64[nan])), "a NaN lost its sign"
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    bad = np.argwhere((got.view(bits) != want.view(bits)) & ~nan)
    assert bad.size == 0, [(_scalar(want[tuple(i)]), _scalar(got[tuple(i)])) for i in bad[:8]]


def assert_fp8_conversion_matches_reference(src: str, dst: str, backend: str) -> None:
    """Convert `fp8_conversion_inputs(src, dst)` on `backend` and on the reference interpreter with
    `fp8_conversion_kernel` and assert both outputs are the same bits (`assert_same_bits`)."""
    from .runtime import api

    a = fp8_conversion_inputs(src, dst)
    func = fp8_conversion_kernel(a.shape[0], src, dst)
    kernel = api.compile(func, target=backend, out_idx=[1, 2])
    space = kernel.backend.capabilities.memory_space
    got = kernel(to_device(a, space, "numpy" if space == "cpu" else "torch"))
    want = api.compile(func, target="reference", out_idx=[1, 2])(a)
    for g, w in zip(got, want):
        assert_same_bits(to_numpy(g), np.asarray(w), dst)


def pack_int4(values):
    """The packed int8 array a kernel takes for an int4 tensor of `values` (numpy or torch integers
    in -8..7, even last dimension): value 2j of a row in the low nibble of byte j, value 2j + 1 in
    its high nibble (docs/semantics.md "int4"; TileLang's `pack_int4` packs the same way)."""
    if values.shape[-1] % 2:
        raise ValueError(f"int4 values are packed in pairs along the last dimension, got shape {tuple(values.shape)}")
    if isinstance(values, np.ndarray):
        wide = values.astype(np.int16)
        return ((wide[..., 0::2] & 0x0F) | ((wide[..., 1::2] & 0x0F) << 4)).astype(np.uint8).view(np.int8)
    import torch  # a torch tensor: packed on its device

    wide = values.to(torch.int16)
    return ((wide[..., 0::2] & 0x0F) | ((wide[..., 1::2] & 0x0F) << 4)).to(torch.uint8).view(torch.int8)
