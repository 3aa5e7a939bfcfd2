"""The frontend: TileLang-style kernels parse into the expected Tile IR."""

import os
import re
import sys

import pytest

import tilecore.language as T
from tilecore.diagnostics import TileCompileError
from tilecore.frontend import parse_source
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk, walk_stmts

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from frontend_kernels import flash_attention, layernorm, matmul, softmax


def stmts_of(func, cls):
    return [s for s in walk_stmts(func.body) if isinstance(s, cls)]


def test_gemm_kernel_structure():
    f = matmul(200, 200, 200, 64, 64, 32)
    assert [p.name for p in f.params] == ["A", "B", "C"]
    kernel = f.kernel
    assert kernel.grid == (N.Const(4, "int32"), N.Const(4, "int32"))
    assert [v.name for v in kernel.block_vars] == ["bx", "by"]
    assert kernel.threads == (128,)
    loop = stmts_of(f, N.For)[0]
    assert loop.kind == "pipelined" and loop.num_stages == 3 and loop.extent == N.Const(7, "int32")
    copies = stmts_of(f, N.Copy)
    assert copies[0].src.extents == (64, 32) and copies[0].dst.buffer.name == "A_s"
    gemm = stmts_of(f, N.Gemm)[0]
    assert gemm.policy == "full_row" and not gemm.transpose_b


def test_every_node_has_a_span_in_this_file():
    f = flash_attention(1, 2, 256, 64, True)
    for node in walk(f):
        span = getattr(node, "span", None)
        if span is not None:
            assert span.line > 0 and span.file.endswith("frontend_kernels.py"), node


def test_source_is_the_whole_file():
    f = softmax(8, 16)
    assert "def flash_attention" in f.source


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_parses(causal):
    f = flash_attention(1, 2, 256, 64, causal)
    gemms = stmts_of(f, N.Gemm)
    assert len(gemms) == 2 and gemms[0].transpose_b
    q_copy = stmts_of(f, N.Copy)[0]
    assert q_copy.src.extents == (1, 64, 1, 64)
    assert any(isinstance(n, N.Select) for n in walk(f)) == causal


def test_layernorm_slices_and_closure_floats():
    f = layernorm(64, 128, eps=1e-3)
    first = stmts_of(f, N.Copy)[0]
    assert first.src.extents == (4, 128)
    consts = [n.value for n in walk(f) if isinstance(n, N.Const)]
    assert 1e-3 in consts


def test_names_unique_and_shadowing_renamed():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                x = A[i] * 2.0
                x = x + 1.0
                A[i] = x
            for i in T.serial(4):
                A[i] = A[i] + 1.0

    lets = stmts_of(k, N.Let)
    assert [l.var.name for l in lets] == ["x", "x_1"]
    loops = stmts_of(k, N.For)
    assert [l.var.name for l in loops] == ["i", "i_1"]


def test_literals_adopt_dtype_and_promotion_casts():
    @T.prim_func
    def k(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            for i in T.Parallel(4):
                A[i] = A[i] * 2 + B[i]

    store = stmts_of(k, N.Store)[0]
    mul = store.value.a
    assert mul.dtype == "float16" and mul.b == N.Const(2.0, "float16")
    assert store.value.b == N.Cast(N.Load(k.params[1], (N.Var("i"),), "int32"), "float16")


def test_integer_true_division_is_an_error():
    with pytest.raises(TileCompileError, match="use '//'"):

        @T.prim_func
        def k(A: T.Tensor((4,), "int32")):
            with T.Kernel(1):
                for i in T.Parallel(4):
                    A[i] = A[i] / 2


def test_python_if_and_for_resolved_at_parse_time():
    def factory(use_exp, scales):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1):
                for s in scales:
                    for i in T.Parallel(4):
                        if use_exp:
                            A[i] = T.exp(A[i]) * s
                        else:
                            A[i] = A[i] * s

        return k

    f = factory(True, (1.0, 2.0))
    assert len(stmts_of(f, N.Parallel)) == 2
    assert sum(isinstance(n, N.Call) for n in walk(f)) == 2
    assert not stmts_of(f, N.If)
    g = factory(False, (3.0,))
    assert not any(isinstance(n, N.Call) for n in walk(g))


