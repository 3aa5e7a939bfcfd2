"""TileLang names tilecore deliberately does not provide, each with the reason.

Three kinds: TileLang dtypes the language does not have and TileLang's warp-level primitives
(both listed here), and TileLang primitives that program one vendor's hardware directly. The core names no vendor's
primitive: a backend plugin declares the ones of its hardware in its `Backend.tilelang`
(`tilecore.plugin.TileLangNames.primitives`, with a note saying what to write instead),
and `T.<name>` looks them up among the installed backends. A kernel using one gets an
UnsupportedFeatureError at its line naming the backend that recognized it, instead of
an attribute error; with no such plugin installed it is an unknown name.
"""

from __future__ import annotations

import threading
from typing import Optional

from ..diagnostics import UnsupportedFeatureError

# dtypes TileLang has and tilecore's language does not (yet)
UNSUPPORTED_DTYPES = (
    "float8_e4m3",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "uint4",
    "uint16",
    "uint32",
    "uint64",
    "int2",
    "uint2",
    "int1",
)

# TileLang's warp-level primitives: not in the language yet (a warp's width is the hardware's, and
# per-thread code has a portable way to exchange values), each refused with what to write instead
WARP_PRIMITIVES = (
    "shfl_xor",
    "shfl_down",
    "shfl_up",
    "shfl_sync",
    "sync_warp",
    "any_sync",
    "all_sync",
    "ballot_sync",
    "ballot",
    "activemask",
    "match_any_sync",
    "match_all_sync",
    "warp_reduce_sum",
    "warp_reduce_max",
    "warp_reduce_min",
    "warp_reduce_bitand",
    "warp_reduce_bitor",
    "get_lane_idx",
    "get_warp_idx",
    "get_warp_idx_sync",
    "get_warp_group_idx",
)
WARP_PRIMITIVE_NOTE = (
    "warp-level primitives are not in tilecore's language yet; in per-thread code, exchange values "
    "through a T.alloc_shared buffer (statements run in lockstep, so what one statement stores every "
    'thread reads in the next; docs/semantics.md "Per-thread code"), or reduce a tile with T.reduce_*'
)

_looking_up = threading.local()  # a plugin being loaded may itself probe `T.<name>`: no recursion


class UnsupportedPrimitiveError(UnsupportedFeatureError, AttributeError):
    """An unsupported TileLang primitive; also an AttributeError, so hasattr(T, name) is False."""


def declaring_backend(name: str):
    """The installed Backend whose `tilelang.primitives` declare `T.<name>`, or None.

    Private and dunder names are never looked up (tools probe modules for them), and a
    plugin that fails to load is reported by `tile backends`, not here.
    """
    if name.startswith("_") or getattr(_looking_up, "active", False):
        return None
    from ..plugin.registry import get_registry

    _looking_up.active = True
    try:
        backends = get_registry().backends
    except Exception:  # noqa: BLE001 - an attribute lookup must not fail on a broken plugin setup
        return None
    finally:
        _looking_up.active = False
    return next((b for _, b in sorted(backends.items()) if b.tilelang.declares_primitive(name)), None)


def unsupported_name_error(name: str) -> Optional[UnsupportedPrimitiveError]:
    """The error for `T.<name>` when it is a TileLang name tilecore does not provide, else None."""
    if name in UNSUPPORTED_DTYPES:
        from ..ir.types import DTYPES

        return UnsupportedPrimitiveError(
            "tilecore", f"the dtype T.{name} (the language's dtypes are {', '.join(DTYPES[:-1])} and {DTYPES[-1]})"
        )
    if name in WARP_PRIMITIVES:
        return UnsupportedPrimitiveError("tilecore", f"T.{name}: {WARP_PRIMITIVE_NOTE}")
    backend = declaring_backend(name)
    if backend is None:
        return None
    owner = f"backend {backend.name!r}" + (f" ({backend.distribution})" if backend.distribution else "")
    note = f": {backend.tilelang.primitive_note}" if backend.tilelang.primitive_note else ""
    return UnsupportedPrimitiveError(
        "tilecore",
        f"T.{name}, a TileLang primitive specific to the hardware of {owner}, which "
        f"tilecore's language does not provide{note}",
    )
