"""Regression tests for mistakes users make, found by trying tilecore as a kernel author,
deployment engineer and plugin author: each must give a clear error at the user's line
(or just work), never a deep traceback or a silently wrong answer."""

from __future__ import annotations

import dataclasses
import traceback

import ml_dtypes
import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileRuntimeError


def _double(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j] * 2.0

    return main


def _tilecore_frames(err):
    """The traceback frames of `err` that lie inside the tilecore package."""
    return [f for f in traceback.extract_tb(err.__traceback__) if "/tilecore/" in f.filename]


# ----------------------------------------------------------------------------- call time


def test_read_only_output_is_an_error_not_silently_dropped():
    """The reference backend used to copy read-only arrays and drop the kernel's writes."""
    kernel = tilecore.compile(_double(4, 4), target="reference")
    out = np.zeros((4, 4), np.float32)
    out.setflags(write=False)
    with pytest.raises(TileRuntimeError) as info:
        kernel(np.ones((4, 4), np.float32), out)
    msg = str(info.value)
    assert "argument 'C': the kernel writes this argument, but the array is read-only" in msg
    assert 'def main(A: T.Tensor((M, N), "float32"), C: T.Tensor' in msg  # the declaration is shown


def test_read_only_input_is_fine():
    kernel = tilecore.compile(_double(4, 4), target="reference", out_idx=[-1])
    a = np.full((4, 4), 3, np.float32)
    a.setflags(write=False)
    np.testing.assert_array_equal(kernel(a), np.full((4, 4), 6, np.float32))


def test_runtime_error_has_no_internal_traceback():
    @T.prim_func
    def shifted(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(2) as bx:
            for i in T.Parallel(16):
                B[i] = A[i + bx]

    kernel = tilecore.compile(shifted, target="reference", out_idx=[-1])
    with pytest.raises(TileRuntimeError) as info:
        kernel(np.ones(16, np.float32))
    err = info.value
    assert "index out of bounds: A[16]" in str(err) and "B[i] = A[i + bx]" in str(err)
    assert len(_tilecore_frames(err)) <= 1 and err.__cause__ is None


def test_compile_error_has_no_internal_traceback(monkeypatch):
    """A backend's own failure reaches the user as one message; the chain stays on the error."""
    from tilecore.plugin import hookimpl
    from tilecore.plugin.manager import get_plugin_manager
    from tilecore.runtime.api import BackendError

    class CrashingCodegen:
        @hookimpl(tryfirst=True)
        def tilecore_codegen(self, backend, module, options):
            if module.func.name == "crash_for_test":
                raise RuntimeError("deep failure inside the code generator")

    manager = get_plugin_manager()
    name = manager.register(CrashingCodegen(), name="crashing-codegen-for-test")
    try:
        monkeypatch.setenv("TILECORE_CACHE", "0")
        with pytest.raises(BackendError) as info:
            func = dataclasses.replace(_double(2, 2), name="crash_for_test")
            tilecore.compile(func, target="reference")
    finally:
        manager.unregister(name)
    assert name not in manager.plugins
    err = info.value
    assert "deep failure inside the code generator" in str(err) and "TILECORE_TRACEBACK=1" in str(err)
    assert err.__cause__ is None and isinstance(err.internal_cause, RuntimeError)
    assert len(_tilecore_frames(err)) <= 1


def test_traceback_kept_when_asked(monkeypatch):
    monkeypatch.setenv("TILECORE_TRACEBACK", "1")
    kernel = tilecore.compile(_double(2, 2), target="reference")
    with pytest.raises(TileRuntimeError) as info:
        kernel(np.ones((2, 2), np.float32))
    assert len(_tilecore_frames(info.value)) > 1


# ----------------------------------------------------------------------------- T.Tensor annotations


@pytest.mark.parametrize(
    "shape, dtype, message",
    [
        (
            (0, 4),
            "float32",
            "a tensor dimension must be positive, got 0 in shape (0, 4) (for sizes that "
            "may be 0 at run time, use T.dynamic)",
        ),
        ((-3, 4), "float32", "a tensor dimension must be positive, got -3"),
        ((2**70,), "float32", "a tensor dimension must be below 2**63"),
        ((4, 4.0), "float32", "a tensor dimension must be an int or a T.dynamic dim, got 4.0"),
        ((4, True), "float32", "a tensor dimension must be an int or a T.dynamic dim, got True"),
        ((4,), "float33", "unknown dtype 'float33'"),
    ],
)
def test_bad_tensor_annotation_points_at_the_parameter(shape, dtype, message):
    """Python evaluates annotations before @T.prim_func runs; the error still has file:line:caret."""
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor(shape, dtype)):  # the line reported
            with T.Kernel(1) as bx:
                A[0] = 1.0

    err = info.value
    assert err.message.startswith("the parameter 'A': ") and message in err.message
    assert err.span.line == main_line(test_bad_tensor_annotation_points_at_the_parameter)
    assert "^~~~" in str(err)


