"""Coverage cells: what a certification must have exercised, and what each program exercises.

A cell names one thing a backend can get wrong on its own: a conversion kind,
an integer operator, a math function on a dtype, a reduction kind, an edge
class of input values on a dtype, dynamic shapes in a family, tensors past
2^16 elements, tensors past 2^31 bytes. `required_cells(caps)` lists those the backend's declarations
make reachable (the generator steers every default-sized run into each of
them, see the `slot` logic in strategies.py); certification needs at least
`coverage.min_passes` passing programs in each (must_pass.json), and the report
prints the matrix.
"""

from __future__ import annotations

from typing import Dict, List, Set

from tilecore.ir.types import is_fp8, itemsize

from .accuracy import FUNCS
from .programs import FORMS, idiom_cells
from .strategies import int4_gemm_accumulator, large_tensor_dtype, reachable_idioms

CONVERT_KINDS = ("f>f", "f>i", "i>i", "i>f", ">bool", "bool>")
INT_TARGETS = ("//", "%", "<<", ">>", "~", "cmp", "logic", "wrap")
REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")
DYNAMIC_FAMILIES = ("ewise", "copy", "reduce", "cumsum", "convert", "intops", "math")
BIG_ELEMENTS = 1 << 16
LARGE_BYTES = "size:>2^31 bytes"  # a tensor whose element offsets need 64 bits (directed program)


def _kind(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    return "f" if dtype.startswith("float") or dtype == "bfloat16" else "i"


def program_cells(program) -> Set[str]:
    """The cells one program exercises (from its knobs and parameters)."""
    k, fam = program.knobs, program.family
    cells = set()
    if k.get("dyn"):
        cells.add(f"dynamic:{fam}")
    if fam == "convert":
        s, d = _kind(k["src"]), _kind(k["dst"])
        cells.add("convert:" + ("bool>" if s == "bool" else ">bool" if d == "bool" else f"{s}>{d}"))
    elif fam == "intops":
        cells.add(f"intop:{k['target']}")
    elif fam == "math":
        cells.update(f"math:{f}:{k['dtype']}" for f in k["funcs"])
        if k.get("special_ops"):
            cells.add(f"special_ops:{k['dtype']}")
    elif fam == "reduce":
        cells.add(f"reduce:{k['kind']}")
    elif fam == "forms":
        cells.update(f"forms:{f}" for f in FORMS if k.get(f))
    elif fam == "idioms":
        cells.update(f"idioms:{i}" for i in idiom_cells(k))
    cells |= _opt_in_cells(k)
    for p in program.params:
        if p.edges and not p.edges.startswith(("math:", "window:")):
            cells.add(f"edges:{p.edges.split(':')[0]}:{p.dtype}")
        n = 1
        for s in p.concrete_shape(program.bindings):
            n *= s
        if n > BIG_ELEMENTS:
            cells.add("size:>2^16 elements")
        if n * itemsize(p.dtype) > 1 << 31:
            cells.add(LARGE_BYTES)
    return cells


def required_cells(caps, families, directed: bool = True) -> List[str]:
    """Cells a default-sized run on a backend with `caps` over `families` must pass (`directed`:
    the run adds the directed programs, strategies.directed_knobs)."""
    out: List[str] = []
    ints = [d for d in caps.ints() if d != "bool"]
    floats = caps.floats()
    if "convert" in families:
        kinds = ["f>f"] if len(floats) > 1 else []
        if floats and ints:
            kinds += ["f>i", "i>f"]
        if len(ints) > 1:
            kinds.append("i>i")
        if caps.dtype_ok("bool"):
            kinds += [">bool", "bool>"]
        out += [f"convert:{k}" for k in kinds]
    if "intops" in families:
        out += [f"intop:{t}" for t in INT_TARGETS]
    if "math" in families:
        out += [f"math:{f}:{d}" for d in floats for f in FUNCS]
        if caps.has("select"):
            out += [f"special_ops:{d}" for d in floats]
    if "reduce" in families:
        out += [f"reduce:{k}" for k in REDUCE_KINDS]
    if caps.has("dynamic_shape", "partial_tiles", "runtime_if"):
        out += [f"dynamic:{f}" for f in DYNAMIC_FAMILIES if f in families]
    if "copy" in families and caps.has("multi_block"):
        out.append("size:>2^16 elements")
    if directed and "copy" in families and caps.has("copy", "parallel"):  # the directed forms programs
        out += [f"forms:{f}" for f in FORMS if f != "scalar" or caps.has("runtime_if")]
        out += [f"idioms:{i}" for i in sorted(reachable_idioms(caps))]
    if directed and "copy" in families and large_tensor_dtype(caps):
        out.append(LARGE_BYTES)
    return out + _required_opt_in_cells(caps, families)


def _opt_in_cells(k: dict) -> Set[str]:
    """Cells of the opt-in features (strategies.py: fp8 conversions and GEMMs, `while` loops)."""
    cells = set()
    if k.get("fp8"):
        src, dst = k["fp8"]["src"], k["fp8"]["dst"]
        cells.add(f"fp8:{src}>{dst}")
        if is_fp8(dst):
            cells.add(f"fp8:into:{dst}")
        if is_fp8(src):
            cells.add(f"fp8:from:{src}")
    if k["family"] == "gemm" and is_fp8(k["in_dtype"]):
        cells.add(f"fp8:gemm:{k['in_dtype']}")
    if k["family"] == "gemm" and k["in_dtype"] == "int4":
        cells.add("int4:gemm")
    if k.get("while"):
        cells.add(f"while:{k['while']}")
    return cells


def _required_opt_in_cells(caps, families) -> List[str]:
    out: List[str] = []
    if "convert" in families:  # the first four convert programs of a run carry these (FP8_CONVERSIONS)
        out += [f"fp8:{way}:{d}" for d in caps.fp8s() for way in ("into", "from")]
    if "gemm" in families:
        accs = [a for a in ("float32", "float64") if caps.dtype_ok(a)]
        out += [f"fp8:gemm:{d}" for d in caps.fp8s() if any((d, a) in caps.gemm_dtypes for a in accs)]
        if int4_gemm_accumulator(caps) is not None:  # gemm slot 2 of every run (strategies._int4_gemm)
            out.append("int4:gemm")
    if "control" in families and caps.has("while_loop", "alloc_var"):
        out += ["while:count", "while:stop"]
    return out


def coverage_table(programs, outcomes) -> Dict[str, Dict[str, int]]:
    """cell -> {"pass": n, "fail": n} over the run."""
    table: Dict[str, Dict[str, int]] = {}
    for p, o in zip(programs, outcomes):
        for c in program_cells(p):
            row = table.setdefault(c, {"pass": 0, "fail": 0})
            if o.status in row:
                row[o.status] += 1
    return dict(sorted(table.items()))
