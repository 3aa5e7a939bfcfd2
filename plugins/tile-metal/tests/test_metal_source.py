"""Source tier: MSL generated here by TVM's Metal codegen, structurally checked, and compared with
the reviewed golden files under golden/ (TILECORE_UPDATE_GOLDEN=1 rewrites them)."""

import importlib.util
import os
import pathlib
import re

import numpy as np
import pytest

import tilecore
from tile_metal import compiler, plugin
from tilecore.testing import hide_distribution

GOLDEN = pathlib.Path(__file__).parent / "golden"
EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _example(name):
    spec = importlib.util.spec_from_file_location(f"tile_metal_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _programs(gemm_func):
    """name -> PrimFunc: the examples (tile sizes within 32 KB of threadgroup memory) and gemm variants."""
    progs = {}
    if EXAMPLES.is_dir():
        progs["example_gemm_f16"] = _example("gemm").matmul.prim_func(256, 256, 256, 64, 64, 32)
        progs["example_softmax"] = _example("softmax").softmax.prim_func(256, 512, 8)
        progs["example_layernorm"] = _example("layernorm").layernorm.prim_func(256, 512, 8)
        progs["example_flash_attention"] = _example("flash_attention").flashattn.prim_func(1, 2, 256, 64, True, 32, 32)
    progs["gemm_f32"] = gemm_func(dtype="float32", accum="float32", threads=128)
    progs["gemm_f16_ta_tb"] = gemm_func(ta=True, tb=True, threads=128)
    progs["gemm_int8_portable"] = gemm_func(dtype="int8", accum="int32", threads=128)
    return progs


def _check_and_compare(name, func):
    k = tilecore.compile(func, target="metal")
    src = k.artifact.source
    assert compiler.check(src, k.artifact.meta["threads"], k.artifact.meta["params"]) == []
    path = GOLDEN / f"{name}.metal"
    if os.environ.get("TILECORE_UPDATE_GOLDEN") or not path.exists():
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(src)
    assert src == path.read_text(), f"{name}: generated MSL differs from {path} (review, then update)"
    return k, src


def test_every_program_generates_checked_msl_matching_its_golden(gemm_func):
    for name, func in _programs(gemm_func).items():
        k, src = _check_and_compare(name, func)
        assert k.artifact.meta["threads"] <= compiler.MAX_THREADS
        assert compiler.threadgroup_memory(src) <= compiler.MAX_THREADGROUP_MEMORY


def test_gemm_runs_on_simdgroup_matrices(gemm_func):
    for ta, tb in ((False, False), (True, False), (False, True)):
        src = tilecore.compile(gemm_func(ta=ta, tb=tb, threads=128), target="metal").artifact.source
        assert "simdgroup_multiply_accumulate" in src
        # the accumulator lives in 8x8 simdgroup matrices (per simdgroup), A and B fragments too
        assert re.search(r"simdgroup_float8x8 C_f\[\d+\];", src) and "threadgroup float C_f" not in src
        assert re.search(r"simdgroup_half8x8 mat_a\[\d+\];", src) and re.search(r"simdgroup_half8x8 mat_b\[\d+\];", src)
        assert ("(bool)1" in src) == (ta or tb)  # transposed operand loads


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_128x128x32_gemm_tile_keeps_its_accumulator_in_simdgroup_registers(stages):
    """The fp32 accumulator of a 128x128x32 fp16 tile lives in simdgroup_float8x8 matrices, so the
    kernel fits Apple's 32 KB of threadgroup memory (it needed 81920 bytes with the accumulator
    in threadgroup memory) and compiles to simdgroup_multiply_accumulate."""
    gemm = _example("gemm")
    art = (
        tilecore.compile(gemm.matmul.prim_func(1024, 1024, 1024, 128, 128, 32), target="metal").artifact
        if stages == 3
        else tilecore.compile(_gemm_stages(stages), target="metal").artifact
    )
    src = art.source
    assert compiler.check(src, art.meta["threads"], art.meta["params"]) == []
    assert art.meta["threadgroup_memory"] <= 16 * 1024 + 1024 < compiler.MAX_THREADGROUP_MEMORY
    assert re.search(r"simdgroup_float8x8 C_f\[64\];", src)
    assert src.count("simdgroup_multiply_accumulate(") == 64  # 8 x 8 per simdgroup and K step
    assert "threadgroup float C_f" not in src
    assert any("simdgroup registers" in n for n in art.meta["notes"])


def _gemm_stages(stages):
    import tilecore.language as T

    @T.prim_func
    def main(
        A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"), C: T.Tensor((512, 512), "float16")
    ):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.clear(C_f)
            for k in T.Pipelined(16, num_stages=stages):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])

    return main