def main_line(test_function, marker: str = "# the line reported") -> int:
    """The file line number of the line of `test_function` that contains `marker`."""
    import inspect

    lines, start = inspect.getsourcelines(test_function)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def test_numpy_integers_and_scalars_work_as_factory_values():
    """Shapes and scales often come from numpy; np.int64(4) used to be rejected."""

    def make(M, N, block, scale):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(M, block)) as bx:
                f = T.alloc_fragment((block, N), "float32")
                T.copy(A[bx * block, 0], f)
                for i, j in T.Parallel(block, N):
                    f[i, j] = f[i, j] * scale + T.max(scale, 1.0) + np.float32(0.25)
                T.copy(f, C[bx * block, 0])

        return main

    func = make(np.int64(8), np.int32(4), np.int64(4), np.float32(2.0))
    assert func.params[0].shape == (8, 4) and all(type(d) is int for d in func.params[0].shape)
    a = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    out = tilecore.compile(func, target="reference", out_idx=[-1])(a)
    np.testing.assert_allclose(out, a * 2 + 2.25, rtol=1e-6)


# ----------------------------------------------------------------------------- kernel body


def test_assigning_a_value_to_a_tensor_name_is_an_error():
    """`A = 3` used to rebind the name silently and drop the intent."""
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                A = 3  # noqa: F841

    assert "'A' is a tensor parameter; assigning the Python value 3 to the name would not change" in info.value.message
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main2(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((8,), "float32")
                s = 0.0  # noqa: F841

    assert "'s' is a shared buffer" in info.value.message and "T.fill" in info.value.message


def test_rebinding_a_buffer_name_to_another_buffer_still_works():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((8,), "float32")
            t = s
            T.copy(A, t)
            T.copy(s, B)

    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(tilecore.compile(main, target="reference", out_idx=[-1])(a), a)


# ----------------------------------------------------------------------------- targets


def test_backend_without_variants_rejects_a_variant():
    from tilecore.plugin.registry import TargetError

    with pytest.raises(TargetError) as info:
        tilecore.compile(_double(2, 2), target="reference:sm_90")
    assert str(info.value) == ("backend 'reference' does not accept target 'reference:sm_90'; its targets: reference")


def test_backend_with_variants_accepts_unlisted_ones():
    from tilecore.plugin import Backend, Capabilities, ToolchainStatus

    caps = Capabilities(features=frozenset(), dtypes=frozenset({"float32"}))
    gpu = Backend("gpu", ("gpu", "gpu:a1"), ("1.0",), caps, lambda: ToolchainStatus(True, "ok"))
    assert gpu.accepts_target("gpu:a1") and gpu.accepts_target("gpu:a2")
    assert not gpu.accepts_target("gpux:a1")
    host = Backend("host", ("host",), ("1.0",), caps, lambda: ToolchainStatus(True, "ok"))
    assert host.accepts_target("host") and not host.accepts_target("host:avx")


# ----------------------------------------------------------------------------- tile CLI


def _tile(capsys, *argv):
    from tilecore.cli.main import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


FACTORY = """
import tilecore.language as T

def scale(N, factor=2.0):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] * factor
    return main

def staged(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((N,), "float32")
            T.copy(A, s)
            T.copy(s, B)
    return main

def factory_with_a_bug(N):
    return len(N)  # raises TypeError inside the factory: not a command-line mistake
"""


def test_cli_factory_arguments_that_do_not_fit_show_the_signature(tmp_path, capsys):
    path = tmp_path / "kern.py"
    path.write_text(FACTORY)
    code, _, err = _tile(capsys, "compile", f"{path}::scale", "--target", "reference")
    assert code == 1
    assert err.startswith(
        f"error: {path}::scale: missing a required argument: 'N' (given: no arguments); it is scale(N, factor=2.0)"
    )
    code, _, err = _tile(capsys, "compile", f"{path}::scale", "8", "--arg", "factr=3", "-t", "reference")
    assert code == 1 and "got an unexpected keyword argument 'factr' (given: 8 --arg factr=3)" in err
    assert "Traceback" not in err
    # a TypeError raised inside the factory is the factory's own bug: it keeps its traceback
    with pytest.raises(TypeError, match="has no len"):
        _tile(capsys, "compile", f"{path}::factory_with_a_bug", "8", "-t", "reference")


def test_cli_unwritable_output_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "kern.py"
    path.write_text(FACTORY)
    missing = tmp_path / "no" / "such" / "dir"
    code, _, err = _tile(
        capsys, "compile", f"{path}::scale", "8", "-t", "reference", "--emit", "ir", "-o", str(missing / "out.py")
    )
    assert code == 1 and err == f"error: cannot write {missing / 'out.py'}: No such file or directory\n"
    code, _, err = _tile(capsys, "trace", f"{path}::scale", "8", "-t", "reference", "--html", str(missing / "t.html"))
    assert code == 1 and err.endswith(f"error: cannot write {missing / 't.html'}: No such file or directory\n")


# ----------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    "expr, dtype, message",
    [
        ("A[i] + 300", "int8", "the integer literal 300 does not fit int8 (range -128..127)"),
        ("A[i] * -1", "uint8", "the integer literal -1 does not fit uint8 (range 0..255)"),
        ("A[i] + 2 ** 31", "int32", "the integer literal 2147483648 does not fit int32"),
    ],
)
def test_integer_literal_that_would_wrap_is_an_error(expr, dtype, message):
    """`A[i] + 300` on int8 used to wrap the literal to 44 silently."""
    from tilecore.frontend import parse_source

    source = f"""
import tilecore.language as T

@T.prim_func
def main(A: T.Tensor((8,), "{dtype}"), B: T.Tensor((8,), "int32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(8):
            B[i] = {expr}
"""
    with pytest.raises(TileCompileError) as info:
        parse_source(source)
    assert message in info.value.message and "would wrap around" in info.value.message
    assert info.value.span.line == 8


