"""What the editor shows about one kernel: its buffers, tile ops and launch shape (in the worker).

Everything here reads the Tile IR and the pass analyses (`memory_plan`, `layout`, `loops`,
`bounds`) and returns plain JSON-able dicts with LSP ranges, so that the server process
can answer hovers and inlay hints without the IR.
"""

from __future__ import annotations

from math import prod
from typing import Any, Dict, List, Optional

from ..ir import nodes as N
from ..ir.printer import expr_to_source
from ..ir.types import itemsize
from ..ir.visitor import walk_stmts
from .positions import byte_to_index, span_range, word_at

TILE_OPS = {"Copy": "copy", "Gemm": "gemm", "Fill": "fill", "Reduce": "reduce", "Cumsum": "cumsum", "Atomic": "atomic"}
PER_THREAD_SCOPES = ("local", "var")  # every thread keeps its own copy


def _dim(d) -> Any:
    """A dimension or start as the user would write it (constants as plain numbers)."""
    if isinstance(d, int):
        return d
    if isinstance(d, N.Const):
        return d.value
    return expr_to_source(d)


def source_name(lines: List[str], span: N.Span, fallback: str) -> str:
    """The identifier the user wrote at `span` (IR names get suffixes when rebound)."""
    if span.line <= 0 or span.line > len(lines):
        return fallback
    text = lines[span.line - 1]
    word, _, _ = word_at(text, byte_to_index(text, span.col))
    return word or fallback