def test_an_accumulator_used_elementwise_stays_in_threadgroup_memory():
    """A T.Parallel epilogue reads accumulator elements, which simdgroup registers do not expose."""
    import tilecore.language as T

    @T.prim_func
    def relu_gemm(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                C_f[i, j] = T.max(C_f[i, j], 0.0)
            T.copy(C_f, C)

    art = tilecore.compile(relu_gemm, target="metal").artifact
    assert "simdgroup_multiply_accumulate" in art.source and "threadgroup float C_f[4096];" in art.source
    assert any("threadgroup memory" in n for n in art.meta["notes"])


def test_buffer_bindings_follow_parameters(gemm_func):
    src = tilecore.compile(gemm_func(threads=128), target="metal").artifact.source
    ((name, params),) = compiler.kernels(src)
    assert [(b[2], b[3]) for b in compiler.buffer_bindings(params)] == [("A_ptr", 0), ("B_ptr", 1), ("C_ptr", 2)]


def test_structural_check_finds_problems():
    bad = "kernel void k(device float* A_ptr [[ buffer(1) ]]) { threadgroup float s[9000]; double x; }"
    problems = compiler.check(bad, 2048, ["B"])
    assert len(problems) == 5


def test_too_much_threadgroup_memory_is_a_user_error(gemm_func):
    with pytest.raises(tilecore.diagnostics.TileCompileError, match="shared memory"):
        tilecore.compile(gemm_func(M=256, N=256, dtype="float32", accum="float32", bk=64), target="metal")


def test_atomics_use_the_helper_library():
    import tilecore.language as T

    @T.prim_func
    def hist(A: T.Tensor((256,), "int32"), H: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(256):
                T.atomic_add(H[A[i] % 16], 1)

    src = tilecore.compile(hist, target="metal").artifact.source
    assert "tc_atomic_add(" in src and "atomic_fetch_add_explicit((device atomic_int*)p" in src


def test_launch_off_macos_is_a_clear_error(gemm_func):
    if plugin.device_present():
        pytest.skip("a Metal device is present")
    k = tilecore.compile(gemm_func(threads=128), target="metal")
    launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=k.artifact)
    with pytest.raises(tilecore.diagnostics.TileRuntimeError, match="macOS|Metal device"):
        launch([np.zeros(1)], {})


def test_unused_tensors_are_left_out_of_the_bindings_and_the_launch():
    import tilecore.language as T

    @T.prim_func
    def copy_a(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float16"), Out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Out[i] = A[i]

    meta = tilecore.compile(copy_a, target="metal").artifact.meta
    assert meta["params"] == ["A", "B", "Out"] and meta["bound_params"] == ["A", "Out"]


def test_a_name_read_from_a_bfloat16_fragment_compiles():
    # the bound value kept reading the bfloat16 fragment that TVM's bfloat16 legalization had
    # replaced ("Load/Store of buffer A_t occurred before its declaration", conformance 0.2.0
    # seed 0 programs 66 and 99); the name is now held in a float32 register
    import tilecore.language as T

    @T.prim_func
    def named(A: T.Tensor((31, 47), "bfloat16"), Out: T.Tensor((31, 47), "float32")):
        with T.Kernel(3, 2, threads=128) as (bx, by):
            A_t = T.alloc_fragment((16, 16), "bfloat16")
            T.copy(A[by * 16 : by * 16 + 16, bx * 16 : bx * 16 + 16], A_t)
            Out_t = T.alloc_fragment((16, 16), "float32")
            for i, j in T.Parallel(16, 16):
                a_v = A_t[i, j]
                Out_t[i, j] = a_v * 3.0
            T.copy(Out_t, Out[by * 16 : by * 16 + 16, bx * 16 : bx * 16 + 16])

    src = tilecore.compile(named, target="metal").artifact.source
    assert "kernel void" in src


def test_each_bfloat16_operation_rounds():
    """TVM computes bfloat16 in float32 and rounds only at the store, so `A * B + D` kept the
    product unrounded; the toolkit now rounds each result (NaN kept) and stores its bits."""
    from tilecore.testing import bfloat16_mul_add_kernel

    src = tilecore.compile(bfloat16_mul_add_kernel(), target="metal").artifact.source
    body = src[src.index("kernel void") :]
    # the addition's left operand is the rounded product (a NaN test picks a quiet bfloat16 NaN)
    assert re.search(r"v\[0\] = \(\(as_type<float>\(condval\w*\)\) \+ ", body), body
    assert "| (uint)4194304" in body


def test_a_bfloat16_math_result_rounds_before_it_is_used():
    """An intrinsic's bfloat16 result is a cast that the legalization drops: it is rounded too."""
    import tilecore.language as T

    @T.prim_func
    def k(A: T.Tensor((128,), "bfloat16"), D: T.Tensor((128,), "bfloat16"), C: T.Tensor((128,), "bfloat16")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                C[i] = T.exp(A[i]) + D[i]

    src = tilecore.compile(k, target="metal").artifact.source
    body = src[src.index("kernel void") :]
    assert re.search(r"v\[0\] = \(\(as_type<float>\(condval\w*\)\) \+ ", body), body


def test_a_host_without_tvm_still_names_its_device(monkeypatch):
    """A host that runs prebuilt kernels needs no TVM; what `tile backends` and conformance reports
    show must still name the device there."""
    hide_distribution(monkeypatch, "apache-tvm")
    monkeypatch.setattr(plugin, "device_present", lambda: True)
    st = plugin.toolchain_status()
    assert not st.ok and "apache-tvm is not installed" in st.summary
    assert st.device == "Apple GPU (torch MPS)"
