"""Shared lowering of Tile IR to TVM TIR for TVM-based backends (cpu, cuda, rocm, metal).

Importing this package does not import TVM; its modules do (`tir_expr`,
`intrinsics`, `loops`, `copies`), so import them only inside a backend's
codegen. See `tir_expr` for how a backend supplies its buffer views and
intrinsic table.
"""
