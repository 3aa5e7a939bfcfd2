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

The `idioms` programs (directed too) write TileLang's spellings around the same kind of copy: each
moves two inputs, A into the output's first M rows and B into the rows after them, tile by tile:

macro         each move is a call of one `@T.macro` (it allocates its own tile), called twice with
              different arguments: a backend that reuses the code of the first inlined copy for the
              second (code cached by source position) writes A twice and never B
split         the two moves are the branches of a thread-group split, `if T.get_thread_binding()
              < b: ... else: ...`, TileLang's warp-specialization form; a group without threads
              (b = 0, b = threads=) does not run
simt          the elements stored by per-thread code (frontend/simt.py writes it as T.Parallel over
              the threads): `tx = T.get_thread_binding()`, a `T.serial` loop over rounds of
              `threads=` elements in which thread tx reads element `e * threads + threads - 1 - tx`
              into a per-thread `T.alloc_var` and puts it in its slot of a shared exchange buffer,
              then stores element `g = e * threads + tx` from the slot of thread threads - 1 - tx
              (statement lockstep: the next statement sees every thread's slot): a backend that
              loses a round or a thread, shares the per-thread variable between threads, or misses
              a barrier between the exchange's writes and reads (or the next round's writes)
              stores wrong elements
simt_while    the elements stored by a per-thread `while` whose condition depends on the thread
              (feature `parallel_while`): thread tx walks its own run of ceil(bm * bn / threads) + 1
              elements from `f = tx * run` while `f < (tx + 1) * run and f < bm * bn`, a per-thread
              `T.alloc_var` counter, so threads loop different numbers of times (full runs, a
              partial one, and none on the last threads when bm * bn <= threads * (threads - 1)):
              a backend that ends every thread's loop with the first thread's,
              runs it once for the block, shares the counter or misses a thread stores wrong
              elements or none
simt_for      the elements stored by a per-thread `for` whose bounds depend on the thread: thread
              tx walks its run of ceil(bm * bn / threads) + 1 elements as `for f in T.serial(tx *
              run, T.min((tx + 1) * run, bm * bn))` (full runs, a partial one, and empty ranges on
              the last threads): a backend that gives every thread the first thread's bounds, runs
              the loop once for the block, or misses a thread stores wrong elements or none
astype, Cast  the stored value converted to another dtype by `x.astype(D)` or `T.Cast(D, x)`, D
              spelled "float16", T.float16, T.dtype("float16") or T.float (float32): bit-exact
clamp         the value limited by `T.clamp(x, lo, hi)` first (NaN stays NaN): bit-exact
serial        the elements stored by `for i in T.Serial(bm): for j in T.vectorized(bn):` loops
floordiv      one flat `T.Parallel(bm * bn)` whose body names `i = T.floordiv(f, bn)` and
              `j = T.floormod(f, bn)`
persistent    a 1-D grid of W blocks whose tiles come from `for by, bx in T.Persistent([tiles_y,
              tiles_x], W, block_id, g)` (W from one block to more blocks than tiles): a backend
              that visits a tile twice or never, or runs the guard wrong, misses or repeats rows
