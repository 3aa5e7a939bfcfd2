"""Regression tests for mistakes users make, found by trying tilecore as a kernel author,
deployment engineer and plugin author: each must give a clear error at the user's line
(or just work), never a deep traceback or a silently wrong answer."""
from __future__ import annotations

import traceback

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
    assert "def main(A: T.Tensor((M, N), \"float32\"), C: T.Tensor" in msg  # the declaration is shown


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
            if options.get("crash_for_test"):
                raise RuntimeError("deep failure inside the code generator")

    manager = get_plugin_manager()
    plugin = CrashingCodegen()
    manager.register(plugin, name="crashing-codegen-for-test")
    try:
        monkeypatch.setenv("TILECORE_CACHE", "0")
        with pytest.raises(BackendError) as info:
            tilecore.compile(_double(2, 2), target="reference", crash_for_test=True)
    finally:
        manager.unregister(plugin)
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


@pytest.mark.parametrize("shape, dtype, message", [
    ((0, 4), "float32", "a tensor dimension must be positive, got 0 in shape (0, 4) (for sizes that "
                        "may be 0 at run time, use T.dynamic)"),
    ((-3, 4), "float32", "a tensor dimension must be positive, got -3"),
    ((2 ** 70,), "float32", "a tensor dimension must be below 2**63"),
    ((4, 4.0), "float32", "a tensor dimension must be an int or a T.dynamic dim, got 4.0"),
    ((4, True), "float32", "a tensor dimension must be an int or a T.dynamic dim, got True"),
    ((4,), "float33", "unknown dtype 'float33'"),
])
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


def main_line(test_function) -> int:
    import inspect

    lines, start = inspect.getsourcelines(test_function)
    return start + next(i for i, text in enumerate(lines) if "# the line reported" in text)


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
    assert "'A' is a tensor parameter; assigning the Python value 3 to the name would not change" \
        in info.value.message
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
    assert str(info.value) == ("backend 'reference' does not accept target 'reference:sm_90'; "
                               "its targets: reference")


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


FACTORY = '''
import tilecore.language as T

def scale(N, factor=2.0):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] * factor
    return main

def factory_with_a_bug(N):
    return len(N)  # raises TypeError inside the factory: not a command-line mistake
'''


def test_cli_factory_arguments_that_do_not_fit_show_the_signature(tmp_path, capsys):
    path = tmp_path / "kern.py"
    path.write_text(FACTORY)
    code, _, err = _tile(capsys, "compile", f"{path}::scale", "--target", "reference")
    assert code == 1
    assert err.startswith(f"error: {path}::scale: missing a required argument: 'N' (given: no arguments); "
                          "it is scale(N, factor=2.0)")
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
    code, _, err = _tile(capsys, "compile", f"{path}::scale", "8", "-t", "reference", "--emit", "ir",
                         "-o", str(missing / "out.py"))
    assert code == 1 and err == f"error: cannot write {missing / 'out.py'}: No such file or directory\n"
    code, _, err = _tile(capsys, "trace", f"{path}::scale", "8", "-t", "reference",
                         "--html", str(missing / "t.html"))
    assert code == 1 and err.endswith(f"error: cannot write {missing / 't.html'}: No such file or directory\n")
