"""Math intrinsics for ROCm: TVM 0.27's ROCm target maps float32 math onto the device
libraries (__ocml_*_f32) but not float64, where LLVM then aborts the process
("no libcall available for fexp"). This table calls OCML's float64 functions directly.

Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from tvm import tirx as tx

from tilecore.lowering.intrinsics import IntrinsicTable, default_table

_OCML_F64 = ("exp", "exp2", "log", "log2", "tanh", "sin", "cos", "pow")


def _ocml(name):
    return lambda args: tx.call_pure_extern("float64", f"__ocml_{name}_f64", *args)


def _sigmoid_f64(args):
    x = args[0]
    one = tx.const(1.0, "float64")
    return one / (one + tx.call_pure_extern("float64", "__ocml_exp_f64", tx.const(0.0, "float64") - x))


def rocm_table() -> IntrinsicTable:
    """The portable table with float64 transcendentals routed to OCML."""
    table = default_table()
    for name in _OCML_F64:
        table[(name, "float64")] = _ocml(name)
    table[("sigmoid", "float64")] = _sigmoid_f64
    return table
