"""Compile errors a user can cause: `file:line:col`, the source line, a caret, a cause.

Each kernel below marks the culprit's line with a `# E:<tag>` comment; the
checks find that line in this file and assert on the message, the file, the
line and the column of the caret.
"""

import re

import pytest

import tilecore.language as T
from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
from tilecore.language.features import ALL_FEATURES
from tilecore.plugin.backend import Backend, Capabilities, ToolchainStatus

with open(__file__) as _f:
    SOURCE_LINES = _f.read().splitlines()


def line_of(tag: str) -> int:
    marker = re.compile(rf"# E:{tag}(\s|$)")
    hits = [n for n, text in enumerate(SOURCE_LINES, 1) if marker.search(text)]
    assert len(hits) == 1, f"marker {marker} must appear once"
    return hits[0]


def check_error(err: TileCompileError, tag: str, message: str, culprit: str):
    """The error names the cause and points (file, line, caret) at `culprit` on the tagged line."""
    line = line_of(tag)
    col = SOURCE_LINES[line - 1].index(culprit)
    assert message in err.message
    assert (err.span.file, err.span.line, err.span.col) == (__file__, line, col)
    head, shown, caret = str(err).splitlines()[:3]
    assert head == f"{__file__}:{line}:{col + 1}: error: {err.message}"
    assert shown.strip() == SOURCE_LINES[line - 1].strip()
    assert caret.index("^") - 4 == col and shown[4:] == SOURCE_LINES[line - 1]


def raises(make, tag, message, culprit, cls=TileCompileError):
    with pytest.raises(cls) as info:
        make()
    check_error(info.value, tag, message, culprit)
    return info.value


# ----------------------------------------------------------------------------- names and constructs


def test_undefined_name():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.Parallel(8):
                    A[i] = A[i] * scael  # E:undefined  # noqa: F821

    raises(make, "undefined", "undefined name 'scael'", "scael")


@pytest.mark.parametrize(
    "tag, what",
    [
        ("while", "while-else"),
        ("lambda", "a lambda"),
        ("try", "a try statement"),
        ("listcomp", "a list comprehension"),
        ("break", "break"),
    ],
)
def test_unsupported_python_constructs(tag, what):
    def make_while():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                while A[0] > 0:  # E:while
                    A[0] = A[0] - 1.0
                else:
                    A[1] = 0.0

    def make_lambda():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                f = lambda x: x + 1  # E:lambda  # noqa: E731

    def make_try():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                try:  # E:try
                    A[0] = 1.0
                except ValueError:
                    pass

    def make_listcomp():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                xs = [A[i] for i in range(8)]  # E:listcomp

    def make_break():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in range(8):
                    break  # E:break

    culprits = {"while": "while", "lambda": "lambda", "try": "try", "listcomp": "[A[i]", "break": "break"}
    make = {
        "while": make_while,
        "lambda": make_lambda,
        "try": make_try,
        "listcomp": make_listcomp,
        "break": make_break,
    }[tag]
    raises(make, tag, f"unsupported Python construct in a kernel: {what}", culprits[tag])


# ----------------------------------------------------------------------------- shapes


def test_copy_shape_mismatch():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1):
                s = T.alloc_shared((32, 16), "float16")
                T.copy(A[0:32, 0:32], s)  # E:copy

    raises(
        make,
        "copy",
        "T.copy shape mismatch: source A[0:32, 0:32] has shape (32, 32) vs destination s has shape (32, 16)",
        "T.copy",
    )


def test_copy_both_start_points():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
            with T.Kernel(1):
                T.copy(A[0, 0], B[0, 0])  # E:startpoints

    raises(make, "startpoints", "both operands are start points", "T.copy")


