"""Shared lowering of Tile IR to TVM TIR for TVM-based backends (cpu, cuda, rocm, metal).

Importing this package does not import TVM; its modules do (`tir_expr`:
expressions, `intrinsics`: math tables, `tir_stmt`: loop nests, predicated
copies, reductions, scans, element bounds checks), so import them only inside
a backend's codegen. See `tir_expr` for how a backend supplies its buffer views
and intrinsic table, and `tir_stmt` for lowering rules.
"""
