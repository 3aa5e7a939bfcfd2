"""Rewrites of the PTX that nvcc's front end emits, applied before ptxas assembles it: each works
around a ptxas fault that gives wrong results, with an equivalent instruction ptxas handles.

Rewrites are data: an ordered list of (name, pattern, replacement, why). Each must keep the PTX's
meaning exactly (PTX ISA semantics); a rewrite that changes nothing for a kernel costs nothing.
"""

from __future__ import annotations

import re
from typing import List, NamedTuple, Pattern, Tuple


class PtxRewrite(NamedTuple):
    """One rewrite: every match of `pattern` in the PTX becomes `replacement` (re.sub syntax)."""

    name: str
    pattern: Pattern[str]
    replacement: str
    why: str


_REG = r"%[A-Za-z_$][\w$]*"  # a PTX register (%rs4, %r12, ...)

PTX_REWRITES: List[PtxRewrite] = [
    PtxRewrite(
        "negate_int16_unsigned",
        # `neg.s16 d, a;` and its spelling `sub.s16 d, 0, a;`
        re.compile(rf"\b(?:neg\.s16(\s+)({_REG}),\s*({_REG})|sub\.s16(\s+)({_REG}),\s*0,\s*({_REG}));"),
        r"sub.u16\1\4\2\5, 0, \3\6;",
        # ptxas (nvcc 13.0, sm_90a; conformance seed 76767, intops program 86) folds a signed 16-bit
        # negate followed by its sign extension (cvt.s32.s16) into a 32-bit negate of the
        # sign-extended operand: -(-32768) came out as +32768 instead of wrapping to -32768. Both
        # instructions wrap in PTX, so the unsigned subtraction from zero has the same bits, and
        # ptxas keeps its sign extension
        "ptxas sign-extends a signed 16-bit negate of -32768 as +32768",
    ),
]


def apply_ptx_rewrites(ptx: str) -> Tuple[str, List[str]]:
    """`ptx` with every rewrite of PTX_REWRITES applied, and the names of those that matched."""
    applied = []
    for rewrite in PTX_REWRITES:
        ptx, count = rewrite.pattern.subn(rewrite.replacement, ptx)
        if count:
            applied.append(rewrite.name)
    return ptx, applied