def test_integer_literals_in_range_and_wide_casts_still_work():
    @T.prim_func
    def main(A: T.Tensor((4,), "uint8"), B: T.Tensor((4,), "int32"), C: T.Tensor((4,), "int64")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = 255 - A[i] + T.cast(A[i], "int32") * 1000
                C[i] = T.cast(A[i], "int64") * 4294967296

    a = np.array([0, 1, 128, 255], np.uint8)
    b, c = tilecore.compile(main, target="reference", out_idx=[1, 2])(a)
    np.testing.assert_array_equal(b, 255 - a.astype(np.int64) + a.astype(np.int64) * 1000)
    np.testing.assert_array_equal(c, a.astype(np.int64) * 4294967296)


# ----------------------------------------------------------------------------- plugin contract


def test_reference_declares_only_gemm_pairs_the_language_accepts():
    """It declared (float64, float32), which the type checker rejects (conformance finding)."""
    from tilecore.plugin.registry import get_registry

    pairs = get_registry().backends["reference"].capabilities.gemm_dtypes
    assert ("float64", "float32") not in pairs and ("float16", "float32") in pairs

    def gemm(dtype, accum):
        @T.prim_func
        def main(A: T.Tensor((16, 16), dtype), B: T.Tensor((16, 16), dtype), C: T.Tensor((16, 16), accum)):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((16, 16), dtype)
                b = T.alloc_shared((16, 16), dtype)
                c = T.alloc_fragment((16, 16), accum)
                T.copy(A, a)
                T.copy(B, b)
                T.clear(c)
                T.gemm(a, b, c)
                T.copy(c, C)

        return main

    for dtype, accum in sorted(pairs):
        tilecore.lower(gemm(dtype, accum), target="reference")  # raises on a rejected pair


def test_cache_key_covers_every_loaded_plugin():
    from tilecore.runtime.api import _plugin_fingerprint
    from tilecore.runtime.cache import cache_key

    base = ("{}", "cpu", "1.0", "cpu", {})
    assert cache_key(*base, "cpu=tile-cpu@1.0") != cache_key(*base, "cpu=tile-cpu@1.0;extra=tile-x@0.1")
    assert cache_key(*base) == cache_key(*base, "")  # the old five-argument form still works
    assert "reference=tilecore@" in _plugin_fingerprint()


def test_dump_ir_is_written_even_when_the_kernel_is_cached(tmp_path, monkeypatch):
    """TILECORE_DUMP_IR used to write nothing for a kernel found in the compile cache."""
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)
    func = _double(3, 5)
    tilecore.compile(func, target="reference")  # now cached (memory and disk)
    dump = tmp_path / "dump"
    monkeypatch.setenv("TILECORE_DUMP_IR", str(dump))
    tilecore.compile(func, target="reference")
    text = (dump / "04-simplify.py").read_text()  # 01 is fragment_extents, 02 check_types, 03 int4_storage
    assert text.startswith(f"# main ({__file__}:") and "after pass simplify" in text.splitlines()[0]
    assert (dump / "00-input.py").read_text().splitlines()[0].endswith("after parsing")


