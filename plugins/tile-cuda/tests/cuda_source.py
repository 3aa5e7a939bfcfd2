"""The CUDA source tile-cuda generates for a kernel, without running nvcc: for the tests that only
read the source text (the compile-tier tests that need the cubin or PTX still compile)."""

from __future__ import annotations

from tile_cuda import plugin
from tile_cuda.compiler import generate_source
from tilecore.plugin.rules import collect_lowering_tables


def cuda_source(func, arch: str, **options) -> str:
    """The generated CUDA C++ of `func` for `arch` ("sm_90a", "sm_80") under compile `options`."""
    tables = collect_lowering_tables(plugin.make_backend())
    return generate_source(func, arch, dict(options), tables=tables)[0]