memory_order  each element added into the output by `T.atomic_add(..., memory_order=...)` (the
              output's initial value plus the element: one rounding, compared within it)
hints         `T.disable_warp_group_reg_alloc()` at the top of the kernel and a custom layout on
              each tile, `T.annotate_layout({t: T.Layout(shape, lambda i, j: [j, i])})` (shared)
              or a `T.Fragment` thread map (fragment): no effect on results
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from tilecore.ir.types import is_float

from . import exprs as X
from .programs import (
    Param,
    Program,
    Tolerance,
    _ceildiv_text,
    _dtype_features,
    _finish,
    _header,
    _input_bounds,
    _kernel,
    _partial,
    _Writer,
)

FORMS = ("scalar", "view", "stages")
IDIOMS = (
    "macro",
    "split",
    "astype",
    "Cast",
    "clamp",
    "serial",
    "floordiv",
    "memory_order",
    "hints",
    "persistent",
    "simt",
    "simt_while",
    "simt_for",
)


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


def idiom_cells(k: dict) -> set:
    """The IDIOMS an `idioms` program's knobs use (its coverage cells, without the prefix)."""
    used = {"macro": k["macro"], "split": bool(k["split"]), k["cast"]: bool(k["cast"]), "clamp": bool(k["clamp"])}
    used.update(serial=k["loops"] == "serial", floordiv=k["loops"] == "flat", simt=k["loops"] == "simt")
    used.update(simt_while=k["loops"] == "simt_while", simt_for=k["loops"] == "simt_for")
    used.update(memory_order=bool(k["order"]), hints=k["hints"], persistent=bool(k.get("persistent")))
    return {name for name, on in used.items() if on and name in IDIOMS}


def _dtype_text(d: str, spelling: str) -> str:
    """dtype `d` as a kernel writes it: "float16", T.float16 (T.float for float32), T.dtype("float16")."""
    if spelling == "attr":
        return "T.float" if d == "float32" else f"T.{d}"
    return f'T.dtype("{d}")' if spelling == "dtype" else f'"{d}"'


def _move_lines(k: dict, src: str, dst: str, tile: str, shift: str) -> list:
    """Source lines (unindented) of one move: `src`'s tile at (by, bx) into rows `shift` + ... of
    `dst` through a `tile` buffer; src / dst / shift are names (macro parameters) or text."""
    M, N, bm, bn = k["M"], k["N"], k["bm"], k["bn"]
    r0, c0 = ("r0", "c0") if k["macro"] else (f"by * {bm}", f"bx * {bn}")
    lines = [f"{tile} = T.alloc_{k['tile']}(({bm}, {bn}), {_dtype_text(k['dtype'], k['spelling'])})"]
    if k["hints"]:
        lines.append(f"T.annotate_layout({{{tile}: {_layout_text(k)}}})")
    lines.append(f"T.copy({src}[{r0}, {c0}], {tile})")
    if k["loops"] == "serial":
        body = [f"for i in T.Serial({bm}):", f"    for j in T.vectorized({bn}):"]
    elif k["loops"] == "flat":
        body = [f"for f in T.Parallel({bm * bn}):", f"    i = T.floordiv(f, {bn})", f"    j = T.floormod(f, {bn})"]
    elif k["loops"] == "simt":  # per-thread code: thread tx loads for thread (threads - 1 - tx)
        threads, size, dt = k["threads"], bm * bn, _dtype_text(k["dtype"], k["spelling"])
        body = [
            "tx = T.get_thread_binding()",
            f"{tile}_v = T.alloc_var({dt})",
            f"{tile}_x = T.alloc_shared(({threads},), {dt})",
            f"for e in T.serial({-(-size // threads)}):",
            f"    f = e * {threads} + {threads - 1} - tx",
            f"    if f < {size}:",
            f"        {tile}_v = {tile}[f // {bn}, f % {bn}]",
            f"        {tile}_x[tx] = {tile}_v",
            f"    g = e * {threads} + tx",
            f"    if g < {size}:",
            f"        i = g // {bn}",
            f"        j = g % {bn}",
        ]
    elif k["loops"] in ("simt_while", "simt_for"):  # per-thread code: thread tx walks its own run of elements
        run, size = -(-bm * bn // k["threads"]) + 1, bm * bn
        if k["loops"] == "simt_while":  # on a per-thread counter
            f = f"{tile}_f"
            head = [f"{f} = T.alloc_var(T.int32)", f"{f} = tx * {run}"]
            head.append(f"while {f} < (tx + 1) * {run} and {f} < {size}:")
        else:  # a loop whose bounds depend on the thread
            f, head = "f", [f"for f in T.serial(tx * {run}, T.min((tx + 1) * {run}, {size})):"]
        body = ["tx = T.get_thread_binding()", *head, f"    i = {f} // {bn}", f"    j = {f} % {bn}"]
    else:
        body = [f"for i, j in T.Parallel({bm}, {bn}):"]
    lines += body
    depth = {"serial": 2, "simt": 2}.get(k["loops"], 1)
    for index, bound, needed in ((f"{r0} + i", M, _partial(M, bm)), (f"{c0} + j", N, _partial(N, bn))):
        if needed:
            lines.append("    " * depth + f"if {index} < {bound}:")
            depth += 1
    value = f"{tile}[i, j]"
    if k["loops"] == "simt":  # element g, which thread (threads - 1 - tx) put in its slot
        value = f"{tile}_x[{k['threads'] - 1} - tx]"
    if k["clamp"]:
        value = f"T.clamp({value}, {k['clamp'][0]}, {k['clamp'][1]})"
    out_type = _dtype_text(k["out_dtype"], k["spelling"])
    if k["cast"] == "astype":
        value = f"{value}.astype({out_type})"
    elif k["cast"] == "Cast":
        value = f"T.Cast({out_type}, {value})"
    target = f"{dst}[{shift} + {r0} + i, {c0} + j]" if shift != "0" else f"{dst}[{r0} + i, {c0} + j]"
    if k["order"]:
        store = f'T.atomic_add({target}, {value}, memory_order="{k["order"]}")'
    else:
        store = f"{target} = {value}"
    lines.append("    " * depth + store)
    if k["loops"] == "simt_while":
        lines.append(f"    {tile}_f += 1")
    return lines


def _layout_text(k: dict) -> str:
    """A custom layout of the moved tile: its transpose as storage order (shared), or a thread map
    (fragment); hints that must not change results."""
    bm, bn = k["bm"], k["bn"]
    if k["tile"] == "shared":
        return f"T.Layout(({bm}, {bn}), lambda i, j: [j, i])"
    return f"T.Fragment(({bm}, {bn}), forward_thread_fn=lambda i, j: (i * {bn} + j) % {k['threads']})"


def _split_test(k: dict) -> str:
    op, bound = k["split"]
    return f"if T.get_thread_binding() {op} {bound}:"


def _build_idioms(k: dict) -> Program:
    M, N, bm, bn, d, d_out = k["M"], k["N"], k["bm"], k["bn"], k["dtype"], k["out_dtype"]
    lo, hi = _input_bounds(d)
    params = [Param(n, (M, N), d, "in", lo, hi, k["edges"]) for n in ("A", "B")]
    params.append(Param("Out", (2 * M, N), d_out, "out"))
    helpers = []
    if k["macro"]:
        helpers = ["@T.macro", "def move(src, dst, r0, c0, shift):"]
        helpers += ["    " + line for line in _move_lines(k, "src", "dst", "t", "shift")]
        moves = [[f"move(A, Out, by * {bm}, bx * {bn}, 0)"], [f"move(B, Out, by * {bm}, bx * {bn}, {M})"]]
    else:
        moves = [_move_lines(k, "A", "Out", "A_t", "0"), _move_lines(k, "B", "Out", "B_t", str(M))]
    w = _Writer()
    _header(w, params, [], helpers)
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    if k.get("persistent"):  # a 1-D grid of `wave` blocks visiting the (by, bx) tiles in turn
        wave, group = k["persistent"]
        tiles = f"[{_ceildiv_text(M, bm)}, {_ceildiv_text(N, bn)}]"
        w(f"with T.Kernel({wave}, threads={k['threads']}) as block_id:")
        w.indent()
        w(f"for by, bx in T.Persistent({tiles}, {wave}, block_id, {group}):")
        w.indent()
        grid = [str(wave)]
    else:
        _kernel(w, grid, k["threads"])
    if k["hints"]:
        w("T.disable_warp_group_reg_alloc()")
    for n, move in enumerate(moves):
        if k["split"]:
            w(_split_test(k) if n == 0 else "else:")
            w.indent()
        for line in move:
            w(line)
        if k["split"]:
            w.dedent()
    feats = {"copy", "parallel"} | _dtype_features(d, d_out)
    feats |= {"serial"} if k["loops"] in ("serial", "simt_for") else set()
    feats |= {"while_loop", "parallel_while", "alloc_var", "runtime_if"} if k["loops"] == "simt_while" else set()
    feats |= {"atomic"} if k["order"] else set()
    feats |= {"serial", "runtime_if"} if k.get("persistent") else set()
    if _partial(M, bm) or _partial(N, bn):
        feats |= {"partial_tiles", "runtime_if"}
    if k["order"] and is_float(d_out):
        tol = Tolerance(0.0, 2.0 * X.unit_roundoff(d_out), "one atomic add per element: one rounding")
    elif k["order"]:
        tol = Tolerance(0.0, 0.0, "one integer atomic add per element: exact")
    else:
        tol = Tolerance(0.0, 0.0, "values copied or converted: bit-exact", signed_zero=is_float(d_out))
    return _finish(k, w, params, {}, feats, {"Out": tol}, grid)


FORM_BUILDERS: Dict[str, Callable[..., Any]] = {"forms": _build_forms, "idioms": _build_idioms}
