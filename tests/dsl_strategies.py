"""Hypothesis strategy: random DSL programs written the way kernel authors write them.

Where tests/ir_strategies.py builds IR directly, this writes source text with
the surface sugar the printer never produces: start-point and `:` regions,
`range(a, b)`, `+=`, rebinding a name, Python constants and parse-time `if`,
`T.clear`, `-T.infinity`, `T.ceildiv` on Python ints or dynamic dims, and so on.
"""

from __future__ import annotations

import textwrap

from hypothesis import strategies as st

HEADER = """import tilecore.language as T

M = {M}
N = {N}
BM = {BM}
BN = {BN}
SCALE = {SCALE}
USE_EXP = {USE_EXP}


@T.prim_func
def main(A: T.Tensor((M, N), "{dt}"), B: T.Tensor((M, N), "{dt}"), C: T.Tensor((BM,), "float32")):
    with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
        a_s = T.alloc_shared((BM, BN), "{dt}")
        b_s = T.alloc_shared((BN, BN), "{dt}")
        f = T.alloc_fragment((BM, BN), "float32")
        r = T.alloc_fragment((BM,), "float32")
        acc = T.alloc_var("float32")
        acc = 0
"""

FLOAT_LITERALS = ("0", "1", "0.5", "2.0", "SCALE", "-1.5", "1e-6")


@st.composite
def element_exprs(draw, depth: int = 3):
    """A float32 expression over the tiles at element (i, j)."""
    atoms = ["f[i, j]", "a_s[i, j]", "r[i]", "acc", *FLOAT_LITERALS, 'T.cast(i + j, "float32")']
    if depth == 0:
        return draw(st.sampled_from(atoms))
    sub = element_exprs(depth - 1)
    kind = draw(st.sampled_from(["atom", "binary", "binary", "call", "max", "select", "neg", "cast"]))
    if kind == "atom":
        return draw(st.sampled_from(atoms))
    if kind == "binary":
        op = draw(st.sampled_from("+-*/"))
        right = draw(sub)
        if op == "/":  # an all-literal divisor like (1 - 1) would divide by zero at parse time
            right = f"T.exp({right})"
        return f"({draw(sub)} {op} {right})"
    if kind == "call":
        return f"T.{draw(st.sampled_from(['exp', 'exp2', 'tanh', 'sigmoid', 'abs', 'sqrt']))}({draw(sub)})"
    if kind == "max":
        return f"T.{draw(st.sampled_from(['max', 'min']))}({draw(sub)}, {draw(sub)})"
    if kind == "select":
        cond = draw(st.sampled_from(["i < j", "i == 0", "bx * BM + i < M", "j >= 2 and i != j"]))
        return f"T.if_then_else({cond}, {draw(sub)}, {draw(sub)})"
    if kind == "neg":
        return f"-{draw(sub)}"
    return f'T.cast(T.cast({draw(sub)}, "float16"), "float32")'


