"""Compatibility surfaces of other tile languages, so their kernels run on tilecore unchanged.

`import tilecore.compat.tilelang as tilelang` (see that package).
"""
