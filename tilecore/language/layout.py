"""Custom layouts for `T.annotate_layout`: `T.Layout` (storage order) and `T.Fragment` (thread map).

    T.annotate_layout({dQ: T.Layout(dQ.shape, lambda b, h, l, d: [b, h, l // 8, d // 8, d % 8])})

In TileLang these choose how a buffer is laid out in memory or spread over
threads. tilecore indexes every buffer logically (row-major), and layouts are the
backend's decision, so a custom layout is a hint that never changes results: it is
checked (its shape must be the buffer's) and then has no effect. A TileLang global
tensor annotated with a permuting layout is stored permuted there; here it stays in
logical order, which is what a program that reads it back through the same
annotation sees in both.
"""

from __future__ import annotations


class Layout:
    """`T.Layout(shape, forward_fn)`: a storage order, `forward_fn(*indices)` -> physical indices."""

    def __init__(self, shape, forward_fn):
        if not callable(forward_fn):
            raise TypeError(f"T.Layout needs a function of the indices, got {forward_fn!r}")
        self.shape = tuple(shape)
        self.forward_fn = forward_fn

    def __repr__(self) -> str:
        return f"T.Layout({self.shape})"


class Fragment(Layout):
    """`T.Fragment(shape, forward_thread_fn=, replicate=1, forward_index_fn=)`: a thread mapping."""

    def __init__(self, shape, forward_thread_fn=None, replicate=1, forward_index_fn=None, forward_fn=None):
        fn = forward_fn or forward_thread_fn or forward_index_fn
        super().__init__(shape, fn if fn is not None else (lambda *i: list(i)))
        self.replicate = replicate

    def __repr__(self) -> str:
        return f"T.Fragment({self.shape})"
