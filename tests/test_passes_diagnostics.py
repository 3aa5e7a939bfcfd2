"""Pass-level diagnostics (issue 2, item 10) on kernels written in the DSL.

Type errors surface when `@T.prim_func` parses (the frontend calls
check_types.check); backend limits and features surface in `tilecore.compile`
for a backend that declares them. Each test asserts the message and the line.
"""

from __future__ import annotations

import inspect

import pytest

from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError

T = pytest.importorskip("tilecore.language")
pytest.importorskip("tilecore.frontend.parser")

TINY = "tinyhw"


def line_of(marker: str, fn) -> int:
    """The file line of the first source line of `fn` containing `marker`."""
    lines, start = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if marker in text:
            return start + offset
    raise AssertionError(marker)


@pytest.fixture
def tiny_backend():
    """A backend declaring 16 KiB of shared memory and no T.cumsum, registered as a real plugin."""
    from tilecore.ir.types import DTYPES
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES
    from tilecore.plugin import Backend, Capabilities, ToolchainStatus, hookimpl, register_plugin, unregister_plugin

    class TinyPlugin:
        @hookimpl
        def tilecore_register_backends(self, register):
            register(
                Backend(
                    name=TINY,
                    targets=(TINY,),
                    ir_versions=(TILE_IR_VERSION,),
                    capabilities=Capabilities(
                        features=ALL_FEATURES - {"cumsum"},
                        dtypes=frozenset(DTYPES),
                        max_shared_memory=16 * 1024,
                        max_fragment_memory=64 * 1024,
                    ),
                    toolchain_status=lambda: ToolchainStatus(True, "ok"),
                    version="0",
                )
            )

    name = register_plugin(TinyPlugin(), name="test-passes-tinyhw")
    yield TINY
    unregister_plugin(name)


def test_gemm_dtype_mismatch_at_parse():
    def build():
        @T.prim_func
        def main(C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 32), "float16")
                B_s = T.alloc_shared((32, 64), "float32")
                C_f = T.alloc_fragment((64, 64), "float32")
                T.gemm(A_s, B_s, C_f)  # the culprit
                T.copy(C_f, C)

        return main

    with pytest.raises(TileCompileError) as info:
        build()
    assert info.value.message == (
        "T.gemm dtype mismatch: A (A_s) is float16 but B (B_s) is float32; both inputs must have the same dtype"
    )
    assert info.value.span.line == line_of("the culprit", build)
    assert "^" in str(info.value)


def test_gemm_accumulator_dtype_at_parse():
    def build():
        @T.prim_func
        def main(C: T.Tensor((64, 64), "int8")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 32), "int8")
                B_s = T.alloc_shared((32, 64), "int8")
                C_f = T.alloc_fragment((64, 64), "int8")
                T.gemm(A_s, B_s, C_f)  # the culprit
                T.copy(C_f, C)

        return main

    with pytest.raises(TileCompileError) as info:
        build()
    assert "int8 inputs accumulate in int32 or int64" in info.value.message
    assert info.value.span.line == line_of("the culprit", build)


def test_constant_index_out_of_range_at_parse():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8, 32), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((8, 32), "float32")
                T.copy(A, A_s)
                A[0, 0] = A_s[8, 0]  # the culprit

        return main

    with pytest.raises(TileCompileError) as info:
        build()
    assert info.value.message == "index 8 is out of range for dimension 0 of A_s (size 8)"
    assert info.value.span.line == line_of("the culprit", build)


def test_tile_op_inside_parallel_at_parse():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((64,), "float32")
                for i in T.Parallel(64):
                    T.copy(A, S)  # the culprit

        return main

    with pytest.raises(TileCompileError) as info:
        build()
    assert "T.copy is a tile operation and cannot appear inside T.Parallel" in info.value.message
    assert info.value.span.line == line_of("the culprit", build)


def gemm_kernel(block_M, block_N, block_K):
    @T.prim_func
    def main(
        A: T.Tensor((256, 256), "float32"), B: T.Tensor((256, 256), "float32"), C: T.Tensor((256, 256), "float32")
    ):
        with T.Kernel(T.ceildiv(256, block_N), T.ceildiv(256, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float32")
            B_s = T.alloc_shared((block_K, block_N), "float32")  # second shared buffer
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(256, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def test_shared_memory_over_the_backend_limit(tiny_backend):
    import tilecore

    func = gemm_kernel(64, 64, 32)  # A_s 8 KiB + B_s 8 KiB = 16 KiB: fits exactly
    tilecore.runtime.api.lower(func, target=tiny_backend)
    func = gemm_kernel(64, 128, 32)  # A_s 8 KiB + B_s 16 KiB = 24 KiB
    with pytest.raises(TileCompileError) as info:
        tilecore.compile(func, target=tiny_backend, out_idx=[-1])
    err = info.value
    assert err.message.startswith(
        "shared memory over the limit: the kernel needs 24576 bytes but backend tinyhw allows 16384 bytes per block"
    )
    assert err.span.line == line_of("second shared buffer", gemm_kernel)


def test_unsupported_feature_names_backend_and_feature(tiny_backend):
    import tilecore

    def build():
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=32) as bx:
                F = T.alloc_fragment((16, 16), "float32")
                T.copy(A, F)
                T.cumsum(F, F, dim=1)  # the culprit
                T.copy(F, A)

        return main

    with pytest.raises(UnsupportedFeatureError) as info:
        tilecore.compile(build(), target=tiny_backend)
    assert info.value.message == "backend tinyhw does not support T.cumsum"
    assert info.value.span.line == line_of("the culprit", build)