def test_gemm_shape_mismatch():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1):
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((16, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # E:gemm

    raises(make, "gemm", "T.gemm shape mismatch", "T.gemm")


def test_reduce_shape_mismatch():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1):
                f = T.alloc_fragment((8, 16), "float32")
                r = T.alloc_fragment((16,), "float32")
                T.reduce_sum(f, r, dim=1)  # E:reduce

    raises(make, "reduce", "reducing f (8, 16) over dim 1 gives (8,), but r has shape (16,)", "T.reduce_sum")


# ----------------------------------------------------------------------------- dtypes


def test_integer_true_division():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            with T.Kernel(1):
                for i in T.Parallel(8):
                    A[i] = A[i] / 2  # E:intdiv

    raises(make, "intdiv", "'/' on integers (int32 / int32) is not defined; use '//'", "A[i] / 2")


def test_float_index():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.Parallel(8):
                    A[i] = A[A[i]]  # E:floatindex

    raises(make, "floatindex", "an index must be an integer, got a float32 expression", "A[i]]")


def test_gemm_dtype_mismatch():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1):
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((32, 64), "float32")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)  # E:gemmdtype

    raises(make, "gemmdtype", "T.gemm dtype mismatch: A (a) is float16 but B (b) is float32", "b, c)")


def test_bitwise_on_floats():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.Parallel(8):
                    A[i] = A[i] & 1  # E:bitwise

    raises(make, "bitwise", "'&' needs integer operands, got float32", "A[i] & 1")


# ----------------------------------------------------------------------------- indices


def test_constant_index_out_of_range():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8, 4), "float32")):
            with T.Kernel(1):
                A[2, 4] = 1.0  # E:index

    raises(make, "index", "index 4 is out of range for dimension 1 of A (size 4)", "A[2, 4]")


def test_constant_region_out_of_range_in_shared():
    def make():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1):
                s = T.alloc_shared((32,), "float32")
                T.copy(A[0:16], s[24:40])  # E:region

    err = raises(make, "region", "exceeds dimension 0 of s", "24:40")
    assert "24:40" in err.message


# ----------------------------------------------------------------------------- scopes


def test_fragment_as_kernel_parameter():
    def make():
        @T.prim_func
        def k(A: T.FragmentBuffer((8,), "float32")):  # E:fragparam
            with T.Kernel(1):
                pass

    raises(
        make, "fragparam", "is a fragment buffer, but a kernel parameter must be a global T.Tensor", "T.FragmentBuffer"
    )


def test_allocation_outside_the_kernel():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            f = T.alloc_fragment((8,), "float32")  # E:alloc
            with T.Kernel(1):
                T.copy(A, f)

    raises(make, "alloc", "T.alloc_fragment must be inside `with T.Kernel(...)`", "f = T.alloc")


def test_tile_op_inside_parallel():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                f = T.alloc_fragment((8,), "float32")
                for i in T.Parallel(8):
                    T.copy(A, f)  # E:tileinparallel

    raises(make, "tileinparallel", "cannot appear inside T.Parallel", "T.copy")


def test_value_reassigned_in_a_loop():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                total = A[0]
                for i in range(1, 8):
                    total = total + A[i]  # E:loopcarried
                A[0] = total

    raises(make, "loopcarried", "'total' is assigned inside a loop body but was defined outside it", "total =")


def test_value_reassigned_in_an_if_then_read():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                x = A[0]
                if A[1] > 0:
                    x = A[1]
                A[2] = x  # E:diverged

    raises(make, "diverged", "'x' was reassigned inside a run-time `if`", "x  #")


def test_loop_variable_after_its_loop():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.serial(8):
                    A[i] = 0.0
                A[i] = 1.0  # E:expired

    raises(make, "expired", "'i' is only defined inside the loop body", "i] = 1.0")


def test_python_function_given_kernel_values():
    """Python functions written in Python are inlined (test_frontend_inline.py); a compiled one
    such as math.sqrt cannot take kernel values."""
    import math

    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.Parallel(8):
                    A[i] = math.sqrt(A[i])  # E:pycall

    raises(make, "pycall", "cannot pass kernel values to the Python function sqrt()", "math.sqrt(")


def test_parse_time_python_error_points_at_its_line():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                n = 8 // 0  # E:zerodiv
                A[0] = 1.0

    raises(make, "zerodiv", "evaluating this at parse time failed: ZeroDivisionError", "8 // 0")


def test_wrong_arguments_to_an_operation():
    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                T.copy(A)  # E:args

    raises(make, "args", "T.copy(): missing a required argument: 'dst'", "T.copy")


# ----------------------------------------------------------------------------- backend limits