def test_runtime_if_and_alloc_var():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            acc = T.alloc_var("float32")
            acc = 0
            for i in range(8):
                if A[i] > 0:
                    acc = acc + A[i]
            A[0] = acc

    allocs = stmts_of(k, N.Alloc)
    assert allocs[0].buffer.scope == "var" and allocs[0].buffer.shape == (1,)
    stores = stmts_of(k, N.Store)
    assert stores[0].buffer.name == "acc" and stores[0].value == N.Const(0.0, "float32")
    assert len(stmts_of(k, N.If)) == 1
    assert isinstance(stores[-1].value, N.Load) and stores[-1].value.buffer.name == "acc"


def test_dynamic_dims():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m, 64), "float32"), B: T.Tensor((m, 64), "float32")):
        with T.Kernel(T.ceildiv(m, 32)) as bx:
            s = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], s)
            T.copy(s, B[bx * 32, 0])

    assert k.dyn_vars == (N.Var("m"),)
    assert k.params[0].shape == (N.Var("m"), 64)
    grid = k.kernel.grid[0]
    assert isinstance(grid, N.BinOp) and grid.op == "//"


def test_loops_range_serial_unroll_bounds():
    @T.prim_func
    def k(A: T.Tensor((16,), "float32")):
        with T.Kernel(2) as bx:
            for i in range(2, 6):
                A[i] = 0.0
            for j in T.unroll(bx, bx + 4):
                A[j] = 1.0
            for t in T.serial(bx, 8):
                A[t] = 2.0

    loops = stmts_of(k, N.For)
    assert loops[0].begin == N.Const(2, "int32") and loops[0].extent == N.Const(4, "int32")
    assert loops[1].kind == "unroll" and loops[1].extent == N.Const(4, "int32")
    assert loops[2].extent == N.BinOp("-", N.Const(8, "int32"), N.Var("bx"), "int32")


def test_step_is_an_error():
    with pytest.raises(TileCompileError, match="step"):

        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1):
                for i in range(0, 16, 2):
                    A[i] = 0.0


def test_atomic_element_and_tile_forms():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1):
            f = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0, 0], f)
            T.atomic_add(C[16, 16], f)
            for i, j in T.Parallel(16, 16):
                T.atomic_max(C[i, j], f[i, j])

    tile, elem = stmts_of(k, N.Atomic)
    assert isinstance(tile.value, N.Region) and tile.dst.extents == (16, 16)
    assert elem.kind == "max" and elem.dst.extents == (1, 1) and isinstance(elem.value, N.Load)


def test_reduce_cumsum_print_hints():
    @T.prim_func
    def k(A: T.Tensor((8, 16), "float32")):
        with T.Kernel(1):
            f = T.alloc_fragment((8, 16), "float32")
            r = T.alloc_fragment((8,), "float32")
            T.copy(A, f)
            T.reduce_absmax(f, r, dim=-1, clear=False)
            T.cumsum(f, dim=1, reverse=True)
            T.print(f, msg="f")
            T.print(r[0])

    red = stmts_of(k, N.Reduce)[0]
    assert (red.kind, red.dim, red.clear) == ("absmax", 1, False)
    cs = stmts_of(k, N.Cumsum)[0]
    assert cs.dst == cs.src and cs.reverse
    prints = stmts_of(k, N.Print)
    assert isinstance(prints[0].value, N.Buffer) and prints[0].msg == "f"
    assert isinstance(prints[1].value, N.Load)