def test_copy_mismatch_names_the_region_not_the_whole_buffer():
    """`B[0:N + 1]` used to be reported as "B has shape (5,)" although B is (4,)."""
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                T.copy(A, B[0:5])

    assert info.value.message == (
        "T.copy shape mismatch: source A has shape (4,) vs destination B[0:5] has shape (5,) (unit dimensions ignored)"
    )
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main2(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(2) as bx:
                s = T.alloc_shared((16, 8), "float32")
                T.copy(A[bx * 16, 0:16], s)

    assert "source A[bx * 16, 0:16] has shape (1, 16) vs destination s has shape (16, 8)" in info.value.message


def test_lazy_jit_kernel_has_a_readable_repr():
    @tilecore.jit(out_idx=[-1], target="reference")
    @T.prim_func
    def add_one(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = A[i] + 1.0

    assert repr(add_one) == "<tilecore.jit add_one (compiled on first use) out_idx=[-1] target=reference>"
    np.testing.assert_array_equal(add_one(np.zeros(4, np.float32)), np.ones(4, np.float32))
    assert repr(add_one) == "<tilecore.jit add_one (compiled) out_idx=[-1] target=reference>"


# ----------------------------------------------------------------------------- uninitialized reads


def test_gemm_into_an_uncleared_fragment_warns_at_the_users_line():
    """The classic forgotten T.clear: NaN on reference, plausible garbage on hardware."""
    from tilecore.passes.init_check import UninitializedReadWarning

    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            As = T.alloc_shared((16, 16), "float32")
            Bs = T.alloc_shared((16, 16), "float32")
            Cf = T.alloc_fragment((16, 16), "float32")
            for k in T.Pipelined(2):
                T.copy(A, As)
                T.copy(B, Bs)
                T.gemm(As, Bs, Cf)  # the line warned about
            T.copy(Cf, C)

    with pytest.warns(UninitializedReadWarning) as record:
        tilecore.lower(main, target="reference")
    (warning,) = record
    assert str(warning.message) == (
        "T.gemm (accumulating into C) reads Cf (a fragment buffer) before anything has written it: "
        "its contents are undefined (NaN on the reference backend, leftover values on hardware); "
        "T.clear(Cf) before the loop, or pass clear_accum=True"
    )
    assert warning.filename == __file__
    assert warning.lineno == main_line(
        test_gemm_into_an_uncleared_fragment_warns_at_the_users_line, "# the line warned about"
    )


def test_reads_after_writes_or_under_a_run_time_if_do_not_warn():
    import warnings

    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            prev = T.alloc_fragment((16,), "float32")
            acc = T.alloc_var("float32", init=0.0)
            count = T.alloc_var("int32")
            count = 0
            for k in T.serial(4):
                if k > 0:  # loop-carried: written by the previous iteration
                    for i in T.Parallel(16):
                        C[i] = prev[i] + acc + count
                T.copy(A, prev)
                acc = acc + 1.0
                count += 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tilecore.lower(main, target="reference")


def test_other_uninitialized_reads_are_found():
    from tilecore.passes.init_check import uninitialized_reads

    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((8, 8), "float32")
            r = T.alloc_fragment((8,), "float32")
            v = T.alloc_var("float32")
            T.reduce_max(f, r, dim=1, clear=False)
            v = v + 1.0
            T.copy(r, C)

    found = [(b.name, what) for b, _, what in uninitialized_reads(main)]
    assert found == [
        ("f", "T.reduce_max"),
        ("r", "T.reduce_max (clear=False combines with the destination)"),
        ("v", "this expression"),
    ]


def test_cli_trace_shows_the_passes_before_a_failing_one(tmp_path, capsys):
    """A pass error used to print only the error; the trace now shows how far it got."""
    import dataclasses

    from tilecore.interp import plugin as reference
    from tilecore.plugin import hookimpl
    from tilecore.plugin.manager import register_plugin, unregister_plugin

    class TinySharedMemory:
        """The reference backend with 64 bytes of shared memory."""

        @hookimpl
        def tilecore_register_backends(self, register):
            base = reference.make_backend()
            register(
                dataclasses.replace(
                    base,
                    name="tinyshared",
                    targets=("tinyshared",),
                    capabilities=dataclasses.replace(base.capabilities, max_shared_memory=64),
                )
            )

    path = tmp_path / "kern.py"
    path.write_text(FACTORY)
    html = tmp_path / "t.html"
    name = register_plugin(TinySharedMemory(), name="tinyshared-for-test")
    try:
        code, out, err = _tile(capsys, "trace", f"{path}::staged", "64", "-t", "tinyshared", "--html", str(html))
    finally:
        unregister_plugin(name)
    assert code == 1 and out.startswith("==== input ")
    assert "==== after pass 7: loops " in out and "==== pass 8: memory_plan failed " in out
    assert "shared memory over the limit" in err and "Traceback" not in err
    assert "<h2 id='error'>pass 8 failed</h2>" in html.read_text()


def test_numpy_and_python_scalar_types_work_as_dtypes():
    """`T.Tensor(shape, np.float32)` used to fail with "unknown dtype <class 'numpy.float32'>"."""
    from tilecore.ir.types import normalize_dtype

    assert [normalize_dtype(t) for t in (np.float32, np.bool_, ml_dtypes.bfloat16, np.uint8, float, int)] == [
        "float32",
        "bool",
        "bfloat16",
        "uint8",
        "float32",
        "int32",
    ]

    @T.prim_func
    def main(A: T.Tensor((4,), np.float16), B: T.Tensor((4,), np.float32)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((4,), ml_dtypes.bfloat16)
            for i in T.Parallel(4):
                s[i] = T.cast(A[i], np.float32) + 0.5
            for i in T.Parallel(4):
                B[i] = s[i] * 2.0

    out = tilecore.compile(main, target="reference", out_idx=[-1])(np.arange(4, dtype=np.float16))
    np.testing.assert_array_equal(out, np.arange(4) * 2 + 1.0)


def test_messages_use_the_right_article_for_int_dtypes():
    N = T.dynamic("N")
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(N):
                    A[i] = 1.0

    assert info.value.message == "a T.Parallel extent must be known at parse time, got an int32 expression"


@T.prim_func
def _set_first(A: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        A[0] = 1.0


def test_calling_a_prim_func_from_a_kernel_is_a_short_clear_error():
    """The message used to embed the whole PrimFunc repr as the "function name"."""
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                _set_first(A)

    assert info.value.message == (
        "a kernel cannot call another kernel (_set_first is a @T.prim_func): "
        "inline its body, or write the shared part as Python code that runs "
        "at parse time"
    )


# ----------------------------------------------------------------------------- T.Parallel races


def test_accumulating_across_parallel_iterations_is_an_error():
    """reference gave 7 and cpu 28 for this sum over 0..7: a race, now rejected at the line."""

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            total = T.alloc_var("float32")
            total = 0.0
            for i in T.Parallel(8):
                total = total + A[i]  # the race
            B[0] = total

    with pytest.raises(TileCompileError) as info:
        tilecore.lower(main, target="reference")
    err = info.value
    assert err.message.startswith(
        "total is read and written at the same place by several iterations "
        "of T.Parallel (its index does not depend on i)"
    )
    assert "T.serial" in err.message and "T.atomic_add" in err.message
    assert err.span.line == main_line(test_accumulating_across_parallel_iterations_is_an_error, "# the race")


def test_row_accumulation_in_a_2d_parallel_names_the_missing_variable():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            r = T.alloc_fragment((4,), "float32")
            T.clear(r)
            for i, j in T.Parallel(4, 8):
                row = i
                r[row] = r[row] + A[i, j]
            T.copy(r, B)

    with pytest.raises(TileCompileError, match=r"its index does not depend on j\)"):
        tilecore.lower(main, target="reference")


def test_independent_parallel_updates_are_accepted():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32"), R: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((4, 8), "float32")
            r = T.alloc_fragment((4,), "float32")
            T.copy(A, f)
            T.clear(r)
            for i, j in T.Parallel(4, 8):
                f[i, j] = f[i, j] * 2.0  # every iteration its own element
                for k in T.serial(3):
                    f[i, j] = f[i, j] + k  # serial loop inside: still its own element
                if j == 0:
                    r[i] = r[i] + f[i, 0]  # one iteration per row: guarded by j
            for i in T.Parallel(4):
                R[i] = 0.0  # the same value from every iteration is not a read
            T.copy(f, B)
            T.copy(r, R)

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b, r = tilecore.compile(main, target="reference", out_idx=[1, 2])(a)
    np.testing.assert_array_equal(b, a * 2 + 3)
    np.testing.assert_array_equal(r, a[:, 0] * 2 + 3)


@pytest.mark.parametrize("backend", ["reference", "cpu", "npu"])
def test_leaving_out_an_extent_one_parallel_axis_is_not_a_race(backend):
    """T.Parallel(1, n) has one iteration along its first axis, so acc[j] += x[0, j] is safe."""
    pytest.importorskip({"reference": "tilecore", "cpu": "tile_cpu", "npu": "tile_npu"}[backend])

    @T.prim_func
    def main(X: T.Tensor((3, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((8,), "float32")
            T.clear(acc)
            for r in T.serial(3):
                for i, j in T.Parallel(1, 8):
                    acc[j] += X[r + i, j]
            T.copy(acc, Y)

    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    y = tilecore.compile(main, target=backend, out_idx=[1])(x)
    np.testing.assert_array_equal(y, x.sum(axis=0))


def test_a_missing_axis_of_extent_two_is_still_a_race():
    @T.prim_func
    def main(X: T.Tensor((2, 8), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_fragment((8,), "float32")
            T.clear(acc)
            for i, j in T.Parallel(2, 8):
                acc[j] += X[i, j]
            T.copy(acc, Y)

    with pytest.raises(TileCompileError, match=r"its index does not depend on i\)"):
        tilecore.lower(main, target="reference")


def test_reading_what_another_parallel_iteration_writes_is_an_error():
    """An in-place shift: reference gave [0 0 1 2 ...], cpu [0 0 0 0 ...]."""

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((8,), "float32")
            T.copy(A, s)
            for i in T.Parallel(7):
                s[i + 1] = s[i]  # the shift
            T.copy(s, B)

    with pytest.raises(TileCompileError) as info:
        tilecore.lower(main, target="reference")
    assert info.value.message.startswith(
        "iteration (i=1) of T.Parallel reads an element of s that iteration (i=0) writes"
    )
    assert info.value.span.line == main_line(
        test_reading_what_another_parallel_iteration_writes_is_an_error, "# the shift"
    )

    @T.prim_func
    def transpose_in_place(A: T.Tensor((4, 4), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((4, 4), "float32")
            T.copy(A, s)
            for i, j in T.Parallel(4, 4):
                t = s[j, i]
                s[i, j] = t
            T.copy(s, A)

    with pytest.raises(
        TileCompileError,
        match=r"iteration \(i=0, j=1\) of T.Parallel reads an element "
        r"of s that iteration \(i=1, j=0\) writes",
    ):
        tilecore.lower(transpose_in_place, target="reference")


def test_disjoint_or_same_element_parallel_accesses_are_accepted():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((16,), "float32")
            T.copy(A, s)
            for i in T.Parallel(8):
                s[i + 8] = s[i] * 2.0  # reads 0..7, writes 8..15: no overlap
            for i in T.Parallel(16):
                s[i] = s[i] + 1.0  # each iteration its own element
            for i in T.Parallel(15):
                if i > 100:  # guarded: not analysed, never a false alarm
                    s[i + 1] = s[i]
            T.copy(s, B)

    a = np.arange(16, dtype=np.float32)
    want = a.copy()
    want[8:] = a[:8] * 2
    np.testing.assert_array_equal(tilecore.compile(main, target="reference", out_idx=[-1])(a), want + 1)


def test_load_error_without_distribution_reads_cleanly(monkeypatch, capsys):
    """`tile backends` printed "nosuch (unknown distribution, ): ..." for an allowlisted unknown name."""
    from tilecore.plugin.manager import PluginLoadError, reset_plugins

    err = PluginLoadError("nosuch", "", "", "", "listed in TILECORE_PLUGINS, but ...", "")
    assert err.describe() == "plugin 'nosuch': listed in TILECORE_PLUGINS, but ..."
    full = PluginLoadError("x", "tile-x", "1.0", "tile_x.plugin", "ImportError: boom", "")
    assert full.describe() == "plugin 'x' (tile-x 1.0, tile_x.plugin): ImportError: boom"
    monkeypatch.setenv("TILECORE_PLUGINS", "nosuch")
    reset_plugins()
    try:
        code, out, _ = _tile(capsys, "backends")
    finally:
        monkeypatch.delenv("TILECORE_PLUGINS")
        reset_plugins()
    assert code == 0 and "\n  nosuch: listed in TILECORE_PLUGINS, but no installed distribution" in out


def test_float_literal_that_would_become_inf_is_an_error():
    from tilecore.frontend import parse_source

    source = """
import tilecore.language as T

@T.prim_func
def main(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(4):
            B[i] = A[i] * {literal}
"""
    with pytest.raises(TileCompileError) as info:
        parse_source(source.format(literal="1e6"))
    assert info.value.message.startswith("the literal 1000000.0 is beyond the largest float16 (65504)")
    assert 'T.infinity("float16")' in info.value.message and info.value.span.line == 8
    parse_source(source.format(literal="65519.0"))  # rounds to 65504, not inf: accepted
    parse_source(source.format(literal='float("inf")'))  # an explicit inf is meant


def test_unpacking_a_number_into_names_is_a_diagnostic():
    """`[f] = 0` (found by the mutation fuzzer) raised a bare TypeError from the parser."""
    with pytest.raises(TileCompileError) as info:

        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                [f] = 0  # noqa: F841

    assert info.value.message == "cannot unpack the Python value 0 into 1 name(s)"


def test_comparison_with_an_out_of_range_literal_is_computed_exactly():
    """`u8 > -1` would wrap -1 to 255 (always False); it is compared in int64 instead."""

    @T.prim_func
    def main(A: T.Tensor((4,), "uint8"), B: T.Tensor((4,), "int8"), O: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                O[i] = (
                    T.if_then_else(A[i] > -1, 1, 0)
                    + T.if_then_else(B[i] < 200, 10, 0)
                    + T.if_then_else(-1 < A[i], 100, 0)
                )

    out = tilecore.compile(main, target="reference", out_idx=[-1])(
        np.array([0, 1, 200, 255], np.uint8), np.array([-128, 0, 5, 127], np.int8)
    )
    np.testing.assert_array_equal(out, [111, 111, 111, 111])