def _backend(name="toy", features=ALL_FEATURES, max_shared=None):
    caps = Capabilities(
        features=frozenset(features), dtypes=frozenset({"float16", "float32", "int32"}), max_shared_memory=max_shared
    )
    return Backend(
        name=name,
        targets=(name,),
        ir_versions=("1.0",),
        capabilities=caps,
        toolchain_status=lambda: ToolchainStatus(True, "ok"),
    )


def _run_pipeline(func, backend):
    from tilecore.passes.pipeline import PassContext, default_pipeline

    return default_pipeline().run(func, PassContext(backend=backend, target=backend.name, source=func.source))


def test_shared_memory_over_the_backend_limit():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float32")):
        with T.Kernel(1):
            s = T.alloc_shared((128, 128), "float32")  # E:smem
            T.copy(A, s)
            T.copy(s, A)

    with pytest.raises(TileCompileError) as info:
        _run_pipeline(k, _backend(max_shared=48 * 1024))
    check_error(
        info.value,
        "smem",
        "over the limit: the kernel needs 65536 bytes but backend toy allows 49152 bytes",
        "s = T.alloc_shared",
    )


def test_feature_the_backend_does_not_support():
    @T.prim_func
    def k(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1):
            f = T.alloc_fragment((8, 8), "float32")
            T.copy(A, f)
            T.cumsum(f, dim=1)  # E:feature
            T.copy(f, A)

    with pytest.raises(UnsupportedFeatureError) as info:
        _run_pipeline(k, _backend(features=ALL_FEATURES - {"cumsum"}))
    err = info.value
    assert err.backend == "toy" and "cumsum" in err.feature
    check_error(err, "feature", "backend toy does not support", "T.cumsum")


def test_traceback_stops_at_the_decorator():
    """The report points at the user's line; the frontend's own frames are left out."""

    def make():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                A[0] = nothing_here  # E:short  # noqa: F821

    err = raises(make, "short", "undefined name 'nothing_here'", "nothing_here")
    tb, files = err.__traceback__, []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert not any("frontend" in f for f in files)


# ----------------------------------------------------------------------------- robustness

import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from dsl_strategies import dsl_programs  # noqa: E402

from tilecore.frontend import parse_source  # noqa: E402

WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9.]*|\d+\.?\d*|[-+*/%<>=&]+")
REPLACEMENTS = [
    "bx",
    "A",
    "f",
    "r",
    "acc",
    "T.exp",
    "T.copy",
    "T",
    "0",
    "-1",
    "2.5",
    "M",
    "C",
    "T.Parallel",
    "range",
    "None",
    "'s'",
    "(1, 2)",
    "[f]",
    "T.float16",
    "i",
    "k",
    "T.alloc_var",
    "T.gemm",
    "T.reduce_sum",
    "True",
    "len",
    "T.infinity",
    "f[0]",
    ":",
]
OPERATORS = ["+", "-", "*", "/", "//", "%", "<", "==", "and", "or", "&", ">>"]


def mutate(text: str, rnd, count: int) -> str:
    head, body = text.split("@T.prim_func", 1)
    for _ in range(count):
        match = rnd.choice(list(WORD.finditer(body)))
        is_word = match.group()[0].isalnum() or match.group()[0] == "_"
        body = body[: match.start()] + rnd.choice(REPLACEMENTS if is_word else OPERATORS) + body[match.end() :]
    return head + "@T.prim_func" + body


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dsl_programs(), st.randoms(use_true_random=False), st.integers(1, 3))
def test_broken_programs_give_diagnostics_not_internal_errors(text, rnd, count):
    """Whatever a user writes, the frontend answers with a TileCompileError (or Python's own
    error for code that runs before the frontend sees it, like a bad annotation), never a
    crash inside tilecore."""
    source = mutate(text, rnd, count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        try:
            parse_source(source)
        except (TileCompileError, SyntaxError):
            pass
        except Exception as exc:  # noqa: BLE001  (classified below)
            frames = [
                f.filename
                for f in traceback.extract_tb(exc.__traceback__)
                if not f.filename.endswith(os.path.join("tilecore", "ir", "types.py"))
            ]
            internal = ("frontend", "passes", "printer.py", "serialize.py")
            assert not any(part in frames[-1] for part in internal), (source, exc)
