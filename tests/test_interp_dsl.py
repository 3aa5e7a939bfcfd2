"""The interpreter on kernels written in the DSL, compiled through tilecore.compile(target="reference")."""

from __future__ import annotations

import inspect
import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileError, TileRuntimeError

RNG = np.random.default_rng(7)


def ref_kernel(func, out_idx=None):
    return tilecore.compile(func, target="reference", out_idx=out_idx)


def rand(shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def line_of(func, marker: str) -> int:
    """The file line of the first source line of `func` containing `marker`."""
    lines, start = inspect.getsourcelines(func)
    for k, text in enumerate(lines):
        if marker in text:
            return start + k
    raise AssertionError(marker)


def test_elementwise_with_partial_tiles_and_math():
    M, N, bm, bn = 100, 70, 32, 32

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], t)
            for i, j in T.Parallel(bm, bn):
                t[i, j] = T.sigmoid(t[i, j]) * T.exp(t[i, j]) + T.sqrt(T.abs(t[i, j]))
            T.copy(t, B[by * bm, bx * bn])

    a = rand((M, N))
    b = ref_kernel(main, out_idx=[-1])(a)
    x = a.astype(np.float64)
    np.testing.assert_allclose(b, 1 / (1 + np.exp(-x)) * np.exp(x) + np.sqrt(np.abs(x)), rtol=1e-6)


def test_gemm_transposed_operands_from_dsl():
    M, N, K = 48, 40, 24

    @T.prim_func
    def main(A: T.Tensor((K, M), "float32"), B: T.Tensor((N, K), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a_s = T.alloc_shared((K, M), "float32")
            b_s = T.alloc_shared((N, K), "float32")
            c_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, c_f, transpose_A=True, transpose_B=True, clear_accum=True)
            T.copy(c_f, C)

    a, b = rand((K, M)), rand((N, K))
    c = ref_kernel(main, out_idx=[-1])(a, b)
    np.testing.assert_allclose(c, a.T.astype(np.float64) @ b.T, rtol=1e-5, atol=1e-6)


def test_reductions_cumsum_and_fill_from_dsl():
    M, N = 16, 24

    @T.prim_func
    def main(
        A: T.Tensor((M, N), "float32"),
        S: T.Tensor((M,), "float32"),
        X: T.Tensor((N,), "float32"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            x = T.alloc_fragment((N,), "float32")
            T.copy(A, a)
            T.fill(s, 1.0)
            T.reduce_sum(a, s, dim=1, clear=False)
            T.reduce_absmax(a, x, dim=0)
            T.cumsum(a, dim=1, reverse=True)
            T.copy(s, S)
            T.copy(x, X)
            T.copy(a, C)

    a = rand((M, N))
    s, x, c = ref_kernel(main, out_idx=[1, 2, 3])(a)
    np.testing.assert_allclose(s, 1 + a.astype(np.float64).sum(1), rtol=1e-6)
    np.testing.assert_array_equal(x, np.abs(a).max(0))
    np.testing.assert_allclose(c, np.flip(np.cumsum(np.flip(a.astype(np.float64), 1), 1), 1), rtol=1e-5, atol=1e-6)


def test_atomic_add_histogram_across_blocks():
    n, bins, block = 1000, 16, 128

    @T.prim_func
    def main(V: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    T.atomic_add(H[V[bx * block + i] % bins], 1)

    v = RNG.integers(0, 1000, n).astype(np.int32)
    h = np.zeros(bins, np.int32)
    ref_kernel(main)(v, h)
    np.testing.assert_array_equal(h, np.bincount(v % bins, minlength=bins))


def test_atomic_max_tile_form():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), O: T.Tensor((8,), "float32")):
        with T.Kernel(4) as bx:
            row = T.alloc_fragment((8,), "float32")
            T.copy(A[bx, 0:8], row)
            T.atomic_max(O, row)

    a = rand((4, 8))
    o = np.full(8, -10.0, np.float32)
    ref_kernel(main)(a, o)
    np.testing.assert_array_equal(o, a.max(0))


def test_runtime_if_serial_loop_and_alloc_var():
    n = 12

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), O: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_var("float32")
            acc = 0.0
            for k in T.serial(n):
                if A[k] > 0:
                    acc = acc + A[k]
            O[0] = acc

    a = rand(n)
    o = np.zeros(1, np.float32)
    ref_kernel(main)(a, o)
    np.testing.assert_allclose(o[0], a[a > 0].sum(), rtol=1e-6)


def test_dynamic_shape_kernel():
    m = T.dynamic("m")
    block = 32

    @T.prim_func
    def main(A: T.Tensor((m, 8), "float32"), B: T.Tensor((m, 8), "float32")):
        with T.Kernel(T.ceildiv(m, block)) as bx:
            t = T.alloc_shared((block, 8), "float32")
            T.copy(A[bx * block, 0], t)
            for i, j in T.Parallel(block, 8):
                t[i, j] = t[i, j] * 3.0
            T.copy(t, B[bx * block, 0])

    kernel = ref_kernel(main, out_idx=[-1])
    for rows in (1, 33, 90):
        a = rand((rows, 8))
        np.testing.assert_array_equal(kernel(a), a * np.float32(3))


def test_if_then_else_casts_and_bfloat16_store():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "bfloat16"), C: T.Tensor((64,), "int8")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                B[i] = T.if_then_else(A[i] > 0, A[i], -A[i] * 2.0)
                C[i] = T.cast(A[i] * 100.0, "int8")

    a = rand(64)
    b, c = ref_kernel(main, out_idx=[1, 2])(a)
    np.testing.assert_array_equal(b, np.where(a > 0, a, -a * np.float32(2)).astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(c, (a * np.float32(100)).astype(np.int8))


def test_print_from_dsl(capsys):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(2) as bx:
            T.print(bx * 10, msg="block")

    ref_kernel(main)(np.zeros(4, np.float32))
    assert capsys.readouterr().out.splitlines() == ["[block (0,)] block: 0", "[block (1,)] block: 10"]


def test_element_index_out_of_bounds_reports_the_users_line():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = A[i + 1] * 2.0  # OOB-LINE

    kernel = ref_kernel(main)
    with pytest.raises(TileRuntimeError) as info:
        kernel(rand(16), np.zeros(16, np.float32))
    text = str(info.value)
    line = line_of(main_source_holder(), "# OOB-LINE")
    assert f"{__file__}:{line}:" in text
    assert "A[16]" in text and "shape (16,)" in text
    assert "B[i] = A[i + 1] * 2.0" in text and "^" in text


def main_source_holder():
    return test_element_index_out_of_bounds_reports_the_users_line


def test_reference_backend_is_registered_with_every_feature():
    from tilecore.language.features import ALL_FEATURES
    from tilecore.plugin.registry import get_registry

    backend = get_registry().get("reference")
    assert backend is not None
    assert backend.capabilities.features == ALL_FEATURES | {
        "while_loop",
        "parallel_while",
    }  # and the opt-in while loops
    assert backend.capabilities.memory_space == "cpu"
    status = backend.toolchain_status()
    assert status.ok and status.summary.startswith(f"numpy {np.__version__}, ml_dtypes")
    others = [b for b in get_registry().backends.values() if b.name != "reference"]
    assert all(backend.priority < b.priority for b in others)


def test_reference_artifact_holds_the_ir_and_dsl_source():
    from tilecore.ir import serialize

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] + 1.0

    kernel = ref_kernel(main, out_idx=[-1])
    assert "@T.prim_func" in kernel.source
    a = rand(8)
    np.testing.assert_array_equal(kernel(a), a + np.float32(1))
    from tilecore.interp.plugin import make_backend, tilecore_codegen
    from tilecore.plugin.backend import TileModule

    art = tilecore_codegen(backend=make_backend(), module=TileModule(main, "reference"), options={})
    assert serialize.loads(art.meta["ir"]) == main


