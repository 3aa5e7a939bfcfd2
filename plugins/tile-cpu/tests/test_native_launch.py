"""The TVM-free launcher (tile_cpu.native): same results and errors as TVM's loader, no TVM import.

Each kernel is run through both launchers on the same inputs: the ctypes one
(`Kernel` uses it) and `make_launch` with TVM's PackedFunc (the fallback).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import ml_dtypes
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tile_cpu import native
from tile_cpu.build import load_library
from tile_cpu.runtime import make_launch
from tilecore.diagnostics import TileRuntimeError

RNG = np.random.default_rng(5)
NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int8": np.int8,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "bool": np.bool_,
}


def tvm_launcher(kernel):
    """The fallback launcher (TVM's loader and FFI) for a compiled cpu Kernel."""
    blob = kernel.artifact.blobs["kernel.so"]
    return make_launch(kernel.artifact, native=None, tvm_function=lambda: load_library(blob)[kernel.artifact.entry])


def native_launcher(kernel):
    launch = kernel._launcher()
    assert launch.native is not None, native.unavailable_reason
    return launch


def rand(shape, dtype):
    if dtype == "bool":
        return RNG.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        return RNG.integers(0, 100, size=shape).astype(NP[dtype])
    return RNG.uniform(-2, 2, size=shape).astype(NP[dtype])


def scale_kernel(dtype, n=37):
    @T.prim_func
    def scale(A: T.Tensor((n, 5), dtype), B: T.Tensor((n, 5), dtype)):
        with T.Kernel(T.ceildiv(n, 8)) as bx:
            for i, j in T.Parallel(8, 5):
                if bx * 8 + i < n:
                    B[bx * 8 + i, j] = A[bx * 8 + i, j] + A[bx * 8 + i, j]

    return scale


def copy_bool_kernel(n=19):
    @T.prim_func
    def flip(A: T.Tensor((n,), "bool"), B: T.Tensor((n,), "bool")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                B[i] = not A[i]

    return flip


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "bool"]
)
def test_native_and_tvm_launchers_agree(dtype):
    k = tilecore.compile(copy_bool_kernel() if dtype == "bool" else scale_kernel(dtype), target="cpu", out_idx=[-1])
    a = rand(k.inputs[0].shape, dtype)
    outs = []
    for launch in (native_launcher(k), tvm_launcher(k)):
        out = np.zeros_like(a)
        launch([a, out], {})
        outs.append(out)
    assert outs[0].dtype == a.dtype
    np.testing.assert_array_equal(outs[0].view(np.uint8), outs[1].view(np.uint8))
    expected = ~a if dtype == "bool" else (a.astype(np.float64) * 2).astype(a.dtype)
    np.testing.assert_array_equal(outs[0], expected)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "bool"])
def test_native_launcher_takes_torch_tensors(dtype):
    torch = pytest.importorskip("torch")
    k = tilecore.compile(copy_bool_kernel() if dtype == "bool" else scale_kernel(dtype), target="cpu", out_idx=[-1])
    a = rand(k.inputs[0].shape, dtype)
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if dtype == "bfloat16" else torch.from_numpy(a)
    out = k(ta)
    assert isinstance(out, torch.Tensor) and out.dtype == ta.dtype
    ref = k(a)
    got = out.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if dtype == "bfloat16" else out.numpy()
    np.testing.assert_array_equal(got, ref)
    assert k._launcher().native is not None


def test_read_only_and_empty_inputs():
    n = T.dynamic("n")

    @T.prim_func
    def rowsum(A: T.Tensor((n, 4), "float32"), S: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 4)) as bx:
            for i in T.serial(4):
                if bx * 4 + i < n:
                    S[bx * 4 + i] = A[bx * 4 + i, 0] + A[bx * 4 + i, 1] + A[bx * 4 + i, 2] + A[bx * 4 + i, 3]

    k = tilecore.compile(rowsum, target="cpu", out_idx=[-1])
    a = rand((10, 4), "float32")
    a.flags.writeable = False
    np.testing.assert_allclose(k(a), a.sum(axis=1), rtol=1e-6)
    assert k(np.zeros((0, 4), np.float32)).shape == (0,)
    for launch in (native_launcher(k), tvm_launcher(k)):  # the fallback takes them too
        out = np.zeros(10, np.float32)
        launch([a, out], {})
        np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-6)
        launch([np.zeros((0, 4), np.float32), np.zeros(0, np.float32)], {})


