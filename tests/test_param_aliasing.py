"""Which kernels may declare their tensor parameters non-aliasing (tilecore.lowering.param_aliasing):
not one whose threads hand values to each other through a tensor it both writes and reads."""

from __future__ import annotations

import tilecore.language as T
from tilecore.lowering.param_aliasing import may_promise_noalias, params_read_and_written
from tilecore.testing import per_thread_while_kernel, while_loops_kernel


def scale(n=256):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):  # type: ignore[valid-type]
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                Y[i] = X[i] * 2.0

    return main


def scale_in_place(n=256):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32")):  # type: ignore[valid-type]
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                X[i] = X[i] * 2.0

    return main


def test_a_while_test_on_a_global_element_the_body_writes_forbids_noalias():
    assert params_read_and_written(while_loops_kernel()) == {"Steps"}
    assert not may_promise_noalias(while_loops_kernel())


def test_tensors_only_read_or_only_written_keep_it():
    assert params_read_and_written(scale()) == frozenset() and may_promise_noalias(scale())
    assert may_promise_noalias(per_thread_while_kernel())  # its whiles test registers, not tensors


def test_a_tensor_updated_in_place_forbids_it():
    assert params_read_and_written(scale_in_place()) == {"X"}