def test_intrinsics_outside_a_kernel_explain_themselves():
    with pytest.raises(T.KernelOnlyError, match="inside the body of a @T.prim_func"):
        T.copy(1, 2)
    assert T.ceildiv(10, 4) == 3
    assert T.max(2, 5) == 5


def test_future_annotations_module(tmp_path):
    """String annotations (PEP 563) are evaluated with the factory's values."""
    (tmp_path / "future_kernel.py").write_text(
        "from __future__ import annotations\n"
        "import tilecore.language as T\n\n"
        "def make(n, dtype):\n"
        "    m = T.dynamic('m')\n"
        "    @T.prim_func\n"
        "    def k(A: T.Tensor((m, n), dtype)):\n"
        "        with T.Kernel(T.ceildiv(m, 4)) as bx:\n"
        "            for i, j in T.Parallel(4, n):\n"
        "                A[bx * 4 + i, j] = 1.0\n"
        "    return k\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import future_kernel

        f = future_kernel.make(8, "float16")
    finally:
        sys.path.remove(str(tmp_path))
    assert f.params[0].shape == (N.Var("m"), 8) and f.params[0].dtype == "float16"
    assert f.span.file.endswith("future_kernel.py") and f.span.line == 7


def test_kernel_values_before_the_kernel_are_inlined():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m,), "float32")):
        tiles = T.ceildiv(m, 32)
        with T.Kernel(tiles) as bx:
            A[bx] = 0.0

    assert isinstance(k.kernel.grid[0], N.BinOp)
    assert not stmts_of(k, N.Let)


def test_python_loop_unrolls_and_renames_lets():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            for c in [1.0, 2.0, 3.0]:
                y = A[0] * c
                A[1] = y

    assert [l.var.name for l in stmts_of(k, N.Let)] == ["y", "y_1", "y_2"]
    assert [l.value.b.value for l in stmts_of(k, N.Let)] == [1.0, 2.0, 3.0]


def test_parse_time_assert_and_alloc_var_init():
    def make(n):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32")):
            assert n % 4 == 0, f"n={n} must be a multiple of 4"
            with T.Kernel(1):
                v = T.alloc_var("int32", init=3)
                A[0] = T.cast(v, "float32")

        return k

    f = make(8)
    store = stmts_of(f, N.Store)[0]
    assert store.buffer.scope == "var" and store.value == N.Const(3, "int32")
    with pytest.raises(TileCompileError, match="assertion failed: n=6 must be a multiple of 4"):
        make(6)


def test_special_constants():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            A[0] = -T.infinity("float32")
            A[1] = T.float32("-inf")
            A[2] = T.float16(1) + A[2]

    values = [s.value for s in stmts_of(k, N.Store)]
    assert values[0] == N.UnaryOp("neg", N.Const(float("inf"), "float32"), "float32")
    assert values[1] == N.Const(float("-inf"), "float32")
    assert values[2].a == N.Cast(N.Const(1.0, "float16"), "float32")


