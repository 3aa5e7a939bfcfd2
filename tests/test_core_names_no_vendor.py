"""The core names no vendor's instruction, intrinsic, type spelling, toolchain or TileLang primitive.

Hardware knowledge belongs to the plugin that owns the hardware (DESIGN.md): tile-cuda declares
TileLang's CUDA-specific switches and primitives, tile-rocm TileLang's name for its device, each
through `Backend.tilelang`. This test keeps those words from creeping back into `tilecore/`.
"""

from __future__ import annotations

import os
import re

import tilecore

CORE = os.path.dirname(os.path.abspath(tilecore.__file__))

# The grep (#11) and the TileLang device names, switches and primitives moved into the plugins.
VENDOR_WORDS = re.compile(
    r"wgmma|mfma|simdgroup|ldmatrix|cp\.async|cp_async|__nv_|\bhip|nvcc|\bptx|nvptx|amdgpu|tcgen05|"
    r"mbarrier|(?<![a-z])tma(?![a-z])|hopper|blackwell|warpgroup",
    re.IGNORECASE,
)

# (path under tilecore/, text on the line) -> why it stays. Each entry must still match a line.
ALLOWED = {
    (
        "language/ops.py",
        "disable_tma",
    ): "`T.copy(..., disable_tma=)` is TileLang's keyword argument, accepted and ignored so that "
    "TileLang kernels parse unchanged; it names no instruction tilecore emits",
    ("language/ops.py", "use_tma"): "`T.atomic_add(..., use_tma=)` (and max/min): the same, for TileLang's atomics",
}


def _hits():
    for root, _, files in os.walk(CORE):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, CORE).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if VENDOR_WORDS.search(line):
                        yield rel, number, line.strip()


def test_tilecore_names_no_vendor_words_outside_the_allowlist():
    hits = list(_hits())
    unexpected = [
        f"tilecore/{rel}:{number}: {line}"
        for rel, number, line in hits
        if not any(rel == path and text in line for path, text in ALLOWED)
    ]
    assert not unexpected, (
        "vendor knowledge belongs to its plugin (declare it through "
        "tilecore.plugin.TileLangNames or the lowering hooks):\n" + "\n".join(unexpected)
    )
    stale = [key for key in ALLOWED if not any(rel == key[0] and key[1] in line for rel, _, line in hits)]
    assert not stale, f"allowlist entries that match nothing any more (remove them): {stale}"


def test_the_guard_finds_what_it_guards_against():
    planted = [
        "T.wgmma_gemm",
        '"hip": "rocm"',
        "TL_DISABLE_TMA_LOWER",
        "__nv_bfloat16",
        "mbarrier_arrive",
        "hip_bfloat16",
        "Hopper-only",
        "ptxas",
        "T.tma_copy",
    ]
    assert all(VENDOR_WORDS.search(text) for text in planted)
    assert not any(VENDOR_WORDS.search(text) for text in ("on-chip", "contextmanager", "shipped", "a GPU"))
