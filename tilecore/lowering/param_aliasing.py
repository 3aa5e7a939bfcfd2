"""Whether a kernel may promise the C compiler that its tensor parameters do not alias (TIR's
`tir.noalias`, which TVM's C-family code generators print as `__restrict__` on every pointer).

Under `__restrict__` the compiler treats a thread's own accesses through a parameter as the only
ones to that memory: a block barrier does not order them against other threads' stores, so it
may move a load of the parameter above the barrier or keep it in a register across a loop whose
stores, in this thread, are predicated off. A kernel whose threads hand values to each other
through a global tensor (one thread writes an element that the others read after a barrier)
then reads stale values. `tilecore.testing.while_loops_kernel` does that (a `while` test reads
the global element that thread 0 increments in the body): a GPU backend's compiler loaded the
element once, before the barrier, and the other threads looped forever (session 18,
benchmarks/results/gpu-session18/). So a kernel that both writes and reads one of its tensor
parameters gets no such promise; kernels that only read some tensors and only write others
(GEMM, attention, softmax, layernorm) keep it. A backend whose code generator prints the
promise regardless drops it where `LoweredKernel.noalias` is False.

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from typing import FrozenSet, Iterator

from ..ir import nodes as N
from ..ir.visitor import walk, walk_stmts
from ..passes.init_check import buffers_read, buffers_written


def _read_buffers(func: N.PrimFunc) -> Iterator[str]:
    """Names of the buffers `func` reads anywhere: what each statement reads (init_check's
    `buffers_read`) and the loads of `while` tests, which that analysis leaves out."""
    for s in walk_stmts(func.body):
        yield from (buf.name for buf, _ in buffers_read(s))
        if isinstance(s, N.While):
            yield from (node.buffer.name for node in walk(s.cond) if isinstance(node, N.Load))


def params_read_and_written(func: N.PrimFunc) -> FrozenSet[str]:
    """The tensor parameters that `func` both writes and reads."""
    params = {p.name for p in func.params}
    written = {b.name for s in walk_stmts(func.body) for b in buffers_written(s)} & params
    return frozenset(written & set(_read_buffers(func)))


def may_promise_noalias(func: N.PrimFunc) -> bool:
    """Whether `func`'s pointer parameters may be declared non-aliasing (`__restrict__`)."""
    return not params_read_and_written(func)