@st.composite
def statements(draw, depth: int = 0):
    """Lines (relative indentation) of one statement of the kernel body."""
    kinds = [
        "copy_in",
        "copy_slice",
        "copy_out",
        "clear",
        "fill",
        "parallel",
        "reduce",
        "cumsum",
        "scalar_loop",
        "rebind",
        "atomic",
        "print",
        "python_if",
        "gemm",
    ]
    if depth < 2:
        kinds += ["runtime_if", "pipelined"]
    kind = draw(st.sampled_from(kinds))
    if kind == "copy_in":
        return ["T.copy(A[by * BM, bx * BN], a_s)"]
    if kind == "copy_slice":
        return [
            draw(
                st.sampled_from(
                    [
                        "T.copy(A[by * BM:(by + 1) * BM, bx * BN:bx * BN + BN], f)",
                        "T.copy(B[by * BM:by * BM + BM, :BN], a_s)",
                        "T.copy(a_s[:, 0], r)",
                    ]
                )
            )
        ]
    if kind == "copy_out":
        return [
            draw(
                st.sampled_from(
                    [
                        "T.copy(f, B[by * BM, bx * BN])",
                        "T.copy(f, a_s)",
                        "T.copy(r, C)",
                        "T.copy(a_s, B[by * BM:(by + 1) * BM, 0:BN])",
                    ]
                )
            )
        ]
    if kind == "clear":
        return [draw(st.sampled_from(["T.clear(f)", "T.clear(r)", "T.clear(a_s)"]))]
    if kind == "fill":
        value = draw(st.sampled_from(["0", "1", '-T.infinity("float32")', "SCALE", "acc", "2.5"]))
        return [f"T.fill({draw(st.sampled_from(['f', 'r']))}, {value})"]
    if kind == "parallel":
        target = draw(st.sampled_from(["f[i, j] = ", "f[i, j] += ", "a_s[i, j] = "]))
        return ["for i, j in T.Parallel(BM, BN):", f"    {target}{draw(element_exprs())}"]
    if kind == "reduce":
        op = draw(st.sampled_from(["sum", "max", "min", "abssum", "absmax"]))
        clear = draw(st.sampled_from(["", ", clear=False", ", clear=True"]))
        return [f"T.reduce_{op}(f, r, dim={draw(st.sampled_from(['1', '-1']))}{clear})"]
    if kind == "cumsum":
        return [draw(st.sampled_from(["T.cumsum(f, dim=1)", "T.cumsum(f, f, dim=0, reverse=True)"]))]
    if kind == "scalar_loop":
        loop = draw(
            st.sampled_from(["range(BM)", "range(1, BM)", "T.serial(bx, bx + 2)", "T.unroll(BM)", "T.serial(0, BM)"])
        )
        update = draw(st.sampled_from(["acc = acc + r[t]", "acc += r[t] * SCALE", "acc = T.max(acc, r[t])"]))
        return [f"for t in {loop}:", "    if t < BM:", f"        {update}"]
    if kind == "rebind":
        return ["XNAME = acc * 2.0", "XNAME = XNAME + SCALE", "r[0] = XNAME"]
    if kind == "atomic":
        return draw(
            st.sampled_from(
                [
                    ["for i in T.Parallel(BM):", "    T.atomic_add(C[i], r[i])"],
                    ["T.atomic_max(C[0], acc)"],
                    ["T.atomic_add(C[0], r)"],
                ]
            )
        )
    if kind == "print":
        return [draw(st.sampled_from(['T.print(acc, msg="acc")', "T.print(r)", "T.print(f[0, 1] + 1)"]))]
    if kind == "gemm":
        return [
            draw(
                st.sampled_from(
                    [
                        "T.gemm(a_s, b_s, f)",
                        "T.gemm(a_s, b_s, f, transpose_B=True, clear_accum=True)",
                        "T.gemm(a_s, b_s, f, policy=T.GemmWarpPolicy.FullCol)",
                    ]
                )
            )
        ]
    if kind == "python_if":
        return [
            "if USE_EXP:",
            "    for i, j in T.Parallel(BM, BN):",
            "        f[i, j] = T.exp(f[i, j])",
            "else:",
            "    T.clear(f)",
        ]
    if kind == "runtime_if":
        cond = draw(st.sampled_from(["bx > 0", "acc < SCALE", "by == 0 or bx == 1", "not bx < 1"]))
        then = draw(statements(depth + 1))
        lines = [f"if {cond}:"] + ["    " + l for l in then]
        if draw(st.booleans()):
            lines += ["else:"] + ["    " + l for l in draw(statements(depth + 1))]
        return lines
    body = draw(st.lists(statements(depth + 1), min_size=1, max_size=3))
    stages = draw(st.integers(0, 3))
    return [f"for k in T.Pipelined(T.ceildiv(N, BN), num_stages={stages}):"] + [
        "    " + l for stmt in body for l in stmt
    ]


@st.composite
def dsl_programs(draw) -> str:
    """The source text of a random valid kernel."""
    bm, bn = draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([2, 4, 8]))
    m = 'T.dynamic("m")' if draw(st.booleans()) else draw(st.integers(1, 20))
    header = HEADER.format(
        M=m,
        N=draw(st.integers(1, 20)),
        BM=bm,
        BN=bn,
        SCALE=draw(st.sampled_from(["0.125", "2.0", "1"])),
        USE_EXP=draw(st.booleans()),
        dt=draw(st.sampled_from(["float16", "float32"])),
    )
    body = draw(st.lists(statements(), min_size=1, max_size=6))
    return header + textwrap.indent("\n".join(_name_rebinds(l for stmt in body for l in stmt)), " " * 8) + "\n"


def _name_rebinds(lines):
    """Give each rebinding template its own name (x0, x1, ...): a name defined outside a
    loop may not be rebound inside it, and the printer's renaming (x -> x_1) is the point."""
    count = -1
    for line in lines:
        if line.lstrip().startswith("XNAME = acc"):
            count += 1
        yield line.replace("XNAME", f"x{count}")
