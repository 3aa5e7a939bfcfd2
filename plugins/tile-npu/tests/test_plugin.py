"""The npu backend as tilecore sees it: discovery, declared capabilities, honest refusals."""

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tile_npu.plugin import UNSUPPORTED
from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
from tilecore.language.features import ALL_FEATURES
from tilecore.plugin.registry import get_registry


def test_registered_with_toolchain_and_device():
    b = get_registry().backends["npu"]
    assert b.distribution == "tile-npu"
    st = b.toolchain_status()
    assert st.ok and "simulated NPU" in st.device
    assert b.device_present()


def test_declares_the_whole_language_except_64_bit_types():
    caps = get_registry().backends["npu"].capabilities
    assert set(ALL_FEATURES) - set(caps.features) == set(UNSUPPORTED) == {"dtype:float64", "dtype:int64"}
    assert ("int8", "int32") in caps.gemm_dtypes and ("float16", "float32") in caps.gemm_dtypes
    assert "float64" not in caps.dtypes


def test_float64_kernel_is_refused_at_its_line():
    @T.prim_func
    def f(X: T.Tensor((4,), "float64"), Y: T.Tensor((4,), "float64")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                Y[i] = X[i] * 2.0

    with pytest.raises(UnsupportedFeatureError, match="does not support dtype.float64"):
        tilecore.compile(f, target="npu", out_idx=[-1])


def test_gemm_format_the_matrix_engine_lacks_is_a_compile_error():
    @T.prim_func
    def f(A: T.Tensor((16, 16), "int16"), B: T.Tensor((16, 16), "int16"), C: T.Tensor((16, 16), "int32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 16), "int16")
            b = T.alloc_shared((16, 16), "int16")
            c = T.alloc_fragment((16, 16), "int32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C[0, 0])

    with pytest.raises(TileCompileError) as ei:
        tilecore.compile(f, target="npu", out_idx=[-1])
    assert "int16" in str(ei.value) and "T.gemm(a, b, c" in str(ei.value)


def test_compile_options_reconfigure_the_hardware():
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(4) as bx:
            x = T.alloc_shared((16, 64), "float32")
            T.copy(X[bx * 16, 0], x)
            T.copy(x, Y[bx * 16, 0])

    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    import tile_npu

    one = tilecore.compile(f, target="npu", out_idx=[-1], cores=1)
    np.testing.assert_array_equal(one(x), x)
    four = tilecore.compile(f, target="npu", out_idx=[-1])
    np.testing.assert_array_equal(four(x), x)
    assert tile_npu.report(one).cores == 1 and tile_npu.report(four).cores == 4
    assert tile_npu.report(one).cycles > 3 * tile_npu.report(four).cycles
    with pytest.raises(TileCompileError, match="scratchpad overflow"):
        tilecore.compile(f, target="npu", out_idx=[-1], scratchpad_bytes=2048)