@pytest.mark.parametrize(
    "body, message",
    [
        ("T.exp(A[0])", "computes a value"),
        ("x = T.Parallel(4)", "is a loop"),
        ("T.copy(A[0, 0], A[1, 1])", "both operands are start points"),
        ("T.atomic_add(A[0:2, 0], 1.0)", "needs an element destination"),
        ("T.annotate_layout({A: A})", "must be T.make_swizzled_layout(A)"),
        ("T.gemm(A[0, 0], A, A)", "needs a whole buffer or a slice region"),
        ("T.fill(A[0:2, k:k + 1], 1.0)", "undefined name 'k'"),
        ("T.copy(A[0:2, :], A[2:4:2, :])", "slices with a step"),
        ("T.reduce_sum(A, A, dim=2)", "dim 2 is out of range"),
        ("T.use_swizzle(panel_size=0)", "panel_size must be at least 1"),
        ('s = T.alloc_shared((8,), "float17")', "unknown dtype 'float17'"),
        ('A[0, 0] = T.cast(A[0, 1], "half8")', "unknown dtype 'half8'"),
        ('s = T.alloc_shared((8, n), "float32")', "undefined name 'n'"),
        ('s = T.alloc_fragment((8, bx), "float32")', "known at parse time, got (8, bx)"),
        ('A[0, 0] = T.infinity("int32")', "T.infinity needs a float dtype"),
        ("A[0:2, 0] = 1.0", "assigning to a slice is not supported"),
        ("A[0] = 1.0", "A has 2 dimension(s) but is indexed with 1"),
        ("for i in T.Parallel(bx):\n            pass", "must be known at parse time"),
    ],
)
def test_misuse_of_operations(body, message):
    text = (
        "import tilecore.language as T\n\n@T.prim_func\n"
        'def k(A: T.Tensor((8, 8), "float32")):\n'
        "    with T.Kernel(1, threads=32) as bx:\n"
        f"        {body}\n"
    )
    with pytest.raises(TileCompileError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        parse_source(text)
    assert info.value.span.line == 6


@pytest.mark.parametrize(
    "header, message",
    [
        ("with T.Kernel(1, 2) as bx:", "2 grid dimension(s) but 1 block index name(s)"),
        ("with T.Kernel(1, 2, 3, 4):", "1 to 3 grid dimensions"),
        ("with T.Kernel(0) as bx:", "must be positive"),
        ("with T.Kernel(1, threads=0) as bx:", "threads must be a positive int"),
    ],
)
def test_kernel_header_errors(header, message):
    text = (
        "import tilecore.language as T\n\n@T.prim_func\n"
        'def k(A: T.Tensor((8, 8), "float32")):\n'
        f"    {header}\n"
        "        pass\n"
    )
    with pytest.raises(TileCompileError, match=re.escape(message)):
        parse_source(text)


def test_a_function_needs_a_kernel():
    text = 'import tilecore.language as T\n\n@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n    x = 1\n'
    with pytest.raises(TileCompileError, match="must contain a `with T.Kernel"):
        parse_source(text)


from dsl_strategies import dsl_programs  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dsl_programs())
def test_random_programs_have_a_span_on_every_node_inside_the_text(text):
    func = parse_source(text)
    n_lines = len(text.splitlines())
    for node in walk(func):
        span = getattr(node, "span", None)
        if span is not None:
            assert 1 <= span.line <= span.end_line <= n_lines, node
            assert span.line < span.end_line or span.col < span.end_col, node


def test_tilelang_codegen_hints_are_accepted():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1):
            a = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.clear(c)
            for s in T.Pipelined(2, num_stages=2, order=[0, 1], stage=[0, 1]):
                T.copy(A, a, disable_tma=True)
                T.gemm(a, a, c, transpose_B=True, k_pack=2, wg_wait=-1)
            T.copy(c, C, coalesced_width=4)

    assert len(stmts_of(k, N.Copy)) == 2 and stmts_of(k, N.For)[0].num_stages == 2


def test_the_version_1_surface_exists():
    names = """prim_func Tensor Buffer dynamic Kernel alloc_shared alloc_fragment alloc_local alloc_var
        copy fill clear gemm GemmWarpPolicy reduce_sum reduce_max reduce_min reduce_abssum
        reduce_absmax cumsum atomic_add atomic_max atomic_min Parallel Pipelined serial unroll
        exp exp2 log log2 sqrt rsqrt tanh sigmoid sin cos floor ceil abs pow max min cast
        if_then_else infinity ceildiv print use_swizzle annotate_layout make_swizzled_layout
        float16 bfloat16 float32 float64 int8 int16 int32 int64 uint8 bool""".split()
    missing = [n for n in names if not hasattr(T, n)]
    assert not missing
    assert T.float16 == "float16" and isinstance(T.bool, str)
    assert T.GemmWarpPolicy.FullRow.value == "full_row"
