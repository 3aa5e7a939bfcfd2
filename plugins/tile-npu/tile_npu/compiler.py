"""Tile IR -> NPU program: the public entry points of the code generator.

The code generator itself lives in the `tile_npu.codegen` package, one module
per concern (registers, placement, DMA synchronization, pipelining, scalar,
tile and vector code); this module keeps the names other code imports.
"""

from __future__ import annotations

from .codegen import Codegen, compile_func, default_rules
from .codegen.placement import SEGMENT_ALIGN
from .codegen.registers import FIRST_FREE_REG, ZERO

__all__ = ["Codegen", "compile_func", "default_rules", "SEGMENT_ALIGN", "FIRST_FREE_REG", "ZERO"]
