"""`tilelang.layout`: layout annotations of shared buffers (speed hints on tilecore)."""

from ...language import make_swizzled_layout  # noqa: F401  (the same intrinsic as T.make_swizzled_layout)