@pytest.mark.parametrize("bad", ["shape", "dtype", "rank", "strided", "fortran"])
def test_raw_launch_rejects_like_tvm(bad):
    k = tilecore.compile(scale_kernel("float32", n=16), target="cpu", out_idx=[-1])
    wrong = {
        "shape": np.ones((8, 5), np.float32),
        "dtype": np.ones((16, 5), np.float64),
        "rank": np.ones((16, 5, 1), np.float32),
        "strided": np.ones((32, 5), np.float32)[::2],
        "fortran": np.asfortranarray(np.ones((16, 5), np.float32)),
    }[bad]
    messages = []
    for launch in (native_launcher(k), tvm_launcher(k)):
        with pytest.raises(TileRuntimeError, match="kernel 'scale' on cpu rejected its arguments") as info:
            launch([wrong, np.zeros((16, 5), np.float32)], {})
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    # the same slot then takes a right array again (the frame's cached layout is rewritten)
    a = rand((16, 5), "float32")
    out = np.zeros_like(a)
    native_launcher(k)([a, out], {})
    np.testing.assert_array_equal(out, a * 2)


def test_out_of_bounds_is_a_tile_runtime_error_at_the_users_line():
    @T.prim_func
    def gather(A: T.Tensor((16,), "float32"), I: T.Tensor((4,), "int32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                C[i] = A[I[i]]

    k = tilecore.compile(gather, target="cpu", out_idx=[-1])
    a = rand((16,), "float32")
    np.testing.assert_array_equal(k(a, np.array([3, 0, 15, 2], np.int32)), a[[3, 0, 15, 2]])
    messages = []
    for launch in (native_launcher(k), tvm_launcher(k)):
        with pytest.raises(TileRuntimeError, match=r"index out of bounds: A\[40\] but A has shape \(16,\)") as info:
            launch([a, np.array([1, 40, 2, 3], np.int32), np.zeros(4, np.float32)], {})
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "C[i] = A[I[i]]" in messages[0]
    # the error buffer is cleared for the next call
    np.testing.assert_array_equal(k(a, np.array([1, 1, 1, 1], np.int32)), a[[1, 1, 1, 1]])


def test_arguments_the_ctypes_path_does_not_take_fall_back_to_tvm():
    k = tilecore.compile(scale_kernel("float32", n=16), target="cpu", out_idx=[-1])
    a = rand((16, 5), "float32")
    big_endian = a.astype(">f4")
    launch = native_launcher(k)
    assert launch.native([big_endian, np.zeros_like(a)]) is native.NOT_HANDLED
    with pytest.raises(TileRuntimeError, match="rejected its arguments"):  # TVM's loader answers
        launch([big_endian, np.zeros_like(a)], {})


def test_parallel_callers_use_their_own_frames():
    k = tilecore.compile(scale_kernel("float32", n=64), target="cpu", out_idx=[-1])
    inputs = [rand((64, 5), "float32") for _ in range(4)]
    failures = []

    def work(a):
        for _ in range(200):
            if not np.array_equal(k(a), a * 2):
                failures.append(1)

    threads = [threading.Thread(target=work, args=(a,)) for a in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_elf_symbol_table_lists_the_entry_and_context_symbols():
    k = tilecore.compile(scale_kernel("float32", n=64), target="cpu", out_idx=[-1])
    from tile_cpu.build import library_file

    symbols = {
        name: (defined, is_data)
        for name, defined, is_data in native.dynamic_symbols(library_file(k.artifact.blobs["kernel.so"]))
    }
    assert symbols["__tvm_ffi_scale"] == (True, False)  # the entry: a function
    assert symbols["__TVMBackendParallelLaunch"] == (True, True)  # a pointer the launcher fills
    assert symbols["TVMFFIErrorSetRaisedFromCStrParts"][0] is False  # resolved in libtvm_ffi


FRESH_PROCESS = textwrap.dedent("""
    import sys, numpy as np, tilecore, tilecore.language as T

    @T.prim_func
    def gemm(A: T.Tensor((96, 64), "float32"), B: T.Tensor((64, 80), "float32"),
             C: T.Tensor((96, 80), "float32")):
        with T.Kernel(T.ceildiv(80, 32), T.ceildiv(96, 32)) as (bx, by):
            A_s = T.alloc_shared((32, 16), "float32")
            B_s = T.alloc_shared((16, 32), "float32")
            C_f = T.alloc_fragment((32, 32), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(64, 16), num_stages=2):
                T.copy(A[by * 32, k * 16], A_s)
                T.copy(B[k * 16, bx * 32], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 32, bx * 32])

    k = tilecore.compile(gemm, target="cpu", out_idx=[-1])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 64), dtype=np.float32)
    b = rng.standard_normal((64, 80), dtype=np.float32)
    c = k(a, b)
    assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    print("native", k._launcher().native is not None)
    print("tvm", "tvm" in sys.modules, "tvm_ffi" in sys.modules)
""")


def test_cache_hit_in_a_fresh_process_does_not_import_tvm(tmp_path):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TILE_CPU_LAUNCH", None)
    script = tmp_path / "fresh.py"  # @T.prim_func reads the kernel's source file
    script.write_text(FRESH_PROCESS)
    runs = [
        subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
        for _ in range(2)
    ]  # the first compiles, the second hits the cache
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert "tvm True" in runs[0].stdout  # the cold compile needs TVM
    assert "native True" in runs[1].stdout
    assert "tvm False False" in runs[1].stdout, runs[1].stdout
