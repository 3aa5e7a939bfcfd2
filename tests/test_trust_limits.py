"""Issue 16, findings 5, 10 and 11: no silent wrong answer at the edges. Dynamic dimensions past what
a backend can index, torch tensors with the negative bit, an output that is also an input, and the
resource limits (expression depth, grid size, interpreter memory) all give clear, located errors."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileRuntimeError
from tilecore.ir import nodes as N

M = T.dynamic("M")


@T.prim_func
def double_into(A: T.Tensor((M,), "int8"), C: T.Tensor((M,), "int8")):
    with T.Kernel(T.ceildiv(M, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < M:
                C[bx * 64 + i] = A[bx * 64 + i] * 2


@pytest.fixture(scope="module", params=["cpu", "npu", "reference"])
def kernel(request):
    return tilecore.compile(double_into, target=request.param)


def test_results_are_right_on_ordinary_inputs(kernel):
    a = np.arange(-50, 50, dtype=np.int8)
    c = np.zeros_like(a)
    kernel(a, c)
    np.testing.assert_array_equal(c, a * 2)


@pytest.mark.parametrize("m", [2**31 + 4096, 2**32 + 4096])
def test_dynamic_dimension_past_int32_is_refused(kernel, m):
    """cpu returned all zeros (2^31 + 4096) or computed 4096 elements (2^32 + 4096), silently; the
    interpreter (64-bit indices) wrapped the int32 M into a "negative grid size" or a 1-block grid."""
    a = np.empty(m, np.int8)  # never touched: the call is refused before anything runs
    with pytest.raises(TileRuntimeError) as info:
        kernel(a, np.empty(m, np.int8))
    msg = str(info.value)
    assert f"dimension 0 (M) is {m}" in msg
    if kernel.backend.capabilities.index_bits >= 64:
        assert "more than its declared dtype int32 can hold (at most 2147483647)" in msg
        assert "T.dynamic('M', \"int64\")" in msg
    else:
        assert "32-bit signed indices" in msg
    assert "double_into(A:" in msg or "argument 'A'" in msg


def test_torch_negative_bit_is_resolved_for_inputs_and_refused_for_outputs(kernel):
    torch = pytest.importorskip("torch")
    a = torch.arange(-20, 20, dtype=torch.int8)
    neg = torch._neg_view(a)
    assert neg.is_neg()
    c = torch.zeros(40, dtype=torch.int8)
    kernel(neg, c)
    torch.testing.assert_close(c, -a * 2)
    c2 = torch.zeros(40, dtype=torch.int8)
    kernel(a, c2)  # the same signature without the bit: its own plan, its own answer
    torch.testing.assert_close(c2, a * 2)
    kernel(neg, c)
    torch.testing.assert_close(c, -a * 2)
    with pytest.raises(TileRuntimeError, match="negative bit set.*the kernel writes it"):
        kernel(a, torch._neg_view(torch.zeros(40, dtype=torch.int8)))


def test_torch_conjugate_bit_is_refused(kernel):
    """A lazily conjugated view's memory does not hold its values; tilecore has no complex dtype,
    so such a tensor is refused by name before its dtype is even looked at."""
    torch = pytest.importorskip("torch")
    conj = torch.arange(40, dtype=torch.float32).to(torch.complex64).conj()
    assert conj.is_conj()
    with pytest.raises(TileRuntimeError, match="argument 'A': got a torch tensor with its conjugate bit set"):
        kernel(conj, torch.zeros(40, dtype=torch.int8))


def test_output_sharing_memory_with_an_input_is_refused(kernel):
    """The same array as input and output gave an order-dependent result."""
    a = np.arange(64, dtype=np.int8)
    c = np.zeros_like(a)
    kernel(a, c)  # remembered plan for this signature ...
    for alias in (a, a.view()):  # ... still checks which memory each call passes
        with pytest.raises(TileRuntimeError, match="'C'.*shares memory with argument 'A'"):
            kernel(a, alias)
    buf = np.arange(65, dtype=np.int8)
    with pytest.raises(TileRuntimeError, match="shares memory"):
        kernel(buf[1:], buf[:-1])  # overlapping views
    np.testing.assert_array_equal(a, np.arange(64, dtype=np.int8))


def test_static_shape_past_int32_is_a_compile_error():
    @T.prim_func
    def huge(A: T.Tensor((2**31 + 4096,), "int8"), B: T.Tensor((16,), "int8")):
        with T.Kernel(1) as bx:
            B[0] = A[7]

    for target in ("cpu", "npu"):  # cpu used to leak "Literal value 2147488281 exceeds range of int32"
        with pytest.raises(TileCompileError, match="dimension 0 of 'A' has 2147487744 elements.*32-bit") as info:
            tilecore.compile(huge, target=target)
        assert "T.Tensor((2**31 + 4096,)" in str(info.value)


def test_deep_expression_is_a_located_error(tmp_path):
    """~600 chained `+` gave a raw RecursionError with a 1000-frame traceback."""
    terms = " + ".join(["A[i]"] * 600)
    path = tmp_path / "deep_kernel.py"
    path.write_text(
        "import tilecore.language as T\n\n\n"
        "@T.prim_func\n"
        "def deep(A: T.Tensor((16,), 'float32'), B: T.Tensor((16,), 'float32')):\n"
        "    with T.Kernel(1) as bx:\n"
        "        for i in T.Parallel(16):\n"
        f"            B[i] = {terms}\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("deep_kernel", path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(TileCompileError) as info:
        spec.loader.exec_module(module)
    assert f"{path}:8:" in str(info.value) and "nested more than 128 operations deep" in str(info.value)


def test_huge_grid_on_the_interpreter_is_a_located_error():
    """A huge grid on reference failed with an empty `MemoryError:`."""
    kernel = tilecore.compile(double_into, target="reference")
    a = np.empty(2**31 - 64, np.int8)
    with pytest.raises(TileRuntimeError, match=r"the grid \(33554431,\) has 33554431 blocks.*at most"):
        kernel(a, np.empty_like(a))


def test_interpreter_estimates_memory_before_allocating():
    @T.prim_func
    def big_tile(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((1 << 21, 1 << 21), "float32")  # 16 TiB
            T.copy(A, B)

    kernel = tilecore.compile(big_tile, target="reference")
    with pytest.raises(TileRuntimeError) as info:
        kernel(np.zeros(16, np.float32), np.zeros(16, np.float32))
    assert "allocating s of shape (2097152, 2097152) (float32) needs 16384.0 GiB" in str(info.value)
    assert "T.alloc_shared((1 << 21, 1 << 21)" in str(info.value)


def test_gigabyte_fragment_on_cpu_is_a_compile_error():
    """1 GiB fragments per block were accepted silently on cpu."""
    pytest.importorskip("tile_cpu")

    @T.prim_func
    def huge_fragment(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((16384, 16384), "float32")
            T.fill(f, 1.0)
            for i in T.Parallel(16):
                B[i] = A[i] + f[i, 0]

    with pytest.raises(TileCompileError, match="needs 1073741824 bytes but backend cpu allows 268435456") as info:
        tilecore.compile(huge_fragment, target="cpu", out_idx=[-1])
    assert 'T.alloc_fragment((16384, 16384), "float32")' in str(info.value)


def test_dynamic_array_with_more_than_int32_elements_is_refused():
    """Flat offsets of dynamically shaped arrays are int32 on the TVM backends: a 2-D array whose
    dimensions each fit but whose element count does not would wrap."""
    N2 = T.dynamic("N2")

    @T.prim_func
    def rows(A: T.Tensor((N2, 65536), "int8"), C: T.Tensor((N2, 65536), "int8")):
        with T.Kernel(N2) as bx:
            for j in T.Parallel(65536):
                C[bx, j] = A[bx, j]

    kernel = tilecore.compile(rows, target="npu")
    a = np.empty((2**15 + 2, 65536), np.int8)  # 2^31 + 2^17 elements, never touched
    with pytest.raises(TileRuntimeError, match=r"has 2147614720 elements \(shape \(32770, 65536\)\)"):
        kernel(a, np.empty_like(a))


def _inc(x):
    """A plain helper, inlined where it is called with a kernel value."""
    return x + 1.0


@T.prim_func
def nested_helpers(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            B[i] = _inc(_inc(_inc(_inc(_inc(_inc(_inc(_inc(A[i]))))))))


def test_nested_helper_calls_are_translated_once_each():
    """Each nested helper call evaluated its argument twice, so the work (and the statements made)
    doubled per level: 14 nested calls of a one-line helper ran for minutes. Now one `Let` per call."""
    from tilecore.ir.visitor import walk_stmts

    lets = [s for s in walk_stmts(nested_helpers.body) if isinstance(s, N.Let)]
    assert len(lets) == 8
    kernel = tilecore.compile(nested_helpers, target="reference", out_idx=[-1])
    np.testing.assert_array_equal(kernel(np.arange(16, dtype=np.float32)), np.arange(16) + 8.0)
