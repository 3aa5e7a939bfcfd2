"""The `forms` programs: a copy written in the kernel forms TileLang's examples use around the tiles
(directed: every run of at least runner.DIRECTED_FROM programs adds four, strategies.directed_knobs).

scalar  the kernel takes `n: T.int32` at each call and writes only the rows below it (the rows
        past it keep the output's initial values): a backend that drops, truncates or misplaces
        a scalar argument writes the wrong rows
view    the input is declared with another shape (flat, or its two extents swapped) and read
        through a buffer view `T.Tensor((M, N), dtype, A.data)` as a `T.copy` source: the same
        elements in row-major order
stages  two `T.Kernel` blocks in one prim_func sharing a `T.alloc_global` scratch tensor: the
        first writes the rows, the second (its block roles swapped) copies them, upside down,
        into the output, so every block of the second stage reads what other blocks of the
        first wrote: a backend that overlaps or reorders the stages reads unwritten scratch

Values are copied unchanged (special values and limits included): compared bit-exactly, the sign
of zero included.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from tilecore.ir.types import is_float

from .programs import (
    Param,
    Program,
    Tolerance,
    _ceildiv_text,
    _dtype_features,
    _finish,
    _header,
    _kernel,
    _partial,
    _Writer,
)

FORMS = ("scalar", "view", "stages")


def _guarded_loop(w: _Writer, k: dict, row_block: str, col_block: str, feats: set) -> tuple:
    """Open `for i, j in T.Parallel(bm, bn)` over the tile at (row_block, col_block) and its guards:
    `row < n` (scalar form: n <= M bounds the rows too) or `row < M` on partial tiles, `col < N` on
    partial tiles; (row, col) text."""
    bm, bn = k["bm"], k["bn"]
    row, col = f"{row_block} * {bm} + i", f"{col_block} * {bn} + j"
    w(f"for i, j in T.Parallel({bm}, {bn}):")
    w.indent()
    bounds = [(row, "n" if k["scalar"] else str(k["M"]), k["scalar"] or _partial(k["M"], bm))]
    bounds.append((col, str(k["N"]), _partial(k["N"], bn)))
    for index, bound, needed in bounds:
        if needed:
            feats.add("runtime_if")
            w(f"if {index} < {bound}:")
            w.indent()
    return row, col


def _build_forms(k: dict) -> Program:
    M, N, bm, bn, d = k["M"], k["N"], k["bm"], k["bn"], k["dtype"]
    feats = {"parallel", "copy"} | _dtype_features(d)
    a_shape = {"flat": (M * N,), "swapped": (N, M)}[k["view"]] if k["view"] else (M, N)
    edges = "special" if is_float(d) else ("limits" if d != "bool" else "")
    params = [Param("A", a_shape, d, "in", edges=edges), Param("Out", (M, N), d, "out")]
    if k["scalar"]:
        params.append(Param("n", (), "int32", "in", k["n"], k["n"]))
    w = _Writer()
    _header(w, params, [])
    if k["stages"]:
        w(f'Scr = T.alloc_global(({M}, {N}), "{d}")')
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    source = "A"
    if k["view"]:
        w(f'Av = T.Tensor(({M}, {N}), "{d}", A.data)')
        source = "Av"
    w(f'A_t = T.alloc_{k["tile"]}(({bm}, {bn}), "{d}")')
    w(f"T.copy({source}[by * {bm}, bx * {bn}], A_t)")
    if _partial(M, bm) or _partial(N, bn):
        feats.add("partial_tiles")
    row, col = _guarded_loop(w, k, "by", "bx", feats)
    w(f"{'Scr' if k['stages'] else 'Out'}[{row}, {col}] = A_t[i, j]")
    if k["stages"]:  # the second stage: blocks take swapped roles (bx walks rows)
        w.level = 1
        _kernel(w, [_ceildiv_text(M, bm), _ceildiv_text(N, bn)], k["threads"])
        row, col = _guarded_loop(w, k, "bx", "by", feats)
        w(f"Out[{M - 1} - ({row}), {col}] = Scr[{row}, {col}]")
    tol = Tolerance(0.0, 0.0, "values copied unchanged: bit-exact", signed_zero=True)
    return _finish(k, w, params, {}, feats, {"Out": tol}, grid)


FORM_BUILDERS: Dict[str, Callable[..., Any]] = {"forms": _build_forms}