def registers_per_thread(buf: N.Buffer, layout, threads: int) -> Optional[Dict[str, Any]]:
    """32-bit registers each thread needs for `buf`, and how that was derived; None off registers."""
    shape = buf.static_shape()
    if buf.scope not in ("fragment",) + PER_THREAD_SCOPES or shape is None:
        return None
    numel = prod(shape)
    elements = getattr(layout, "local_size", None)
    how = "from the inferred layout"
    if elements is None and getattr(layout, "thread_extent", None):
        elements = -(-numel * layout.replicate // layout.thread_extent)
    if elements is None:
        if buf.scope in PER_THREAD_SCOPES:
            elements, how = numel, "each thread holds a copy"
        else:
            elements, how = -(-numel // max(threads, 1)), f"if spread evenly over {threads} threads"
    return {"registers": -(-int(elements) * itemsize(buf.dtype) // 4), "elements": int(elements), "how": how}


def layout_text(layout) -> Optional[str]:
    """The inferred layout as text, with the facts an author checks first."""
    if layout is None:
        return None
    extra = []
    if hasattr(layout, "swizzle"):
        extra.append("swizzled" if layout.swizzle else "not swizzled")
    if getattr(layout, "stages", 1) and getattr(layout, "stages", 1) > 1:
        extra.append(f"{layout.stages} stages")
    if getattr(layout, "local_size", None) is not None:
        extra.append(f"{layout.local_size} elements per thread")
    return repr(layout) + (f" ({', '.join(extra)})" if extra else "")


def kernel_facts(
    func: N.PrimFunc,
    analyses: Dict[str, Any],
    def_range: Dict,
    source_lines: List[int],
    name: str,
    target: Optional[str],
) -> Dict[str, Any]:
    """Grid, threads, memory totals and pipelines of one kernel.

    `source_lines`: the first and last (0-based) line of the definition that makes it."""
    kernel = next((s for s in func.body if isinstance(s, N.Kernel)), None)
    plan = analyses.get("memory_plan")
    shared = [b for b in _allocs(func) if b.scope == "shared"]
    pipelines = [
        {
            "var": info.var,
            "line": info.span.line - 1,
            "num_stages": info.num_stages,
            "trip_count": info.trip_count,
            "stage_buffers": list(info.stage_buffers),
            "pipelined": info.pipelined,
        }
        for info in analyses.get("loops", ())
        if info.kind == "pipelined"
    ]
    return {
        "name": name,
        "prim_func": func.name,
        "range": def_range,
        "lines": list(source_lines),
        "kernel_line": kernel.span.line - 1 if kernel is not None else -1,
        "grid": [_dim(g) for g in kernel.grid] if kernel is not None else [],
        "threads": list(kernel.threads) if kernel is not None else [],
        "params": [f"{p.name}: {list(map(_dim, p.shape))} {p.dtype}" for p in func.params],
        "shared_bytes": plan.shared_bytes if plan else sum(_bytes(b) for b in shared),
        "shared_limit": plan.storages["shared"].limit if plan else None,
        "fragment_bytes": plan.fragment_bytes if plan else None,
        "planned": plan is not None,
        "pipelines": pipelines,
        "target": target,
    }


def _allocs(func: N.PrimFunc) -> List[N.Buffer]:
    return [s.buffer for s in walk_stmts(func.body) if isinstance(s, N.Alloc)]


def _bytes(buf: N.Buffer) -> int:
    shape = buf.static_shape()
    return prod(shape) * itemsize(buf.dtype) if shape is not None else 0


def buffer_facts(func: N.PrimFunc, analyses: Dict[str, Any], lines: List[str], kernel_index: int) -> List[Dict]:
    """Shape, dtype, scope, layout and memory of every parameter and allocation."""
    plan = analyses.get("memory_plan")
    layouts = analyses.get("layout")
    kernel = next((s for s in func.body if isinstance(s, N.Kernel)), None)
    threads = prod(kernel.threads) if kernel is not None and kernel.threads else 1
    out = []
    for buf in list(func.params) + _allocs(func):
        layout = layouts.get(buf.name) if layouts is not None else None
        shared = None
        if buf.scope == "shared":
            sizes = plan.storages["shared"].sizes if plan else {}
            shared = sizes.get(buf.name, _bytes(buf))
        stages = plan.storages["shared"].stages.get(buf.name, 1) if plan and buf.scope == "shared" else 1
        out.append(
            {
                "kernel": kernel_index,
                "name": source_name(lines, buf.span, buf.name),
                "ir_name": buf.name,
                "line": buf.span.line - 1,
                "range": span_range(lines, buf.span),
                "shape": [_dim(d) for d in buf.shape],
                "dtype": buf.dtype,
                "scope": buf.scope,
                "bytes": _bytes(buf),
                "shared_bytes": shared,
                "stages": stages,
                "layout": layout_text(layout),
                "registers": registers_per_thread(buf, layout, threads),
            }
        )
    return out


def _region(role: str, region: N.Region, lines: List[str], names: Dict[str, str]) -> Dict:
    whole = tuple(region.extents) == tuple(region.buffer.shape) and all(
        isinstance(s, N.Const) and s.value == 0 for s in region.starts
    )
    return {
        "role": role,
        "buffer": names.get(region.buffer.name, region.buffer.name),
        "extents": list(region.extents),
        "whole": whole,
        "starts": [_dim(s) for s in region.starts],
        "range": span_range(lines, region.span) if region.span.line > 0 else None,
    }


def op_facts(
    func: N.PrimFunc, analyses: Dict[str, Any], lines: List[str], kernel_index: int, names: Dict[str, str]
) -> List[Dict]:
    """Every tile op with its regions' shapes, and for copies whether bounds were proven.

    `names` maps IR buffer names to the names the user wrote."""
    bounds = {id(f.stmt): f for f in analyses.get("bounds", ()) if f.stmt is not None}
    out = []
    for stmt in walk_stmts(func.body):
        kind = type(stmt).__name__
        if kind not in TILE_OPS or stmt.span.line <= 0:
            continue
        regions = []
        notes = []
        if isinstance(stmt, N.Copy):
            regions = [_region("src", stmt.src, lines, names), _region("dst", stmt.dst, lines, names)]
        elif isinstance(stmt, N.Gemm):
            regions = [_region(r, getattr(stmt, r), lines, names) for r in ("a", "b", "c")]
            m, n = stmt.c.extents[-2:] if len(stmt.c.extents) >= 2 else (0, 0)
            k = stmt.a.extents[-2] if stmt.transpose_a else stmt.a.extents[-1]
            notes.append(
                f"M×N×K = {m}×{n}×{k}, {stmt.a.buffer.dtype} × {stmt.b.buffer.dtype} → "
                f"{stmt.c.buffer.dtype}; transpose_A={stmt.transpose_a}, "
                f"transpose_B={stmt.transpose_b}, clear_accum={stmt.clear_accum}"
            )
        elif isinstance(stmt, (N.Fill, N.Atomic)):
            regions = [_region("dst", stmt.dst, lines, names)]
        elif isinstance(stmt, (N.Reduce, N.Cumsum)):
            notes.append(
                f"{names.get(stmt.src.name, stmt.src.name)} {list(map(_dim, stmt.src.shape))} → "
                f"{names.get(stmt.dst.name, stmt.dst.name)} {list(map(_dim, stmt.dst.shape))} "
                f"along dim {stmt.dim}"
            )
        fact = bounds.get(id(stmt))
        if fact is not None:
            notes.append(fact.reason)
        op = TILE_OPS[kind]
        if isinstance(stmt, (N.Reduce, N.Atomic)):
            op = f"{op}_{stmt.kind}"
        out.append(
            {
                "kernel": kernel_index,
                "op": op,
                "range": span_range(lines, stmt.span),
                "regions": regions,
                "notes": notes,
            }
        )
    return out
