"""Buffer views (`T.Tensor(shape, dtype, A.data)`) and `T.im2col`: written out by the frontend as
element loops, so every backend runs them; checked against numpy on reference and cpu."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError
from tilecore.ir.printer import to_source


def im2col_numpy(img, rows, cols, grid, window):
    """The whole im2col matrix of `grid` (row blocks, column blocks) tiles, by the definition."""
    kernel, stride, dilation, pad = window
    n_img, height, width, channels = img.shape
    out_h = (height + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    out_w = (width + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    out = np.zeros((grid[0] * rows, grid[1] * cols), img.dtype)
    for m in range(min(out.shape[0], n_img * out_h * out_w)):
        n, oh, ow = m // (out_h * out_w), (m % (out_h * out_w)) // out_w, m % out_w
        for k in range(min(out.shape[1], kernel * kernel * channels)):
            kh, kw, c = k // (kernel * channels), (k // channels) % kernel, k % channels
            h, w = oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad
            if 0 <= h < height and 0 <= w < width:
                out[m, k] = img[n, h, w, c]
    return out


def im2col_kernel(shape, rows, cols, grid, window, dtype="float32"):
    kernel, stride, dilation, pad = window

    @T.prim_func
    def patches(Img: T.Tensor(shape, dtype), Out: T.Tensor((grid[0] * rows, grid[1] * cols), dtype)):
        with T.Kernel(grid[0], grid[1]) as (bx, by):
            tile = T.alloc_shared((rows, cols), dtype)
            T.im2col(Img, tile, bx, by, kernel, stride, dilation, pad)
            T.copy(tile, Out[bx * rows, by * cols])

    return patches


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 2),
    hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    c=st.integers(1, 5),
    window=st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(1, 2), st.integers(0, 2)),
    tile=st.tuples(st.sampled_from([1, 4, 8]), st.sampled_from([2, 8])),
    data=st.data(),
)
def test_im2col_matches_its_definition(n, hw, c, window, tile, data):
    kernel, stride, dilation, pad = window
    out_h = (hw[0] + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    out_w = (hw[1] + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if out_h <= 0 or out_w <= 0:
        with pytest.raises(TileCompileError, match="does not fit the"):
            im2col_kernel((n, *hw, c), *tile, (1, 1), window)
        return
    # enough tiles to cover the matrix, and sometimes one more (rows/columns past it are zero)
    grid = (
        -(-n * out_h * out_w // tile[0]) + data.draw(st.integers(0, 1)),
        -(-kernel * kernel * c // tile[1]) + data.draw(st.integers(0, 1)),
    )
    img = np.random.default_rng(0).standard_normal((n, *hw, c)).astype(np.float32)
    kernel_ = tilecore.compile(im2col_kernel(img.shape, *tile, grid, window), target="reference", out_idx=[-1])
    np.testing.assert_array_equal(kernel_(img), im2col_numpy(img, *tile, grid, window))


@pytest.mark.parametrize("window", [(3, 1, 1, 1), (2, 2, 1, 0), (3, 1, 2, 2)])
def test_im2col_on_cpu(window):
    pytest.importorskip("tile_cpu")
    img = np.random.default_rng(1).standard_normal((2, 6, 5, 3)).astype(np.float16)
    grid = (9, 4)
    kernel = tilecore.compile(im2col_kernel(img.shape, 8, 8, grid, window, "float16"), target="cpu", out_idx=[-1])
    np.testing.assert_array_equal(kernel(img), im2col_numpy(img, 8, 8, grid, window))


def reshape_kernel(shape, view_shape, rows, cols, grid):
    """Out (through a view of shape view_shape) = 2 * A read through a view of that shape."""

    @T.prim_func
    def reshaped(A: T.Tensor(shape, "float32"), Out: T.Tensor(shape, "float32")):
        with T.Kernel(grid[0], grid[1]) as (bx, by):
            tile = T.alloc_fragment((rows, cols), "float32")
            a_view = T.Tensor(view_shape, "float32", A.data)
            out_view = T.Tensor(view_shape, "float32", Out.data)
            T.copy(a_view[bx * rows, by * cols], tile)
            for i, j in T.Parallel(rows, cols):
                tile[i, j] = tile[i, j] * 2
            T.copy(tile, out_view[bx * rows : (bx + 1) * rows, by * cols : (by + 1) * cols])

    return reshaped


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize(
    "shape, view_shape, tile", [((3, 4, 5), (12, 5), (4, 2)), ((6, 10), (15, 4), (4, 3)), ((2, 3, 4), (4, 6), (3, 4))]
)
def test_views_reshape_reads_and_writes_with_tile_copy_edges(target, shape, view_shape, tile):
    if target == "cpu":
        pytest.importorskip("tile_cpu")
    grid = (-(-view_shape[0] // tile[0]), -(-view_shape[1] // tile[1]))  # the last tiles overhang the view
    kernel = tilecore.compile(reshape_kernel(shape, view_shape, *tile, grid), target=target, out_idx=[-1])
    a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a * 2)


def test_a_view_smaller_than_its_tensor_leaves_the_rest():
    @T.prim_func
    def head(A: T.Tensor((4, 6), "float32"), Out: T.Tensor((4, 6), "float32")):
        with T.Kernel(1) as _:
            T.fill(Out, -1)  # written first, so the view's writes land on top of it
            T.copy(T.Tensor((2, 5), "float32", A.data), T.Tensor((2, 5), "float32", Out.data))

    kernel = tilecore.compile(head, target="reference", out_idx=[-1])
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected = np.full(24, -1, np.float32)
    expected[:10] = a.ravel()[:10]
    np.testing.assert_array_equal(kernel(a), expected.reshape(4, 6))
    assert "T.Parallel" in to_source(head) and "T.copy" not in to_source(head)


@pytest.mark.parametrize(
    "body, message",
    [
        ("v = T.Tensor((4, 6), 'float16', A.data)\n            T.copy(v, S)", "must have its dtype float32"),
        ("v = T.Tensor((5, 5), 'float32', A.data)\n            T.copy(v[0, 0], S)", "has more elements than A"),
        ("v = T.Tensor((6, 4), 'float32', A.data)\n            T.fill(v, 0)", "cannot be a buffer view"),
        ("T.copy(T.Tensor((4, 4), 'float32', S.data), A[0, 0])", "no attribute 'data'"),
        ("T.im2col(S, S, 0, 0, 3, 1, 1, 1)", "the image of T.im2col must be a global tensor"),
        ("T.im2col(A, S, 0, 0, 3, 1, 1, 1)", "must be a 4-D NHWC tensor"),
    ],
)
def test_view_and_im2col_misuse_is_a_located_error(tmp_path, body, message):
    source = f"""
import tilecore.language as T

@T.prim_func
def bad(A: T.Tensor((4, 6), "float32")):
    with T.Kernel(1) as _:
        S = T.alloc_shared((4, 4), "float32")
        if True:
            {body}
"""
    path = tmp_path / "bad_kernel.py"
    path.write_text(source)
    import runpy

    with pytest.raises(TileCompileError, match=message) as info:
        runpy.run_path(str(path))
    assert "bad_kernel.py:" in str(info.value)


def test_a_view_annotation_on_a_parameter_is_a_located_error():
    with pytest.raises(TileCompileError, match="annotated as a view") as info:

        @T.prim_func
        def bad(A: T.Tensor((4,), "float32", "A.data")):
            with T.Kernel(1) as _:
                A[0] = 1

    assert "test_buffer_views.py:" in str(info.value)