def test_launcher_runs_in_place_on_torch_tensors_including_bfloat16():
    torch = pytest.importorskip("torch")

    @T.prim_func
    def main(A: T.Tensor((4, 6), "bfloat16"), B: T.Tensor((4, 6), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(4, 6):
                B[i, j] = A[i, j] * 2.0
                A[i, j] = A[i, j] + 1.0

    a = torch.randn(4, 6, dtype=torch.bfloat16)
    a0 = a.clone()
    b = ref_kernel(main, out_idx=[1])(a)
    assert isinstance(b, torch.Tensor)
    torch.testing.assert_close(b, a0.float() * 2)
    torch.testing.assert_close(a, (a0.float() + 1).bfloat16())


def test_compile_errors_are_not_interpreter_errors():
    # Sanity: a bad kernel is rejected by the compile flow before the interpreter sees it.
    with pytest.raises(TileError):

        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((4,), "float32")
                T.copy(A[0:8], s)

        ref_kernel(main)


def test_launcher_accepts_any_cpu_dlpack_object_and_runs_in_place():
    from tilecore.interp.plugin import make_backend, tilecore_codegen, tilecore_launcher
    from tilecore.plugin.backend import TileModule

    @T.prim_func
    def main(A: T.Tensor((3, 5), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(3, 5):
                A[i, j] = A[i, j] * 2.0 + 1.0

    class Wrapped:
        """A foreign array type that only speaks DLPack."""

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    backend = make_backend()
    artifact = tilecore_codegen(backend=backend, module=TileModule(main, "reference"), options={})
    launch = tilecore_launcher(backend=backend, artifact=artifact)
    a = rand((3, 5))
    expect = a * np.float32(2) + np.float32(1)
    launch([Wrapped(a)], {})
    np.testing.assert_array_equal(a, expect)


def test_reference_run_time_error_from_a_cached_artifact_still_quotes_the_line():
    from tilecore.interp.plugin import make_backend, tilecore_codegen, tilecore_launcher
    from tilecore.ir import serialize
    from tilecore.plugin.backend import Artifact, TileModule

    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            A[bx + 4] = 1.0  # STORE-OOB

    backend = make_backend()
    artifact = tilecore_codegen(backend=backend, module=TileModule(main, "reference"), options={})
    # what the disk cache gives another process: the JSON of the metadata, nothing in memory
    reloaded = Artifact(
        backend=artifact.backend,
        target=artifact.target,
        entry=artifact.entry,
        source=artifact.source,
        meta=json.loads(json.dumps(artifact.meta)),
    )
    assert serialize.loads(reloaded.meta["ir"]).source == main.source
    launch = tilecore_launcher(backend=backend, artifact=reloaded)
    with pytest.raises(TileRuntimeError, match=r"A\[4\]") as info:
        launch([np.zeros(4, np.float32)], {})
    assert "A[bx + 4] = 1.0  # STORE-OOB" in str(info.value)


def test_hints_unroll_local_buffers_and_more_math_from_dsl():
    n = 32

    @T.prim_func
    def main(
        A: T.Tensor((n,), "float32"),
        I: T.Tensor((n,), "uint8"),
        O: T.Tensor((n,), "float32"),
        R: T.Tensor((4,), "float32"),
    ):
        with T.Kernel(1) as bx:
            T.use_swizzle(panel_size=4)
            a = T.alloc_shared((n,), "float32")
            loc = T.alloc_local((4,), "float32")
            T.annotate_layout({a: T.make_swizzled_layout(a)})
            T.copy(A, a)
            for i in T.Parallel(n):
                O[i] = (
                    T.pow(T.abs(a[i]), 1.5)
                    + T.floor(a[i] * 4.0)
                    - T.ceil(a[i])
                    + T.log2(T.abs(a[i]) + 1.0)
                    + T.cast(I[i], "float32") / 255.0
                )
            for k in T.unroll(4):
                loc[k] = a[k] * 10.0
            T.copy(loc, R)

    a = rand(n)
    u = RNG.integers(0, 256, n).astype(np.uint8)
    o, r = np.zeros(n, np.float32), np.zeros(4, np.float32)
    ref_kernel(main)(a, u, o, r)
    x = a.astype(np.float64)
    expect = np.abs(x) ** 1.5 + np.floor(x * 4) - np.ceil(x) + np.log2(np.abs(x) + 1) + u / 255.0
    np.testing.assert_allclose(o, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, a[:4] * np.float32(10), rtol=1e-7)


def test_min_and_abssum_reductions_atomic_min_and_bool_tensors_from_dsl():
    M, N = 8, 12

    @T.prim_func
    def main(
        A: T.Tensor((M, N), "float32"),
        Mn: T.Tensor((M,), "float32"),
        S: T.Tensor((N,), "float32"),
        G: T.Tensor((1,), "float32"),
        P: T.Tensor((M, N), "bool"),
    ):
        with T.Kernel(2) as bx:
            a = T.alloc_fragment((M, N), "float32")
            mn = T.alloc_fragment((M,), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(A, a)
            T.reduce_min(a, mn, dim=1)
            T.reduce_abssum(a, s, dim=0)
            T.copy(mn, Mn)
            T.copy(s, S)
            for i in T.Parallel(M):
                T.atomic_min(G[0], mn[i] - bx)
            for i, j in T.Parallel(M, N):
                P[i, j] = a[i, j] > 0 and i != j

    a = rand((M, N))
    mn, s, g, p = np.zeros(M, np.float32), np.zeros(N, np.float32), np.zeros(1, np.float32), np.zeros((M, N), bool)
    ref_kernel(main)(a, mn, s, g, p)
    np.testing.assert_array_equal(mn, a.min(1))
    np.testing.assert_allclose(s, np.abs(a.astype(np.float64)).sum(0), rtol=1e-6)
    assert g[0] == min(0.0, a.min() - 1)
    np.testing.assert_array_equal(p, (a > 0) & ~np.eye(M, N, dtype=bool))


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=4))
@example([8, 3, 6])
def test_one_program_on_buffers_of_several_shapes_in_turn(lengths):
    """Loads and stores indexed by bare T.Parallel variables (the interpreter keeps their slice
    per buffer shape): each call sees its own arguments' shapes, a masked store writes only where
    the mask holds, and a call whose buffers are shorter than the loop is an out-of-bounds error
    at the first statement, never a silently shorter slice."""
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1):
            for i in T.Parallel(6):
                B[i] = A[i] * 2.0  # BARE-STORE
            for i in T.Parallel(6):
                if A[i] > 0:
                    B[i] = A[i]

    kernel = ref_kernel(main)
    for length in lengths:
        a, b = rand(length), np.full(length, 7.0, np.float32)
        if length < 6:
            with pytest.raises(TileRuntimeError, match=r"index out of bounds: A\[\d+\](.|\n)*BARE-STORE"):
                kernel(a, b)
            continue
        kernel(a, b)
        want = np.full(length, 7.0, np.float32)
        want[:6] = np.where(a[:6] > 0, a[:6], a[:6] * np.float32(2))
        np.testing.assert_array_equal(b, want)
