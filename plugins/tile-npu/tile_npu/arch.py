"""The reference NPU's architecture parameters (one place, read by compiler and simulator).

Numbers are those of a small inference NPU; every one can be overridden with a
compile option of the same name (lower case), e.g. `tilecore.compile(f, "npu",
scratchpad_bytes=256 * 1024)`, or per launch by the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import ml_dtypes
import numpy as np

_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "none": 1,
}

NP_DTYPES = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}


def dtype_size(dtype: str) -> int:
    return _SIZES[dtype]


@dataclass(frozen=True)
class NPUConfig:
    """Hardware parameters of the modelled NPU."""

    cores: int = 4
    scratchpad_bytes: int = 1 << 20  # per core
    scratchpad_banks: int = 16
    bank_line_bytes: int = 64  # addresses interleave over banks every 64 bytes
    dma_align_bytes: int = 32  # DMA scratchpad addresses: multiple of this per row start
    vector_lanes: int = 64  # 32-bit lanes
    vector_chunk: int = 1024  # elements the compiler processes per strip-mined chunk
    matrix_tile: int = 16  # 16x16x16 per matrix-engine step
    matrix_max_mn: int = 64  # largest output tile per mma instruction
    matrix_max_k: int = 256  # largest reduction depth per mma instruction
    dma_bytes_per_cycle: int = 64  # per core
    dma_latency: int = 120  # cycles from issue to the first beat
    dma_burst_bytes: int = 64  # every contiguous row costs whole bursts
    matrix_latency: int = 12
    vector_latency: int = 6
    gather_elems_per_cycle: int = 8  # non-affine (gathered) accesses
    scalar_mem_latency: int = 4  # scratchpad load to a scalar register
    scalar_dram_latency: int = 200  # uncached DRAM access by the scalar unit or a gather
    clock_ghz: float = 1.0

    def with_options(self, options) -> "NPUConfig":
        """A copy with fields overridden by same-named entries of `options`."""
        names = {f.name for f in fields(self)}
        changes = {k: v for k, v in (options or {}).items() if k in names}
        return replace(self, **changes) if changes else self


DEFAULT_CONFIG = NPUConfig()

# The matrix engine's element formats: input dtype -> (accumulator dtypes, cycles per 16x16x16 step)
MATRIX_FORMATS = {
    "float16": (("float32", "float16"), 1),
    "bfloat16": (("float32", "bfloat16"), 1),
    "int8": (("int32",), 1),
    "float32": (("float32",), 4),  # fp32 runs as four passes of the fp16 datapath
    # fp8 operands widen to fp16 as the engine reads them (every fp8 value is exact in fp16)
    "float8_e4m3fn": (("float32",), 1),
    "float8_e5m2": (("float32",), 1),
}
# fp8 is a storage format (docs/semantics.md "fp8"): the lanes load, store and convert it (`vcvt`,
# exactly the interpreter's rounding), and the language never computes in it.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
# What the vector engine's 32-bit lanes hold (no 64-bit element types).
VECTOR_DTYPES = ("bool", "int8", "uint8", "int16", "int32", "float16", "bfloat16", "float32") + FP8_DTYPES
