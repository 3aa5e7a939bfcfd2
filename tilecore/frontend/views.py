"""Buffer views and `T.im2col`, written out as element loops at parse time.

* `T.Tensor(shape, dtype, A.data)` inside a kernel is a *view*: the elements of the global
  tensor `A`, in row-major order, read with another shape (a reshape, as TileLang's
  `kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)`). A view may be the source
  or destination of `T.copy`; the copy becomes a `T.Parallel` loop whose indices are mapped
  through the flat element number, with the tile-copy rules at the view's edges (reads
  outside it give zero, writes outside it are dropped).
* `T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` fills the tile `col`
  (rows: output pixels n*OH*OW + oh*OW + ow; columns: (kh*kernel + kw)*C + c) from an NHWC
  image, zero where the window reaches into the padding or past the image.

Nothing new reaches the IR: every backend runs these as the loads, stores and selects they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from ..ir import nodes as N
from ..language.tensor import TensorType
from . import exprs as E
from .evaluator import Evaluator


@dataclass(frozen=True)
class BufferData:
    """`A.data` inside a kernel: the storage of global tensor `A`, for `T.Tensor(..., A.data)`."""

    buffer: N.Buffer

    def __repr__(self) -> str:
        return f"{self.buffer.name}.data"


class BufferViews(Evaluator):
    """View operands of T.copy and T.im2col, lowered to element loops."""

    fresh: Callable[[str], str]  # a new unique name (the parser's)

    def view_buffer(self, ttype: TensorType, node) -> N.Buffer:
        """The stand-in buffer (the view's shape) of a `T.Tensor(shape, dtype, A.data)` view."""
        views: Dict[int, Tuple[TensorType, N.Buffer, N.Buffer]] = self.__dict__.setdefault("_views", {})
        known = views.get(id(ttype))
        if known is not None:
            return known[1]
        data = ttype.data
        assert isinstance(data, BufferData)  # the parser makes views only of `A.data`
        base = data.buffer
        if ttype.dtype != base.dtype:
            raise self.error(
                f"a view of {base.name} must have its dtype {base.dtype}, not {ttype.dtype} "
                "(a view reinterprets no bits; convert with T.copy)",
                node,
            )
        shapes = (ttype.shape, base.shape)
        if any(not isinstance(d, int) for shape in shapes for d in shape):
            raise self.error(f"a view of {base.name} needs static shapes (got {ttype.shape} over {base.shape})", node)
        view_n, base_n = math.prod(_static(ttype.shape)), math.prod(_static(base.shape))
        if view_n > base_n:
            raise self.error(
                f"the view of shape {ttype.shape} has more elements than {base.name} "
                f"{base.shape} ({view_n} > {base_n})",
                node,
            )
        stand_in = N.Buffer(self.fresh(f"{base.name}_view"), tuple(ttype.shape), base.dtype, "global", self.span(node))
        views[id(ttype)] = (ttype, stand_in, base)  # the TensorType is kept alive, so its id stays unique
        return stand_in

    def viewed_base(self, buffer: N.Buffer):
        """The tensor a stand-in buffer views, or None for an ordinary buffer."""
        for _, stand_in, base in self.__dict__.get("_views", {}).values():
            if stand_in is buffer:
                return base
        return None

    def check_not_a_view(self, buffer: N.Buffer, what: str, node) -> None:
        if self.viewed_base(buffer) is not None:
            raise self.error(
                f"{what} cannot be a buffer view (T.Tensor(..., A.data)); views are "
                "supported as the source or destination of T.copy",
                node,
            )

    # ------------------------------------------------------------------ copy through a view

    def copy_through_view(self, src: N.Region, dst: N.Region, node) -> List[N.Stmt]:
        """`T.copy` where one side (or both) is a view: a T.Parallel over the copied tile."""
        span = self.span(node)
        extents = tuple(e for e in src.extents if e != 1) or (1,)
        loop_vars = tuple(N.Var(self.fresh(f"i{k}"), "int32", span) for k in range(len(extents)))
        src_idx = _region_indices(src, loop_vars, span)
        dst_idx = _region_indices(dst, loop_vars, span)
        src_base = self.viewed_base(src.buffer)
        value: N.Expr
        if src_base is None:
            value = N.Load(src.buffer, src_idx, src.buffer.dtype, span)
        else:
            inside, mapped = self.view_to_base(src.buffer, src_base, src_idx, span)
            value = E.select(
                inside, N.Load(src_base, mapped, src_base.dtype, span), E.const(0, src_base.dtype, span), span
            )
        dst_base = self.viewed_base(dst.buffer)
        if dst_base is None:
            body: Tuple[N.Stmt, ...] = (N.Store(dst.buffer, dst_idx, value, span),)
        else:
            inside, mapped = self.view_to_base(dst.buffer, dst_base, dst_idx, span)
            body = (N.If(inside, (N.Store(dst_base, mapped, value, span),), (), span),)
        return [N.Parallel(loop_vars, extents, body, span)]

    def view_to_base(self, view: N.Buffer, base: N.Buffer, indices: Sequence[N.Expr], span):
        """(whether `indices` lie inside the view, the base tensor's indices of that element).

        Indices are clamped into the view before mapping, so the mapped load or store stays
        inside the base tensor even for the lanes the predicate turns off."""
        inside = None
        flat: N.Expr = E.const(0, "int32", span)
        for index, dim in zip(indices, _static(view.shape)):
            ok = E.binary("and", E.binary(">=", index, 0, span), E.binary("<", index, dim, span), span)
            inside = ok if inside is None else E.binary("and", inside, ok, span)
            clamped = E.binary("max", E.binary("min", index, dim - 1, span), 0, span)
            flat = E.binary("+", E.binary("*", flat, dim, span), clamped, span)
        mapped = []
        for dim_after in _suffix_products(_static(base.shape)):
            mapped.append(E.binary("%", E.binary("//", flat, dim_after[1], span), dim_after[0], span))
        return inside, tuple(mapped)

    # ------------------------------------------------------------------ im2col

    def im2col_stmts(
        self, img: N.Buffer, col: N.Region, nhw_step: N.Expr, c_step: N.Expr, window: Tuple[int, int, int, int], node
    ) -> List[N.Stmt]:
        """T.im2col: col[i, j] = the image element of output row nhw_step*BM + i, patch column
        c_step*BK + j (BM, BK: the tile's last two extents), zero outside the image."""
        kernel, stride, dilation, pad = window
        span = self.span(node)
        if img.ndim != 4 or any(not isinstance(d, int) for d in img.shape):
            raise self.error(
                f"the image of T.im2col must be a 4-D NHWC tensor of static shape, got {img.name} {img.shape}", node
            )
        batch, height, width, channels = _static(img.shape)
        out_h = (height + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
        out_w = (width + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
        if out_h <= 0 or out_w <= 0:
            raise self.error(
                f"T.im2col: the {kernel}x{kernel} window (dilation {dilation}, padding "
                f"{pad}) does not fit the {height}x{width} image",
                node,
            )
        if len(col.extents) < 2 or any(e != 1 for e in col.extents[:-2]):
            raise self.error(f"the tile of T.im2col must be 2-D (rows, columns), got extents {col.extents}", node)
        rows, cols = col.extents[-2:]
        i, j = (N.Var(self.fresh(name), "int32", span) for name in ("i", "j"))
        b = lambda op, x, y: E.binary(op, x, y, span)  # noqa: E731
        m = b("+", b("*", nhw_step, rows), i)
        k = b("+", b("*", c_step, cols), j)
        h = b(
            "-",
            b(
                "+",
                b("*", b("//", b("%", m, out_h * out_w), out_w), stride),
                b("*", b("//", k, kernel * channels), dilation),
            ),
            pad,
        )
        w = b(
            "-", b("+", b("*", b("%", m, out_w), stride), b("*", b("%", b("//", k, channels), kernel), dilation)), pad
        )
        n = b("//", m, out_h * out_w)
        checks = [
            b(">=", h, 0),
            b("<", h, height),
            b(">=", w, 0),
            b("<", w, width),
            b(">=", m, 0),
            b("<", m, batch * out_h * out_w),
            b(">=", k, 0),
            b("<", k, kernel * kernel * channels),
        ]
        inside = checks[0]
        for check in checks[1:]:
            inside = b("and", inside, check)
        clamp = lambda x, hi: b("max", b("min", x, hi - 1), 0)  # noqa: E731
        load = N.Load(img, (clamp(n, batch), clamp(h, height), clamp(w, width), b("%", k, channels)), img.dtype, span)
        value = E.select(inside, load, E.const(0, img.dtype, span), span)
        dst = tuple(col.starts[:-2]) + (b("+", col.starts[-2], i), b("+", col.starts[-1], j))
        return [N.Parallel((i, j), (rows, cols), (N.Store(col.buffer, dst, value, span),), span)]


def _static(shape) -> Tuple[int, ...]:
    """A shape whose dimensions were checked to be ints, typed as such."""
    return tuple(d for d in shape if isinstance(d, int))


def _region_indices(region: N.Region, loop_vars: Sequence[N.Var], span) -> Tuple[N.Expr, ...]:
    """The element of `region` at the loop's point: non-unit dimensions take the loop variables
    in order, unit ones stay at their start."""
    out, k = [], 0
    for start, extent in zip(region.starts, region.extents):
        if extent == 1:
            out.append(start)
        else:
            out.append(E.binary("+", start, loop_vars[k], span))
            k += 1
    return tuple(out)


def _suffix_products(shape: Sequence[int]):
    """(dim, product of the dims after it) for each dimension of a row-major shape."""
    out, after = [], 1
    for dim in reversed(shape):
        out.append((dim, after))
        after *= dim
    return list(reversed(out))
