"""TileLang names tilecore deliberately does not provide, each with the reason.

Two kinds: TileLang dtypes the language does not have (listed here), and TileLang
primitives that program one vendor's hardware directly. The core names no vendor's
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
