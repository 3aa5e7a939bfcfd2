"""Tile-operation statements: T.copy, T.fill, T.gemm, reductions, atomics, hints, T.print."""

from __future__ import annotations

import ast
from typing import Tuple, Union

from ..ir import nodes as N
from ..ir.visitor import substitute
from ..language.tensor import TensorType, normalize_policy
from . import exprs as E
from .affine import constant_difference
from .regions import RegionArg, RegionError, pair
from .views import BufferData, BufferViews

REDUCE_OPS = {"reduce_" + kind: kind for kind in N.REDUCE_KINDS}
ATOMIC_OPS = {"atomic_" + kind: kind for kind in N.ATOMIC_KINDS}
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")


class TileOps(BufferViews):
    """Handlers `stmt_op_<name>(args, node) -> [Stmt]` for tile-operation calls."""

    # ------------------------------------------------------------------ operands

    def region_arg(self, node, what: str) -> RegionArg:
        """A whole buffer, a start point `A[i, j]` or a slice region `A[a:b, :]`."""
        if isinstance(node, ast.Subscript):
            base = self.as_view_buffer(self.eval_raw(node.value), node.value)
            if isinstance(base, N.Buffer):
                return self.subscript_region(base, node)
        value = self.as_view_buffer(self.eval_raw(node), node)
        if isinstance(value, N.Buffer):
            return self.whole_region(value, node)
        raise self.error(f"{what} must be a buffer or a region of one, got {E.describe(value)}", node)

    def as_view_buffer(self, value, node):
        """A `T.Tensor(shape, dtype, A.data)` view as its stand-in buffer; other values unchanged."""
        if isinstance(value, TensorType) and isinstance(value.data, BufferData):
            return self.view_buffer(value, node)
        return value

    def whole_region(self, buffer: N.Buffer, node) -> RegionArg:
        if buffer.static_shape() is None:
            raise self.error(
                f"{buffer.name} has the dynamic shape {shape_text(buffer.shape)}; "
                "give a start point or slices with constant extents",
                node,
            )
        zeros = tuple(E.const(0, "int32", self.span(node)) for _ in buffer.shape)
        return RegionArg(buffer, zeros, buffer.static_shape(), self.span(node))

    def subscript_region(self, buffer: N.Buffer, node: ast.Subscript) -> RegionArg:
        items = self.subscript_items(node)
        if len(items) != buffer.ndim:
            raise self.error(f"{buffer.name} has {buffer.ndim} dimension(s) but the region gives {len(items)}", node)
        if not any(isinstance(i, ast.Slice) for i in items):
            return RegionArg(buffer, tuple(self.index(i) for i in items), None, self.span(node))
        starts, extents = [], []
        for axis, item in enumerate(items):
            start, extent = self.slice_item(buffer, axis, item)
            starts.append(start)
            extents.append(extent)
        return RegionArg(buffer, tuple(starts), tuple(extents), self.span(node))

    def slice_item(self, buffer: N.Buffer, axis: int, item):
        """(start expr, int extent) of one dimension of a slice region."""
        if not isinstance(item, ast.Slice):
            return self.index(item), 1
        if item.step is not None:
            raise self.error("slices with a step are not supported in regions", item)
        dim = buffer.shape[axis]
        start = self.index(item.lower) if item.lower is not None else E.const(0, "int32", self.span(item))
        if item.upper is None:
            if not isinstance(dim, int):
                raise self.error(
                    f"dimension {axis} of {buffer.name} is dynamic ({dim.name}); an open slice needs a constant extent",
                    item,
                )
            stop: N.Expr = E.const(dim, "int32", self.span(item))
        else:
            stop = self.index(item.upper)
        extent = constant_difference(substitute(stop, self.pure_lets), substitute(start, self.pure_lets))
        if extent is None:
            raise self.error(
                f"the extent of the slice {ast.unparse(item)} does not simplify to a "
                "constant; region extents must be known at parse time",
                item,
            )
        if extent <= 0:
            raise self.error(f"the slice {ast.unparse(item)} is empty (extent {extent})", item)
        return start, extent

    def pair_regions(self, a: RegionArg, b: RegionArg, what: str, node, names=("source", "destination")):
        try:
            return pair(a, b, what, names)
        except RegionError as exc:
            raise self.error(str(exc), node) from None

    def full_region(self, node, what: str) -> N.Region:
        arg = self.region_arg(node, what)
        self.check_not_a_view(arg.buffer, what, node)
        if arg.is_start_point:
            raise self.error(f"{what} needs a whole buffer or a slice region, not a start point", node)
        return arg.region()

    # ------------------------------------------------------------------ copy, fill

    def stmt_op_copy(self, args, node):
        src = self.region_arg(args["src"], "the source of T.copy")
        dst = self.region_arg(args["dst"], "the destination of T.copy")
        src_region, dst_region = self.pair_regions(src, dst, "T.copy", node)
        if self.viewed_base(src.buffer) is not None or self.viewed_base(dst.buffer) is not None:
            return self.copy_through_view(src_region, dst_region, node)
        return [N.Copy(src_region, dst_region, True, self.span(node))]

    def stmt_op_im2col(self, args, node):
        img = self.buffer(args["img"], "the image of T.im2col")
        self.check_not_a_view(img, "the image of T.im2col", node)
        if img.scope != "global":
            raise self.error(
                f"the image of T.im2col must be a global tensor, got the {img.scope} buffer {img.name}", args["img"]
            )
        col = self.full_region(args["col"], "the tile of T.im2col")
        if col.buffer.scope == "global":
            raise self.error("the tile of T.im2col must be a shared, fragment or local buffer", args["col"])
        window = (
            self.py_int(args["kernel"], "the kernel size of T.im2col", 1),
            self.py_int(args["stride"], "the stride of T.im2col", 1),
            self.py_int(args["dilation"], "the dilation of T.im2col", 1),
            self.py_int(args["pad"], "the padding of T.im2col", 0),
        )
        return self.im2col_stmts(img, col, self.index(args["nhw_step"]), self.index(args["c_step"]), window, node)

    stmt_op_c2d_im2col = stmt_op_im2col

    def stmt_op_fill(self, args, node):
        dst = self.full_region(args["buffer"], "the buffer of T.fill")
        value = self.scalar(self.eval(args["value"]), args["value"])
        value = E.as_expr(value, self.span(args["value"]), like=dst.buffer.dtype)
        return [N.Fill(dst, value, self.span(node))]

    def stmt_op_clear(self, args, node):
        dst = self.full_region(args["buffer"], "the buffer of T.clear")
        return [N.Fill(dst, E.const(0, dst.buffer.dtype, self.span(node)), self.span(node))]

    # ------------------------------------------------------------------ gemm

    def stmt_op_gemm(self, args, node):
        a = self.full_region(args["A"], "A of T.gemm")
        b = self.full_region(args["B"], "B of T.gemm")
        c = self.full_region(args["C"], "C of T.gemm")
        trans_a = self.py_bool(args["transpose_A"], "transpose_A")
        trans_b = self.py_bool(args["transpose_B"], "transpose_B")
        self.check_gemm_shapes(a, b, c, trans_a, trans_b, node)
        try:
            policy = normalize_policy(self.py_value(args["policy"], "policy"))
        except ValueError as exc:
            raise self.error(str(exc), args["policy"]) from None
        clear = self.py_bool(args["clear_accum"], "clear_accum")
        return [N.Gemm(a, b, c, trans_a, trans_b, clear, policy, self.span(node))]

    def check_gemm_shapes(self, a, b, c, trans_a, trans_b, node):
        shapes = {}
        for label, region in (("A", a), ("B", b), ("C", c)):
            shape = list(region.extents)
            while len(shape) > 2 and 1 in shape:  # unit (batch-like) dims of a stage buffer
                shape.remove(1)
            if len(shape) != 2:
                raise self.error(
                    f"T.gemm needs 2-D tiles, but {label} ({region.buffer.name}) has shape {tuple(region.extents)}",
                    node,
                )
            shapes[label] = tuple(shape)
        m, k = shapes["A"][::-1] if trans_a else shapes["A"]
        k2, n = shapes["B"][::-1] if trans_b else shapes["B"]
        if k != k2 or shapes["C"] != (m, n):
            raise self.error(
                f"T.gemm shape mismatch: A {a.buffer.name} {shapes['A']}"
                f"{' transposed' if trans_a else ''} is {m}x{k}, B {b.buffer.name} {shapes['B']}"
                f"{' transposed' if trans_b else ''} is {k2}x{n}, C {c.buffer.name} is "
                f"{shapes['C'][0]}x{shapes['C'][1]}; need A: MxK, B: KxN, C: MxN",
                node,
            )

    # ------------------------------------------------------------------ reductions

    def reduce_dim(self, node, src: N.Buffer) -> int:
        dim = self.py_int(node, "dim")
        if not -src.ndim <= dim < src.ndim:
            raise self.error(f"dim {dim} is out of range for {src.name} with {src.ndim} dimension(s)", node)
        return dim % src.ndim

    def reduce(self, kind: str, args, node):
        src = self.buffer(args["buffer"], f"the input of T.reduce_{kind}")
        dst = self.buffer(args["out"], f"the output of T.reduce_{kind}")
        dim = self.reduce_dim(args["dim"], src)
        kept = src.shape[:dim] + src.shape[dim + 1 :]
        expected = (kept, src.shape[:dim] + (1,) + src.shape[dim + 1 :])
        if tuple(dst.shape) not in expected and not (kept == () and tuple(dst.shape) == (1,)):
            raise self.error(
                f"T.reduce_{kind} shape mismatch: reducing {src.name} "
                f"{shape_text(src.shape)} over dim {dim} gives {shape_text(kept)}, "
                f"but {dst.name} has shape {shape_text(dst.shape)}",
                node,
            )
        clear = self.py_bool(args["clear"], "clear")
        return [N.Reduce(kind, src, dst, dim, clear, self.span(node))]

    def stmt_op_cumsum(self, args, node):
        src = self.buffer(args["src"], "the input of T.cumsum")
        dst = src if args["dst"] is None else self.buffer(args["dst"], "the output of T.cumsum")
        dim = self.reduce_dim(args["dim"], src)
        if tuple(dst.shape) != tuple(src.shape):
            raise self.error(
                f"T.cumsum shape mismatch: {src.name} has shape {shape_text(src.shape)} "
                f"but {dst.name} has {shape_text(dst.shape)}",
                node,
            )
        reverse = self.py_bool(args["reverse"], "reverse")
        return [N.Cumsum(src, dst, dim, reverse, self.span(node))]

    # ------------------------------------------------------------------ atomics

    def atomic(self, kind: str, args, node):
        if self.py_bool(args["return_prev"], "return_prev"):
            raise self.return_prev_unsupported(f"atomic_{kind}", node)
        order = self.py_value(args["memory_order"], "memory_order")
        if order is not None and order not in MEMORY_ORDERS:
            raise self.error(
                f"memory_order must be one of {', '.join(MEMORY_ORDERS)}, got {order!r}", args["memory_order"]
            )
        dst = self.region_arg(args["dst"], f"the destination of T.atomic_{kind}")
        value_node = args["value"]
        # an element atomic into a block buffer is per-thread code: simt.py rewrites it, or refuses it
        if dst.buffer.scope != "global" and (self.is_tile_operand(value_node) or not dst.is_start_point):
            raise self.error(
                f"T.atomic_{kind} updates global memory, but {dst.buffer.name} is a {dst.buffer.scope} buffer",
                args["dst"],
            )
        if self.is_tile_operand(value_node):
            value_arg = self.region_arg(value_node, f"the value of T.atomic_{kind}")
            dst_region, value_region = self.pair_regions(
                dst, value_arg, f"T.atomic_{kind}", node, ("destination", "value")
            )
            return [N.Atomic(kind, dst_region, value_region, self.span(node))]
        if not dst.is_start_point:
            raise self.error(
                f"T.atomic_{kind} of a scalar needs an element destination like {dst.buffer.name}[i, j], not a region",
                args["dst"],
            )
        self.check_indices(dst.buffer, dst.starts, args["dst"])
        value = self.scalar(self.eval(value_node), value_node)
        value = E.as_expr(value, self.span(value_node), like=dst.buffer.dtype)
        region = dst.with_extents((1,) * dst.buffer.ndim)
        return [N.Atomic(kind, region, value, self.span(node))]

    def is_tile_operand(self, node) -> bool:
        """Whether an atomic's value is a tile (a buffer or slice region), not a scalar."""
        if isinstance(node, ast.Subscript):
            items = self.subscript_items(node)
            return any(isinstance(i, ast.Slice) for i in items) and isinstance(self.eval_raw(node.value), N.Buffer)
        value = self.eval_raw(node)
        return isinstance(value, N.Buffer) and value.scope != "var"

    # ------------------------------------------------------------------ print and hints

    def stmt_op_disable_warp_group_reg_alloc(self, args, node):
        return []  # a register-allocation hint of TileLang's own code generation: no effect

    def stmt_op_assume(self, args, node):
        self.eval(args["cond"])  # still checked for undefined names; not used by tilecore
        return []

    def stmt_op_print(self, args, node):
        msg = self.py_value(args["msg"], "msg")
        if not isinstance(msg, str):
            raise self.error(f"msg must be a string, got {msg!r}", args["msg"])
        value = self.eval_raw(args["obj"])
        if not isinstance(value, N.Buffer) or value.scope == "var":
            value = self.expr(args["obj"])
        return [N.Print(value, msg, self.span(node))]

    def stmt_op_use_swizzle(self, args, node):
        panel = self.py_int(args["panel_size"], "panel_size", minimum=1)
        order = self.py_value(args["order"], "order")
        if order not in ("row", "col", "column"):
            raise self.error(f"order must be 'row' or 'col', got {order!r}", args["order"])
        enable = self.py_bool(args["enable"], "enable")
        params: Tuple[Tuple[str, Union[int, float, bool, str]], ...] = (("panel_size", panel), ("enable", enable))
        if order != "row":
            params += (("order", "col"),)
        return [N.Hint("use_swizzle", (), params, self.span(node))]

    def stmt_op_annotate_layout(self, args, node):
        mapping = args["layout_map"]
        if not isinstance(mapping, ast.Dict) or any(k is None for k in mapping.keys):
            raise self.error("T.annotate_layout takes a dict literal {buf: T.make_swizzled_layout(buf)}", node)
        buffers = []
        for key, value in zip(mapping.keys, mapping.values):
            buf = self.buffer(key, "a key of T.annotate_layout")
            if self.is_swizzle_of(value, buf):
                buffers.append(buf)
            else:
                self.check_custom_layout(buf, value)  # a hint with no effect (language/layout.py)
        if not buffers:
            return []
        return [N.Hint("annotate_layout", tuple(buffers), (("layout", "swizzled"),), self.span(node))]

    def check_custom_layout(self, buf: N.Buffer, node) -> None:
        from ..language.layout import Layout

        layout = self.eval(node)
        if not isinstance(layout, Layout):
            raise self.error(
                f"the layout of {buf.name} must be T.make_swizzled_layout({buf.name}), "
                f"a T.Layout or a T.Fragment, got {E.describe(layout)}",
                node,
            )
        if len(layout.shape) != len(buf.shape) or any(
            isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(layout.shape, buf.shape)
        ):
            raise self.error(
                f"the layout's shape {layout.shape} is not the shape of {buf.name} {shape_text(buf.shape)}", node
            )

    def is_swizzle_of(self, node, buf: N.Buffer) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = self.eval(node.func)
        if getattr(func, "__tile_intrinsic__", None) != "make_swizzled_layout":
            return False
        args = self.bind_arguments(func, node, "make_swizzled_layout")
        return self.eval_raw(args["buffer"]) == buf


def shape_text(shape) -> str:
    parts = [d.name if isinstance(d, N.Var) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _add_family(ops: dict, method: str):
    for op_name, kind in ops.items():

        def handler(self, args, node, _kind=kind):
            return getattr(self, method)(_kind, args, node)

        handler.__name__ = "stmt_op_" + op_name
        handler.__doc__ = f"T.{op_name}(...)"
        setattr(TileOps, handler.__name__, handler)


_add_family(REDUCE_OPS, "reduce")
_add_family(ATOMIC_OPS, "atomic")
